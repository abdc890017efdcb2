"""GoEmotions multi-label fine-tuning: kbert's recipe vs the Hugging Face Trainer, over seeds.

GoEmotions (28 labels: 27 emotions and neutral; 43,410 / 5,426 / 5,427 Reddit comments) is
converted once to the `text<TAB>labels` TSV a user would give kbert (`bench.multi_label_files`).
Then for each seed, as separate processes one after the other, on the same real MiniLM weights
(converted once to a Google checkpoint for kbert, read from the Hugging Face directory by the
peer), with the same seeded training subset, epochs, batch size, learning rate, 10% warm-up,
weight decay, sequence length and precision (`bench.budget`; float32 by default):
  kbert        `tools/run_classifier.py --multi_label` (length-grouped batches), the last
               epoch kept, plus any --kbert_flags
  huggingface  `bench/hf_multi_label_peer.py`: `transformers.Trainer` with
               `problem_type="multi_label_classification"`, dynamic padding and length grouping
Both write their dev and test probabilities (`<split>_predictions.tsv`, `p_<label>`), which are
scored here by the same code (`kbert.tasks.multi_label_metrics`) against the release's labels:
test micro and macro F1 at the threshold 0.5, and with per-label thresholds tuned on that side's
own dev probabilities (`tune_thresholds`); and training examples/s, examples x epochs / seconds
(from each side's `train_results.json`) of the whole training call (kbert's also writes its
checkpoint and backup) and of the epochs alone (timed the same way on both sides). The JSON
has each seed, and per side the mean and the sample standard deviation (n - 1) over the
seeds, with kbert - Trainer per seed (paired) summarised the same way; it is rewritten after
every seed.

  python -m bench.multi_label --work_dir=/tmp/kbert_bench_multi_label \\
      --output=/tmp/kbert_bench_multi_label/results.json
"""

import datetime
import json
import os
import re
import statistics
import subprocess
import sys

from absl import app
from absl import flags

from bench import budget
from bench import multi_label_files
from bench import runs
from kbert.tasks import multi_label_metrics

_DATA = flags.DEFINE_string("data_dir", os.path.join(runs.SHARED_DATA, "goemotions"),
                            "GoEmotions: train.tsv, dev.tsv, test.tsv and emotions.txt.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_multi_label", "Scratch directory.")
_SEEDS = budget.define_seeds_flag(["12345", "12346", "12347"],
                                  "Seeds: subset, shuffle, dropout and head (both).")
_MAX_EVAL = flags.DEFINE_integer("max_eval_examples", None,
                                 "Only the first this many dev and test rows (smoke runs).",
                                 lower_bound=1)
_BUDGET = budget.define_budget_flags(
    max_train_examples=None, max_seq_length=64, train_batch_size=32, eval_batch_size=32,
    learning_rate=1e-4, num_train_epochs=1)
_OUTPUT = flags.DEFINE_string("output", None, "The results JSON; default work_dir/results.json.")
_KBERT_FLAGS = budget.define_kbert_flags("run_classifier.py", "--jit_compile=false")
_HF_FLAGS = flags.DEFINE_list(
    "huggingface_flags", [], "Extra bench/hf_multi_label_peer.py flags, e.g. "
    "--huggingface_flags=--label_share_bias (the head's bias starts as kbert's does).")

PEER_SCRIPTS = {"kbert": "tools/run_classifier.py", "huggingface": "bench.hf_multi_label_peer"}
_PEERS = flags.DEFINE_list("peers", ["kbert", "huggingface"], "Sides to run: kbert, huggingface.")
runs.validate_peers(_PEERS, PEER_SCRIPTS)
# Per side and seed: what is summarised over the seeds and compared between the sides.
SCORES = ("test_micro_f1@0.5", "test_macro_f1@0.5", "test_micro_f1@dev_tuned",
          "test_macro_f1@dev_tuned", "dev_micro_f1@0.5", "dev_macro_f1@0.5",
          "examples_per_second", "epoch_examples_per_second")


def require_recipe():
    """Fails with a usage error unless `tools/run_classifier.py` has the multi-label flags."""
    help_text = subprocess.run(
        [sys.executable, PEER_SCRIPTS["kbert"], "--helpfull"], cwd=runs.ROOT,
        env=runs.child_env(), capture_output=True, text=True).stdout
    absent = [flag for flag, pattern in (("--multi_label", r"--(\[no\])?multi_label:"),
                                         ("--label_separator", r"--label_separator:"))
              if not re.search(pattern, help_text)]
    if absent:
        raise app.UsageError(
            f"{PEER_SCRIPTS['kbert']} has no {' or '.join(absent)}: kbert's multi-label recipe "
            f"is not in this checkout; run the Trainer alone with --peers=huggingface")


def side_scores(gold, probabilities):
    """`SCORES` but the speed, of one side's {"dev", "test"} probabilities, and the tuned
    thresholds."""
    tuned = multi_label_metrics.tune_thresholds(gold["dev"], probabilities["dev"])
    result = {}
    for split, name, thresholds in (("test", "0.5", 0.5), ("test", "dev_tuned", tuned),
                                    ("dev", "0.5", 0.5)):
        scores = multi_label_metrics.scores(gold[split], probabilities[split], thresholds)
        for average in ("micro_f1", "macro_f1"):
            result[f"{split}_{average}@{name}"] = scores[average]
    result["dev_thresholds"] = [float(t) for t in tuned]
    return result


def run_side(command, out, names, gold):
    """Runs one side's `command` into `out`; its precision, speed and `side_scores`."""
    runs.run([*command, f"--output_dir={out}"])
    train = runs.read_json(os.path.join(out, "train_results.json"))
    # kbert's recipe records its settings in its run manifest, the Trainer peer beside its speed.
    precision = (train["precision_settings"] if "precision_settings" in train
                 else runs.kbert_precision(out))
    probabilities = {}
    for split in gold:
        path = os.path.join(out, f"{split}_predictions.tsv")
        probabilities[split] = multi_label_files.read_probabilities(path, names)
        if len(probabilities[split]) != len(gold[split]):
            raise AssertionError(f"{path}: {len(probabilities[split])} rows for "
                                 f"{len(gold[split])} examples")
    return {"precision": precision,
            "train_examples": train["examples"], "train_seconds": train["seconds"],
            "examples_per_second": train["examples_per_second"],
            "epoch_examples_per_second": round(
                train["examples"] * _BUDGET.num_train_epochs.value / sum(train["epoch_seconds"]),
                2),
            **side_scores(gold, probabilities)}


def spread(values):
    """Mean and sample standard deviation (n - 1; None for one value) of `values`."""
    return {"mean": statistics.mean(values),
            "std": statistics.stdev(values) if len(values) > 1 else None, "values": values}


def summarise(per_seed, peers):
    """Per side, and kbert - Trainer paired by seed, the `spread` of each of `SCORES`; and
    kbert's speeds over the Trainer's, paired by seed."""
    seeds = list(per_seed)
    summary = {peer: {key: spread([per_seed[s][peer][key] for s in seeds]) for key in SCORES}
               for peer in peers}
    if {"kbert", "huggingface"} <= set(peers):
        summary["kbert_minus_huggingface"] = {
            key: spread([per_seed[s]["kbert"][key] - per_seed[s]["huggingface"][key]
                         for s in seeds]) for key in SCORES}
        for key in ("examples_per_second", "epoch_examples_per_second"):
            summary[f"kbert_over_huggingface_{key}"] = spread(
                [per_seed[s]["kbert"][key] / per_seed[s]["huggingface"][key] for s in seeds])
    return summary


def table(summary, precisions):
    """A Markdown table of `summary`: mean ± sample std per score and side, each side headed
    with its precision (`precisions`: side -> what it ran in)."""
    def cell(entry):
        std = "" if entry["std"] is None else f" ± {entry['std']:.4f}"
        return f"{entry['mean']:.4f}{std}"

    columns = list(precisions) + (["kbert_minus_huggingface"]
                                  if "kbert_minus_huggingface" in summary else [])
    headers = [f"{c} ({precisions[c]})" if c in precisions else c for c in columns]
    lines = ["| score | " + " | ".join(headers) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {key} | " + " | ".join(cell(summary[c][key]) for c in columns) + " |"
              for key in SCORES]
    return "\n".join(lines)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    peers = _PEERS.value
    if "kbert" in peers:
        require_recipe()
    os.makedirs(_WORK.value, exist_ok=True)
    names, gold = multi_label_files.convert(_DATA.value, _WORK.value, _MAX_EVAL.value)
    files = {split: os.path.join(_WORK.value, f"{split}.tsv")
             for split in multi_label_files.SPLITS}
    common = [f"--{split}_file={path}" for split, path in files.items()]
    common.append(f"--labels={','.join(names)}")
    extra = {"huggingface": [*budget.arguments(_BUDGET), f"--hf_dir={runs.minilm_dir()}",
                             *_HF_FLAGS.value]}
    if "kbert" in peers:
        extra["kbert"] = [
            *budget.arguments(_BUDGET, kbert=True), "--multi_label", "--text_a_column=text",
            "--label_column=labels",
            f"--label_separator={multi_label_files.SEPARATOR}",
            f"--init_checkpoint={runs.google_checkpoint(_WORK.value)}", "--do_lower_case",
            "--do_train", "--do_eval", "--do_predict", "--predict_batch_size=32",
            # As the peer: the last epoch, no dev scoring between epochs; a re-run starts over.
            "--nokeep_best_epoch", "--overwrite_output_dir", *_KBERT_FLAGS.value]
    output = _OUTPUT.value or os.path.join(_WORK.value, "results.json")
    results = {"date": datetime.date.today().isoformat(), "cpu": runs.cpu(),
               "data": {"train_file": files["train"], "labels": names,
                        **{split: len(gold[split]) for split in gold}},
               "settings": {**budget.settings(_BUDGET), "warmup_proportion": 0.1,
                            "kbert_flags": _KBERT_FLAGS.value,
                            "huggingface_flags": _HF_FLAGS.value},
               "command": " ".join(["python -m bench.multi_label", *sys.argv[1:]]),
               "std": "sample standard deviation (n - 1) over the seeds", "seeds": {}}
    for seed in _SEEDS.value:
        row = results["seeds"][seed] = {}
        for peer in peers:
            module = [] if peer == "kbert" else ["-m"]
            row[peer] = run_side([*module, PEER_SCRIPTS[peer], *common, *extra[peer],
                                  f"--seed={seed}"],
                                 os.path.join(_WORK.value, f"{peer}_seed_{seed}"), names, gold)
        if len({side["train_examples"] for side in row.values()}) > 1:
            raise AssertionError(f"seed {seed}: the sides trained on different numbers of "
                                 f"examples: {row}")
        results["summary"] = summarise(results["seeds"], peers)
        runs.write_json(output, results)
        print(json.dumps(row), flush=True)
    print(table(results["summary"], {peer: side["precision"] for peer, side in row.items()}),
          flush=True)
    print(f"Results written to {output}", flush=True)


if __name__ == "__main__":
    app.run(main)
