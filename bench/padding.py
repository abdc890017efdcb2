"""Padding in kbert's training batches: length-grouped pools (the default) vs 8-token buckets.

Tokenizes the recipes' real training sets with MiniLM's vocabulary exactly as the tools do
(`BertPreprocessor` for GLUE, `conll.featurize` for NER), builds one epoch of
`kbert.data.pipeline.training_dataset` each way, and counts the tokens the batches hold
(rows × width) against the real ones, and the steps. The buckets are the edges kbert used
before pools: every 8 tokens to 64, every 16 to 128, then every 64.

  python -m bench.padding --batch_size=32
"""

import os

import numpy as np
from absl import app
from absl import flags

from bench import runs

_GLUE = flags.DEFINE_string("glue_dir", os.path.join(runs.SHARED_DATA, "glue"),
                            "Directory with SST-2/ and MRPC/.")
_CONLL = flags.DEFINE_string(
    "conll_train", os.path.join(runs.SHARED_DATA, "conll2003", "train.txt"),
    "CoNLL-2003's train.txt.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Training batch size.")
_SEED = flags.DEFINE_integer("seed", 12345, "Subset and shuffle seed.")

# (name, GLUE task, max_seq_length, training examples; 0 = all)
GLUE_SETS = (("SST-2, 8,000 sentences", "SST-2", 64, 8000), ("MRPC", "MRPC", 128, 0))


def old_bucket_edges(max_length):
    edges = list(range(8, 64, 8)) + list(range(64, 128, 16)) + list(range(128, 512, 64))
    return [edge for edge in edges if edge < max_length]


def epoch_tokens(tokenized, targets, bucket_boundaries):
    """(tokens the batches of one epoch hold, steps)."""
    from kbert.data import pipeline

    dataset, steps = pipeline.training_dataset(tokenized, targets, _BATCH.value,
                                               seed=_SEED.value,
                                               bucket_boundaries=bucket_boundaries)
    held = sum(int(np.prod(batch[0]["token_ids"].shape)) for batch in dataset)
    return held, steps


def glue_tokenized(task, max_seq_length, count):
    from kbert import BertPreprocessor
    from kbert.data import glue
    from kbert.data import pipeline

    examples = glue.read_glue(os.path.join(_GLUE.value, task), glue.get_task(task), "train")
    examples = examples.sample(count or None, seed=_SEED.value)
    preprocessor = BertPreprocessor(os.path.join(runs.minilm_dir(), "vocab.txt"),
                                    do_lower_case=True, max_seq_length=max_seq_length,
                                    pad_to_max_length=False)
    return pipeline.tokenize(examples, preprocessor), examples.label


def conll_tokenized():
    from kbert.data import conll
    from kbert.data import pipeline
    from kbert.tokenization import FullTokenizer

    sentences = conll.read_ner_file(_CONLL.value)
    labels = conll.label_vocabulary(sentences)
    tokenizer = FullTokenizer(os.path.join(runs.minilm_dir(), "vocab.txt"), do_lower_case=True)
    windows = conll.featurize(sentences, tokenizer, 128, {label: i for i, label in
                                                          enumerate(labels)})
    return (pipeline.Tokenized(windows.features, windows.lengths),
            (windows.label_ids, windows.label_weights))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    sets = [(name, *glue_tokenized(task, length, count))
            for name, task, length, count in GLUE_SETS]
    sets.append(("CoNLL-2003, seq 128", *conll_tokenized()))
    print("| training set | examples | real tokens | pools: held / real, steps "
          "| 8-token buckets: held / real, steps |")
    print("|---|---:|---:|---|---|")
    for name, tokenized, targets in sets:
        real = int(tokenized.lengths.sum())
        pools = epoch_tokens(tokenized, targets, None)
        buckets = epoch_tokens(tokenized, targets,
                               old_bucket_edges(int(tokenized.lengths.max())))
        print(f"| {name} | {len(tokenized):,} | {real:,} | {pools[0] / real:.3f}, {pools[1]} "
              f"| {buckets[0] / real:.3f}, {buckets[1]} |", flush=True)


if __name__ == "__main__":
    app.run(main)
