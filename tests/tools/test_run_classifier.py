"""tools/run_classifier.py on the MRPC fixture with a tiny Google checkpoint, in-process.

Its real entry points run in fresh processes too: the script, killed and restarted, in
`test_restart_with_other_flags_stops_and_nothing_is_overwritten`, and the installed
`kbert-run-classifier` through train, eval and predict in tests/tools/test_installed_commands.py.
"""

import csv
import functools
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

import tensorflow as tf

from tests import fresh_process
from tests import warm_process
from tests.tools.runner import TOOLS
from tests.tools.runner import run_tool

TOOL = os.path.join(TOOLS, "run_classifier.py")
MRPC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue", "MRPC")
run = functools.partial(run_tool, "run_classifier.py")


def test_usage_errors(tmp_path):
    result = run("--task_name=MRPC", f"--data_dir={MRPC}", f"--output_dir={tmp_path}")
    assert result.returncode != 0 and "At least one of do_train" in result.stderr
    result = run("--task_name=MRPC", f"--output_dir={tmp_path}", "--do_eval")
    assert result.returncode != 0 and "data_dir" in result.stderr


def test_mirrored_mixed_bfloat16(tiny_google_dir, tmp_path):
    result = run("--task_name=MRPC", f"--data_dir={MRPC}", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path}", "--do_train", "--do_eval", "--max_seq_length=16",
                 "--train_batch_size=4", "--num_train_epochs=1", "--max_train_examples=6",
                 "--distribution_strategy=mirrored", "--mixed_precision=mixed_bfloat16")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "train_results.json").read_text())["steps"] == 2
    assert "dev_accuracy = " in (tmp_path / "eval_results.txt").read_text()
    config = json.loads(zipfile.ZipFile(tmp_path / "model.keras").read("config.json"))
    assert config["config"]["dtype"]["config"]["name"] == "mixed_bfloat16"


def test_tpu_without_a_tpu_is_a_clear_error(tiny_google_dir, tmp_path):
    result = run("--task_name=MRPC", f"--data_dir={MRPC}", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path}", "--do_eval", "--distribution_strategy=tpu",
                 "--tpu=local")
    assert result.returncode != 0
    assert "distribution_strategy=tpu: no TPU reachable at tpu='local'" in result.stderr


def export(model_dir, export_dir):
    """tools/export_saved_model.py on a recipe's output dir, with no other flag."""
    result = run_tool("export_saved_model.py", f"--model={model_dir}",
                      f"--export_dir={export_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return tf.saved_model.load(str(export_dir)).signatures["serving_default"]


def _own_rows():
    with open(os.path.join(MRPC, "train.tsv"), encoding="utf-8-sig") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [{"first": r[3], "second": r[4], "label": ["different", "same"][int(r[0])]}
            for r in rows]


def test_own_csv_pairs_then_export_with_no_other_flag(tiny_google_dir, tmp_path):
    rows = _own_rows()
    for name, part in (("train", rows), ("dev", rows[:5]), ("test", rows[:3])):
        with open(tmp_path / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, ["first", "second", "label"])
            writer.writeheader()
            writer.writerows(part)
    out = tmp_path / "out"
    result = run(f"--train_file={tmp_path / 'train.csv'}", f"--dev_file={tmp_path / 'dev.csv'}",
                 f"--test_file={tmp_path / 'test.csv'}", "--text_a_column=first",
                 "--text_b_column=second", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict",
                 "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
                 "--learning_rate=1e-3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {"model.keras", "vocab.txt", "bert_config.json", "export_settings.json",
            "eval_results.txt", "eval_results.json", "dev_predictions.tsv",
            "test_predictions.tsv", "train_results.json", "training_log.csv",
            "logs"} <= set(os.listdir(out))
    assert json.loads((out / "export_settings.json").read_text())["label_names"] == [
        "different", "same"]
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert "dev_examples = 5" in lines and "kept_epoch = 1" in lines
    dev = (out / "dev_predictions.tsv").read_text().splitlines()
    assert dev[0] == "index\ttext_a\ttext_b\tgold\tpredicted\tp_different\tp_same"
    assert len(dev) == 6 and dev[1].split("\t")[3] == rows[0]["label"]
    assert abs(sum(float(p) for p in dev[1].split("\t")[5:]) - 1) < 1e-3
    assert (out / "training_log.csv").read_text().splitlines()[0] == (
        "epoch,accuracy,dev_accuracy,dev_accuracy_and_f1,dev_f1,dev_loss,loss")
    assert len((out / "test_predictions.tsv").read_text().splitlines()) == 4
    # Exported from the output dir alone: a pair signature that returns label names.
    serve = export(out, tmp_path / "exported" / "1")
    outputs = serve(text_a=tf.constant([rows[0]["first"]]),
                    text_b=tf.constant([rows[0]["second"]]))
    assert outputs["label"].numpy()[0] in (b"different", b"same")


def test_own_jsonl_single_texts(tiny_google_dir, tmp_path):
    rows = _own_rows()
    for name, part in (("train", rows), ("dev", rows[:4])):
        with open(tmp_path / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": r["first"], "stars": i % 3}) + "\n"
                         for i, r in enumerate(part))
    out = tmp_path / "out"
    result = run(f"--train_file={tmp_path / 'train.jsonl'}", "--text_a_column=text",
                 "--label_column=stars", f"--dev_file={tmp_path / 'dev.jsonl'}",
                 f"--init_checkpoint={tiny_google_dir}", f"--output_dir={out}", "--do_train",
                 "--do_eval", "--max_seq_length=16", "--train_batch_size=4",
                 "--num_train_epochs=1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "train_results.json").read_text())["examples"] == 8
    scores = json.loads((out / "eval_results.json").read_text())["dev"]
    assert scores["examples"] == 4 and 0 <= scores["accuracy"] <= 1
    assert json.loads((out / "export_settings.json").read_text()) == {
        "do_lower_case": True, "max_seq_length": 16, "text_pair": False,
        "label_names": ["0", "1", "2"]}


def test_do_predict_without_test_file_fails_before_training(tiny_google_dir, tmp_path):
    data = tmp_path / "MRPC"
    data.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        shutil.copy(os.path.join(MRPC, name), data / name)
    result = run("--task_name=MRPC", f"--data_dir={data}", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path / 'out'}", "--do_train", "--do_predict",
                 "--max_seq_length=16")
    assert result.returncode != 0
    assert f"{data / 'test.tsv'}: not found (test split of data_dir)" in result.stderr
    assert not os.path.exists(tmp_path / "out" / "model.keras")
    assert "Epoch 1" not in result.stdout


def test_restart_with_other_flags_stops_and_nothing_is_overwritten(tiny_google_dir, tmp_path):
    out = tmp_path / "out"
    common = ["--task_name=MRPC", f"--data_dir={MRPC}", f"--init_checkpoint={tiny_google_dir}",
              f"--output_dir={out}", "--do_train", "--max_seq_length=16",
              "--train_batch_size=4", "--max_train_examples=4", "--num_train_epochs=12"]
    # Killed once epoch 1 is backed up ...
    process = warm_process.popen([sys.executable, TOOL, *common], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=fresh_process.environment())
    deadline = time.time() + 240
    while not glob.glob(str(out / "backup" / "epoch-*")):
        assert process.poll() is None and time.time() < deadline
        time.sleep(0.2)
    process.kill()
    process.wait()
    backup = sorted(os.listdir(out / "backup"))
    # ... restarted with another learning rate: stops, names the field and the ways out.
    result = run(*common, "--learning_rate=1e-3")
    assert result.returncode != 0
    assert "settings.learning_rate: was 5e-05, now 0.001" in result.stderr
    assert "--overwrite_output_dir" in result.stderr and "another --output_dir" in result.stderr
    assert sorted(os.listdir(out / "backup")) == backup
    # The same flags resume and say from where; a finished run is not overwritten.
    result = run(*common[:-1], "--num_train_epochs=12", "--verbosity=0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "restored from backup: epoch" in result.stderr
    model = (out / "model.keras").read_bytes()
    result = run(*common)
    assert result.returncode != 0 and "holds a finished run" in result.stderr
    assert (out / "model.keras").read_bytes() == model


def test_pack_examples_gives_the_usual_outputs(tiny_google_dir, tmp_path):
    """--pack_examples changes how training batches are built, nothing the run leaves."""
    import keras

    import kbert

    out = tmp_path / "out"
    result = run("--task_name=MRPC", f"--data_dir={MRPC}", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={out}", "--do_train", "--do_eval", "--do_predict",
                 "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
                 "--learning_rate=1e-3", "--pack_examples", "--embedding_updates=sparse",
                 "--head_learning_rate_multiplier=10", "--layerwise_lr_decay=0.8",
                 "--steps_per_execution=2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {"eval_results.txt", "eval_results.json", "train_results.json", "MRPC.tsv",
            "dev_predictions.tsv", "model.keras", "vocab.txt", "bert_config.json",
            "export_settings.json", "training_log.csv", "logs"} <= set(os.listdir(out))
    train = json.loads((out / "train_results.json").read_text())
    assert train["packed"] and train["steps"] == 2 and train["examples"] == 8
    assert "global_step = 2" in (out / "eval_results.txt").read_text()
    model = keras.saving.load_model(out / "model.keras")
    assert isinstance(model, kbert.BertClassifier) and not model.encoder.packed
    serve = export(out, tmp_path / "export")
    outputs = serve(text_a=tf.constant(["the cat"]), text_b=tf.constant(["a dog"]))
    assert outputs["label"].numpy()[0] in (b"0", b"1")


def test_fine_tuning_tools_show_the_shared_flags_in_help():
    for tool in ("run_classifier.py", "run_ner.py", "run_squad.py"):
        result = run_tool(tool, "--help")
        for flag in ("--learning_rate", "--embedding_updates", "--head_learning_rate_multiplier",
                     "--layerwise_lr_decay", "--steps_per_execution"):
            assert f"{flag}:" in result.stdout, (tool, flag)
        assert ("--[no]pack_examples:" in result.stdout) == (tool == "run_classifier.py")
