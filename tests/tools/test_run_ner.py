"""tools/run_ner.py on the CoNLL fixtures with a tiny Google checkpoint."""

import functools
import json
import os

import tensorflow as tf

from tests.tools.runner import run_tool
from tests.tools.test_run_classifier import export

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conll")
# In-process; the fresh-process run of this tool is tests/tools/test_cli.py's quiet-start test.
run = functools.partial(run_tool, "run_ner.py")


def test_train_eval_predict_with_crf(tiny_google_dir, tmp_path):
    result = run(f"--train_file={FIXTURES}/train.txt", f"--dev_file={FIXTURES}/dev.txt",
                 f"--test_file={FIXTURES}/test.txt", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path}", "--do_train", "--do_eval", "--do_predict",
                 "--use_crf", "--max_seq_length=16", "--train_batch_size=8",
                 "--num_train_epochs=1", "--max_train_examples=6", "--learning_rate=1e-3",
                 "--noevaluate_every_epoch")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {"eval_results.txt", "eval_results.json", "train_results.json", "labels.txt",
            "dev_predictions.txt", "test_predictions.txt", "model.keras",
            "vocab.txt"} <= set(os.listdir(tmp_path))
    train = json.loads((tmp_path / "train_results.json").read_text())
    assert train["sentences"] == 6 and train["use_crf"]
    text = (tmp_path / "eval_results.txt").read_text()
    assert "dev_f1 = " in text and "test_f1 = " in text
    assert "dev: entity F1" in result.stderr
    sentences = (tmp_path / "test_predictions.txt").read_text().strip().split("\n\n")
    assert len(sentences) == 5
    assert all(len(line.split()) == 3 for s in sentences for line in s.splitlines())
    serve = export(tmp_path, tmp_path / "exported")  # the output dir and no other flag
    outputs = serve(text=tf.constant(["the said he"]))
    labels = (tmp_path / "labels.txt").read_text().split()
    assert {label.decode() for label in outputs["labels"].numpy()[0]} <= set(labels)


def test_usage_errors(tmp_path):
    result = run(f"--train_file={FIXTURES}/train.txt", f"--output_dir={tmp_path}")
    assert result.returncode != 0 and "At least one of do_train" in result.stderr
    result = run(f"--output_dir={tmp_path}", "--do_eval")
    assert result.returncode != 0 and "do_eval needs dev_file" in result.stderr
    result = run(f"--output_dir={tmp_path}", "--do_eval", "--data_format=tsv")
    assert result.returncode != 0 and "data_format" in result.stderr


def test_mirrored_mixed_bfloat16(tiny_google_dir, tmp_path):
    result = run(f"--train_file={FIXTURES}/train.txt", f"--dev_file={FIXTURES}/dev.txt",
                 f"--init_checkpoint={tiny_google_dir}", f"--output_dir={tmp_path}",
                 "--do_train", "--do_eval", "--use_crf", "--max_seq_length=16",
                 "--train_batch_size=8", "--num_train_epochs=1", "--max_train_examples=6",
                 "--noevaluate_every_epoch", "--distribution_strategy=mirrored",
                 "--mixed_precision=mixed_bfloat16")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "train_results.json").read_text())["steps"] >= 1
    assert "dev_f1 = " in (tmp_path / "eval_results.txt").read_text()


def test_help_lists_the_window_flags():
    result = run("--help")
    assert result.returncode == 0
    assert "--[no]document_context" in result.stdout and "--window_stride" in result.stdout
