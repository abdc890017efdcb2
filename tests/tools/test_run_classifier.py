"""Smoke run of tools/run_classifier.py on the MRPC fixture with a tiny Google checkpoint."""

import json
import os
import subprocess
import sys
import zipfile

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "run_classifier.py")
MRPC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue", "MRPC")


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          timeout=300)


def test_train_eval_predict(tiny_google_dir, tmp_path):
    result = run("--task_name=MRPC", f"--data_dir={MRPC}", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path}", "--do_train", "--do_eval", "--do_predict",
                 "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
                 "--max_train_examples=6", "--learning_rate=1e-3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {"eval_results.txt", "eval_results.json", "train_results.json", "MRPC.tsv",
            "model.keras", "vocab.txt", "logs"} <= set(os.listdir(tmp_path))
    assert json.loads((tmp_path / "train_results.json").read_text())["examples"] == 6
    assert "dev_f1 = " in (tmp_path / "eval_results.txt").read_text()
    assert len((tmp_path / "MRPC.tsv").read_text().splitlines()) == 5


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
