"""`create_pretraining_data` as an Apache Beam pipeline (the `kbert-keras[beam]` extra).

One element per shard: a shard is the instances of one byte range of the input, made by the
same `write_shard` as the local tool, so the files are byte-identical to
`kbert.data.create_pretraining_data`'s for the same arguments, and a re-run skips complete
shards. Workers write the shards (under a temporary name, renamed when complete) and a last
step writes the `*_meta.json` sidecar, so the output directory must be one that every worker
sees (the local disk, or a shared file system).

Without a runner in the options the pipeline runs in this process on Beam's FnApiRunner (the
DirectRunner's engine for batch pipelines). Beam's DirectRunner itself first tries Prism, a Go
binary it downloads from GitHub on first use, starting a worker pool and a job server for it,
and falls back to the FnApiRunner where the download fails (offline); nothing is downloaded
here unless the options ask for a runner.
"""

import os

import apache_beam as beam
from apache_beam.options import pipeline_options as beam_options
from apache_beam.runners.portability.fn_api_runner import fn_runner

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
        pipeline_options: `apache_beam.options.pipeline_options.PipelineOptions` or None.
            Without a `runner` among them, the pipeline runs in this process (Beam's
            FnApiRunner; see the module docstring).
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
    options = pipeline_options or beam_options.PipelineOptions()
    runner = None
    if options.view_as(beam_options.StandardOptions).runner is None:
        runner = fn_runner.FnApiRunner()
    with beam.Pipeline(runner=runner, options=options) as pipeline:
        _ = (pipeline
             | "Shards" >> beam.Create(pending)
             | "Spread" >> beam.Reshuffle()
             | "Write" >> beam.ParDo(_WriteShard())
             | "Counts" >> beam.combiners.ToDict()
             | "Sidecar" >> beam.Map(lambda counts: writer.finish_shards(plan, counts)))
    return {job.path: records.read_meta(plan.meta_file)["shards"][
        os.path.basename(job.path)] for job in plan.jobs}
