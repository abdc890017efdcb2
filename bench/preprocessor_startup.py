"""What a process pays before its first batch is tokenized: `kbert.BertPreprocessor` built on
the real uncased vocab, its graph traced (`kbert.data.pipeline.tokenize`'s compiled function)
and its first call (TensorFlow instantiates the graph), for text pairs and for single texts.

Each round is a fresh process (the costs are per process), running the kbert of the tree this
script is in; medians of --rounds. To compare two commits, copy this file into a `git
worktree` of the other one and run it there too.

  python -m bench.preprocessor_startup --rounds=5
"""

import json
import statistics
import sys

from absl import app
from absl import flags

from bench import runs

_ROUNDS = flags.DEFINE_integer("rounds", 5, "Fresh processes to take the median of.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "The preprocessor's length.")

_ROUND = """
import json, sys, time
import tensorflow as tf
import kbert
from kbert.data import pipeline

vocab, max_seq_length = sys.argv[1], int(sys.argv[2])
texts = tf.constant(["The man said it was a dog.", "Hello, world!"] * 4)
seconds = {}
start = time.perf_counter()
preprocessor = kbert.BertPreprocessor(vocab, max_seq_length=max_seq_length)
seconds["build"] = time.perf_counter() - start
for kind, inputs in (("pair", (texts, texts)), ("single", (texts,))):
    function = pipeline._compiled(preprocessor, kind == "pair")
    start = time.perf_counter()
    function.get_concrete_function(*[tf.TensorSpec([None], tf.string)] * len(inputs))
    seconds[f"{kind}_trace"] = time.perf_counter() - start
    start = time.perf_counter()
    function(*inputs)
    seconds[f"{kind}_first_call"] = time.perf_counter() - start
print(json.dumps(seconds))
"""


def one_round():
    return runs.child_result(
        [sys.executable, "-c", _ROUND, runs.minilm_vocab(), str(_MAX_SEQ_LENGTH.value)],
        env=runs.child_env())


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    rounds = [one_round() for _ in range(_ROUNDS.value)]
    medians = {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}
    print(json.dumps({"cpu": runs.cpu()["model_name"], "seconds": medians}))


if __name__ == "__main__":
    app.run(main)
