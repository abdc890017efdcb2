"""Pretraining data at scale: wall time and peak memory vs Google's tool, Beam, and start-up.

1. Corpus: the shared WikiExtractor files repeated (copy k rewrites every `<doc id="N"` to
   `<doc id="N-k"`, so documents stay distinct) until each --sizes_mb is reached, in
   --work_dir; Google's text format (one sentence per line) is written from the same files by
   kbert's reader, as bench/pretraining_data.py does.
2. For each size: kbert's tools/create_pretraining_data.py (--num_shards shards) and Google's
   create_pretraining_data.py (the same number of output files, comma-separated) on the same
   text with the same flags, each a separate process: instances, wall time, CPU time and peak
   RSS (os.wait4). Google's tool holds every document and instance in memory; kbert streams
   chunks, so its peak RSS should stay flat as the corpus grows. Google runs only up to
   --google_max_mb (its time grows ~36x faster).
3. At --beam_size_mb: `kbert.data.pretraining.beam_pipeline` on the DirectRunner with --beam_workers
   worker processes against the local tool, same input, flags and shards (the shards are
   byte-identical by design; the bench checks the instance counts agree). Beam's CPU time
   includes its workers'; its peak RSS is the largest single process, not the sum.
4. Start-up, on a one-document input: the tool's whole run, `import kbert.data` (from
   `python -X importtime`, which also lists the biggest imports), the character-table build
   and the FastBertTokenizer probe (`kbert.tokenization.char_table`, `shortcut`), each in a
   fresh process: without the on-disk cache, with an empty one, warm. Rough on a loaded machine.

  python -m bench.pretraining_data_scale --sizes_mb=30,120,250 --google_max_mb=250 \
      --output=/tmp/pretraining_data_scale.json
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench import runs
from bench import subprocess_stats

_CORPUS = flags.DEFINE_string(
    "corpus", os.path.join(runs.WIKI_CORPUS, "wiki_*"), "WikiExtractor files (glob) to repeat.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "vocab.txt; defaults to MiniLM's (uncased).")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_pretraining_scale",
                            "Scratch directory (holds the repeated corpus: sizes_mb x ~2).")
_SIZES = flags.DEFINE_list("sizes_mb", ["30", "120", "250"], "Corpus sizes, in MB of raw "
                           "WikiExtractor text.")
_SHARDS = flags.DEFINE_integer("num_shards", 8, "Output shards (both tools).", lower_bound=1)
_DUPE = flags.DEFINE_integer("dupe_factor", 1, "dupe_factor for every run.", lower_bound=1)
_GOOGLE_MAX = flags.DEFINE_integer("google_max_mb", 250, "Run Google's tool up to this size.",
                                   lower_bound=0)
_BEAM_SIZE = flags.DEFINE_integer("beam_size_mb", 120, "Corpus size for Beam vs local; 0 skips.",
                                  lower_bound=0)
_BEAM_WORKERS = flags.DEFINE_integer("beam_workers", 2, "DirectRunner worker processes.",
                                     lower_bound=1)
_STARTUP = flags.DEFINE_bool("startup", True, "Measure start-up on a one-document input.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")
_BEAM_CHILD = flags.DEFINE_string("beam_child", None, "internal: INPUT,OUTPUT for the Beam run.")

_DOC_ID = re.compile(rb'<doc id="([^"]*)"')


def tool_flags(source, output, vocab):
    return runs.pretraining_data_flags(source, output, vocab, _DUPE.value)


def repeated_corpus(size_mb):
    """A directory of WikiExtractor files, the shared ones repeated with distinct doc ids."""
    files = sorted(glob.glob(_CORPUS.value))
    if not files:
        raise app.UsageError(f"--corpus {_CORPUS.value}: no files")
    out = os.path.join(_WORK.value, f"corpus_{size_mb}mb")
    if os.path.exists(os.path.join(out, "DONE")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    written, copy = 0, 0
    while written < size_mb * 1e6:
        for path in files:
            with open(path, "rb") as f:
                data = _DOC_ID.sub(lambda m, k=copy: b'<doc id="%s-%d"' % (m.group(1), k), f.read())
            with open(os.path.join(out, f"wiki_{copy:03d}_{os.path.basename(path)}"), "wb") as f:
                f.write(data)
            written += len(data)
            if written >= size_mb * 1e6:
                break
        copy += 1
    open(os.path.join(out, "DONE"), "w").close()
    return out


def text_format(corpus_dir):
    from kbert.data import corpus

    text = corpus_dir + ".txt"
    if not os.path.exists(text):
        corpus.write_text_format(os.path.join(corpus_dir, "wiki_*"), text, corpus.WIKIEXTRACTOR)
    return text


def run_tool(name, command, out_dir, pattern):
    measured = subprocess_stats.measure_tool(command, pattern)
    shutil.rmtree(out_dir, ignore_errors=True)
    return dict(tool=name, **measured)


def measure_size(size_mb, vocab):
    corpus_dir = repeated_corpus(size_mb)
    text = text_format(corpus_dir)
    text_mb = round(os.path.getsize(text) / 1e6, 1)
    rows = []
    jobs = ["kbert", "google", "kbert"] if size_mb <= _GOOGLE_MAX.value else ["kbert"]
    for i, tool in enumerate(jobs):
        out_dir = os.path.join(_WORK.value, f"out_{size_mb}_{i}")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        if tool == "kbert":
            command = [sys.executable, "tools/create_pretraining_data.py",
                       *tool_flags(text, os.path.join(out_dir, "train.tfrecord"), vocab),
                       f"--num_shards={_SHARDS.value}"]
        else:
            outputs = ",".join(os.path.join(out_dir, f"train.tfrecord-{s:05d}")
                               for s in range(_SHARDS.value))
            command = [sys.executable, "-m", "bert.create_pretraining_data",
                       *tool_flags(text, outputs, vocab)]
        row = dict(size_mb=size_mb, text_mb=text_mb, shards=_SHARDS.value,
                   **run_tool(tool, command, out_dir, os.path.join(out_dir, "train.tfrecord*")))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def beam_vs_local(vocab):
    corpus_dir = repeated_corpus(_BEAM_SIZE.value)
    source = os.path.join(corpus_dir, "wiki_*")
    rows = []
    for tool in ("kbert", "beam", "kbert"):
        out_dir = os.path.join(_WORK.value, f"out_beam_{tool}")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        output = os.path.join(out_dir, "train.tfrecord")
        if tool == "kbert":
            command = [sys.executable, "tools/create_pretraining_data.py",
                       *tool_flags(source, output, vocab), "--input_format=wikiextractor",
                       f"--num_shards={_SHARDS.value}"]
        else:
            command = [sys.executable, "-m", "bench.pretraining_data_scale",
                       f"--beam_child={source},{output}", f"--vocab_file={vocab}",
                       f"--num_shards={_SHARDS.value}", f"--dupe_factor={_DUPE.value}",
                       f"--beam_workers={_BEAM_WORKERS.value}"]
        row = dict(size_mb=_BEAM_SIZE.value, shards=_SHARDS.value, input_format="wikiextractor",
                   **run_tool(tool if tool == "kbert" else f"beam_direct_{_BEAM_WORKERS.value}w",
                              command, out_dir, output + "*"))
        print(json.dumps(row), flush=True)
        rows.append(row)
    counts = {r["instances"] for r in rows}
    if len(counts) != 1:
        raise RuntimeError(f"Beam and the local tool wrote different instance counts: {rows}")
    return rows


def run_beam_child():
    """The Beam pipeline, in this (measured) process, with the local tool's arguments."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from kbert.data.pretraining import beam_pipeline
    from kbert.data.pretraining import instances

    source, output = _BEAM_CHILD.value.split(",")
    options = PipelineOptions([f"--direct_num_workers={_BEAM_WORKERS.value}",
                               "--direct_running_mode=multi_processing"])
    config = instances.PretrainingDataConfig(
        max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.15, short_seq_prob=0.1,
        dupe_factor=_DUPE.value)
    beam_pipeline.create_pretraining_data_beam(
        source, output, _VOCAB.value, pipeline_options=options, config=config,
        do_lower_case=True, random_seed=12345, num_shards=_SHARDS.value,
        input_format="wikiextractor")


_PROBE = """
import sys, time
start = time.perf_counter()
from kbert.tokenization import char_table, shortcut
imported = time.perf_counter()
char_table.build_char_table(True)
table = time.perf_counter()
shortcut.fast_text_pattern(True)
probe = time.perf_counter()
print(imported - start, table - imported, probe - table)
"""


def startup(vocab):
    """Start-up costs, each in a fresh process: without kbert's on-disk cache of the character
    table and the shortcut probe (KBERT_CACHE_DIR=''), with an empty one (cold), then warm."""
    tiny = os.path.join(_WORK.value, "one_document.txt")
    with open(tiny, "w", encoding="utf-8") as f:
        f.write("The first sentence of a tiny document.\nAnd its second one.\n\n"
                "Another document starts here.\nIt ends here.\n")
    cache = os.path.join(_WORK.value, "kbert_cache")
    shutil.rmtree(cache, ignore_errors=True)
    rows = []
    for attempt, cache_dir in (("no cache", ""), ("cold cache", cache), ("warm cache", cache)):
        env = dict(runs.child_env(), KBERT_CACHE_DIR=cache_dir)
        out_dir = os.path.join(_WORK.value, "out_startup")
        os.makedirs(out_dir, exist_ok=True)
        command = [sys.executable, "tools/create_pretraining_data.py",
                   *tool_flags(tiny, os.path.join(out_dir, "train.tfrecord"), vocab)]
        code, wall, cpu, rss, tail = subprocess_stats.run(command, cwd=runs.ROOT, env=env)
        if code:
            raise RuntimeError(f"start-up run failed ({code}):\n{tail}")
        shutil.rmtree(out_dir, ignore_errors=True)
        if attempt == "cold cache":  # the probe below would otherwise find the tool's cache
            shutil.rmtree(cache, ignore_errors=True)
        probe = subprocess.run([sys.executable, "-c", _PROBE], cwd=runs.ROOT, env=env,
                               capture_output=True, text=True, check=True)
        imports, table, shortcut = map(float, probe.stdout.split())
        rows.append(dict(run=attempt, tool_wall_s=round(wall, 2), tool_cpu_s=round(cpu, 2),
                         tool_peak_rss_mb=round(rss), tokenization_import_s=round(imports, 2),
                         char_table_s=round(table, 2), shortcut_probe_s=round(shortcut, 2)))
        print(json.dumps(rows[-1]), flush=True)
    timing = subprocess.run([sys.executable, "-X", "importtime", "-c", "import kbert.data"],
                            cwd=runs.ROOT, env=runs.child_env(), capture_output=True, text=True,
                            check=True)
    cumulative = {}
    for line in timing.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].strip()
            if name.split(".")[0] in ("tensorflow", "keras", "keras_nlp", "keras_hub", "kbert",
                                      "tensorflow_text", "sklearn", "numpy", "apache_beam"):
                cumulative[name] = max(cumulative.get(name, 0), int(parts[1]) / 1e6)
    top = sorted(cumulative.items(), key=lambda kv: -kv[1])[:12]
    rows.append({"run": "importtime: import kbert.data (cumulative s)",
                 **{name: round(s, 2) for name, s in top}})
    print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    vocab = _VOCAB.value or runs.minilm_vocab()
    if _BEAM_CHILD.value:
        run_beam_child()
        return
    os.makedirs(_WORK.value, exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "sizes": [],
               "beam": [], "startup": []}

    def save():
        if _OUTPUT.value:
            runs.write_json(_OUTPUT.value, results)

    if _STARTUP.value:
        results["startup"] = startup(vocab)
        save()
    for size in map(int, _SIZES.value):
        results["sizes"].extend(measure_size(size, vocab))
        save()
    if _BEAM_SIZE.value:
        results["beam"] = beam_vs_local(vocab)
        save()
    print("\n| MB | text MB | tool | instances | wall s | CPU s | instances/s | peak RSS MB |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in results["sizes"] + results["beam"]:
        print(f"| {r['size_mb']} | {r.get('text_mb', '')} | {r['tool']} | {r['instances']:,} | "
              f"{r['wall_s']} | {r['cpu_s']} | {r['instances_per_s']:,} | {r['peak_rss_mb']} |")
    for size in map(int, _SIZES.value):
        rows = [r for r in results["sizes"] if r["size_mb"] == size]
        google = [r for r in rows if r["tool"] == "google"]
        kbert = [r for r in rows if r["tool"] == "kbert"]
        if google and kbert:
            best = min(kbert, key=lambda r: r["wall_s"])
            print(f"{size} MB: Google/kbert wall time = {google[0]['wall_s'] / best['wall_s']:.1f}x"
                  f", peak RSS {google[0]['peak_rss_mb']} vs {best['peak_rss_mb']} MB")
    save()


if __name__ == "__main__":
    app.run(main)
