"""Pretraining-data throughput and peak memory: kbert vs Google's create_pretraining_data.py.

Both tools run as separate processes on the same Google-format text (one sentence per line,
blank line between documents), made once from the WikiExtractor corpus with kbert's reader,
with the same flags (dupe_factor 1 by default). Runs are interleaved (kbert, Google, kbert)
for each corpus size. Reported per run: instances written, wall time, instances/s (whole
process, start-up included), CPU seconds (user+sys) and peak RSS (os.wait4). "kbert" is the
default (Google-exact tokenization), "kbert_fast" adds --noexact_tokenization. A final kbert
row reads the WikiExtractor files directly (--input_format=wikiextractor, sentence splitting
included). The marginal rate between the two corpus sizes cancels start-up costs.

  python -m bench.pretraining_data --work_dir=/tmp/kbert_bench --num_files=10,30
"""

import glob
import json
import os
import shutil
import sys

from absl import app
from absl import flags

from bench import runs
from bench import subprocess_stats
from kbert.data import corpus

DEFAULT_CORPUS = os.path.join(runs.WIKI_CORPUS, "wiki_*")

_CORPUS = flags.DEFINE_string("corpus", DEFAULT_CORPUS, "WikiExtractor files (glob).")
_VOCAB = flags.DEFINE_string("vocab_file", None, "vocab.txt; defaults to MiniLM's (uncased).")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_pretraining", "Scratch directory.")
_NUM_FILES = flags.DEFINE_list("num_files", ["10", "30"], "Corpus sizes, in files.")
_DUPE = flags.DEFINE_integer("dupe_factor", 1, "dupe_factor for both tools.")
_TOOLS = flags.DEFINE_list(
    "tools", ["kbert", "google", "kbert", "kbert_fast"],
    "Run order per size; kbert_fast is kbert with --noexact_tokenization.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def main(argv):
    del argv
    vocab = _VOCAB.value or runs.minilm_vocab()
    files = sorted(glob.glob(_CORPUS.value))
    os.makedirs(_WORK.value, exist_ok=True)
    results = []
    for num in map(int, _NUM_FILES.value):
        subset = files[:num]
        text = os.path.join(_WORK.value, f"text_{num}.txt")
        if not os.path.exists(text):
            docs = corpus.write_text_format(",".join(subset), text, corpus.WIKIEXTRACTOR)
            print(f"wrote {text}: {docs} documents", flush=True)
        raw_mb = sum(os.path.getsize(f) for f in subset) / 1e6
        text_mb = os.path.getsize(text) / 1e6
        jobs = [(tool, text, "text") for tool in _TOOLS.value]
        jobs.append(("kbert", ",".join(subset), "wikiextractor"))
        for i, (tool, source, fmt) in enumerate(jobs):
            out_dir = os.path.join(_WORK.value, f"out_{num}_{i}_{tool}")
            shutil.rmtree(out_dir, ignore_errors=True)
            os.makedirs(out_dir)
            output = os.path.join(out_dir, "train.tfrecord")
            tool_flags = runs.pretraining_data_flags(source, output, vocab, _DUPE.value)
            if tool.startswith("kbert"):
                command = [sys.executable, "tools/create_pretraining_data.py", *tool_flags,
                           f"--input_format={fmt}"]
                if tool == "kbert_fast":
                    command.append("--noexact_tokenization")
            else:
                command = [sys.executable, "-m", "bert.create_pretraining_data", *tool_flags]
            row = dict(files=num, raw_mb=round(raw_mb, 1), text_mb=round(text_mb, 1), tool=tool,
                       input_format=fmt,
                       **subprocess_stats.measure_tool(command, output + "*"),
                       command=" ".join(command[1:]))
            results.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(out_dir, ignore_errors=True)

    print("\n| files | text MB | tool | input | instances | wall s | CPU s | instances/s | "
          "peak RSS MB |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['files']} | {r['text_mb']} | {r['tool']} | {r['input_format']} | "
              f"{r['instances']:,} | {r['wall_s']} | {r['cpu_s']} | {r['instances_per_s']:,} | "
              f"{r['peak_rss_mb']} |")
    for num in map(int, _NUM_FILES.value):
        rows = [r for r in results if r["files"] == num and r["input_format"] == "text"]
        google = [r for r in rows if r["tool"] == "google"]
        for name in ("kbert", "kbert_fast"):
            kbert = [r for r in rows if r["tool"] == name]
            if google and kbert:
                best = max(kbert, key=lambda r: r["instances_per_s"])
                ratio = best["instances_per_s"] / google[0]["instances_per_s"]
                cpu_ratio = (google[0]["cpu_s"] / google[0]["instances"]) / (
                    best["cpu_s"] / best["instances"])
                print(f"{num} files: {name}/Google instances/s = {ratio:.1f}x (wall), "
                      f"{cpu_ratio:.1f}x (CPU time per instance)")
    # Marginal rate between the smallest and largest corpus: start-up costs cancel out.
    sizes = sorted({r["files"] for r in results})
    if len(sizes) > 1:
        rates = {}
        for tool in ("kbert", "kbert_fast", "google"):
            small, large = ([r for r in results if r["files"] == n and r["tool"] == tool
                             and r["input_format"] == "text"] for n in (sizes[0], sizes[-1]))
            if small and large:
                fastest = (min(small, key=lambda r: r["wall_s"]),
                           min(large, key=lambda r: r["wall_s"]))
                rates[tool] = (fastest[1]["instances"] - fastest[0]["instances"]) / (
                    fastest[1]["wall_s"] - fastest[0]["wall_s"])
                print(f"{tool}: marginal {rates[tool]:,.0f} instances/s "
                      f"({sizes[0]} -> {sizes[-1]} files, start-up excluded)")
        for name in ("kbert", "kbert_fast"):
            if name in rates and "google" in rates:
                print(f"marginal {name}/Google = {rates[name] / rates['google']:.1f}x")
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, results)


if __name__ == "__main__":
    app.run(main)
