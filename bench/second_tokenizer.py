"""What a second `kbert.FullTokenizer` of one vocabulary costs before its first batch.

In one process, three tokenizers of MiniLM's real 30,522-piece vocab (uncased, cased, uncased
again): for each, seconds to build it, to tokenize its first batch of ids and its first batch
with offsets (those first calls trace the tokenizer's graphs, unless a tokenizer of the same
vocabulary and options already did), and a second batch of ids. `--rounds` fresh processes,
medians. To compare two commits, run this from each checkout (`PYTHONPATH=<checkout>`).

  python -m bench.second_tokenizer --rounds=3
"""

import statistics
import sys

from absl import app
from absl import flags

from bench import runs

_ROUNDS = flags.DEFINE_integer("rounds", 3, "Fresh processes to take the median of.",
                               lower_bound=1)
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")

_ROUND = """
import json, sys, time
import tensorflow  # kbert imports it on first use: not part of any timing below
import kbert

texts = ["The man said it was a dog.", "Hello, world!"] * 4
rows = []
for lower in (True, False, True):
    seconds = {}
    start = time.perf_counter()
    tokenizer = kbert.FullTokenizer(sys.argv[1], do_lower_case=lower)
    seconds["build"] = time.perf_counter() - start
    for name, call in (("first_ids", tokenizer.tokenize_ids),
                       ("first_offsets", tokenizer.tokenize_ids_with_offsets),
                       ("second_ids", tokenizer.tokenize_ids)):
        start = time.perf_counter()
        call(texts)
        seconds[name] = time.perf_counter() - start
    rows.append(seconds)
print(json.dumps({"kbert": kbert.__file__, "rows": rows}))
"""


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    rounds = [runs.child_result([sys.executable, "-c", _ROUND, runs.minilm_vocab()],
                                env=runs.child_env())
              for _ in range(_ROUNDS.value)]
    tokenizers = ("uncased", "cased", "uncased_again")
    medians = {
        name: {step: round(statistics.median(r["rows"][i][step] for r in rounds), 3)
               for step in rounds[0]["rows"][i]}
        for i, name in enumerate(tokenizers)}
    runs.report({"cpu": runs.cpu(), "kbert": rounds[0]["kbert"], "rounds": _ROUNDS.value,
                 "medians": medians, "raw": [r["rows"] for r in rounds]},
                _OUTPUT.value, indent=2)


if __name__ == "__main__":
    app.run(main)
