"""`create_pretraining_data` as an Apache Beam pipeline (the `kbert-keras[beam]` extra).

One element per shard: a shard is the instances of one byte range of the input, made by the
same `write_shard` as the local tool, so the files are byte-identical to
`kbert.data.create_pretraining_data`'s for the same arguments, and a re-run skips complete
shards. Workers write the shards (under a temporary name, renamed when complete) and a last
step writes the `*_meta.json` sidecar, so the output directory must be one that every worker
sees (the DirectRunner's local disk, or a shared file system).
"""

import os

import apache_beam as beam

from kbert.data import records
from kbert.data.pretraining import writer


class _WriteShard(beam.DoFn):
    def process(self, job):
        yield os.path.basename(job.path), writer.write_shard(job)


def create_pretraining_data_beam(input_file, output_file, vocab_file, *, pipeline_options=None,
                                 **kwargs):
    """Runs `kbert.data.create_pretraining_data` as a Beam pipeline, one shard per element.

    Args:
        input_file, output_file, vocab_file: as `create_pretraining_data`.
        pipeline_options: `apache_beam.options.pipeline_options.PipelineOptions` or None
            (the DirectRunner).
        **kwargs: the other keyword arguments of `create_pretraining_data` (`config`,
            `num_shards`, `random_seed`, `input_format`, ...), except `progress`.

    Returns:
        dict: shard path -> number of instances.
    """
    plan = writer.plan_shards(input_file, output_file, vocab_file, **kwargs)
    pending = [job for job in plan.jobs
               if plan.meta["shards"][os.path.basename(job.path)] is None]
    if not pending:
        return writer.finish_shards(plan, {})
    with beam.Pipeline(options=pipeline_options) as pipeline:
        _ = (pipeline
             | "Shards" >> beam.Create(pending)
             | "Spread" >> beam.Reshuffle()
             | "Write" >> beam.ParDo(_WriteShard())
             | "Counts" >> beam.combiners.ToDict()
             | "Sidecar" >> beam.Map(lambda counts: writer.finish_shards(plan, counts)))
    return {job.path: records.read_meta(plan.meta_file)["shards"][
        os.path.basename(job.path)] for job in plan.jobs}
