"""run_classifier.py and run_ner.py killed after an epoch and run again end with exactly the
model of the uninterrupted run (`kbert.data.pipeline.training_epochs`; packed rows,
`kbert.data.packing.packed_training_dataset`)."""

import functools
import json
import os

import keras
import numpy as np
import pytest

from kbert.tasks import backups
from tests.tools.runner import run_tool

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


class StopAfterFirstBackup(backups.Backup):
    """Raises once the backup of epoch 1 is written, as a kill would."""

    def save(self, epoch):
        super().save(epoch)
        if epoch == 1:
            raise KeyboardInterrupt


def assert_resume_is_exact(tool, flags, tmp_path, monkeypatch):
    run = functools.partial(run_tool, tool, *flags, "--do_train", "--num_train_epochs=3")
    result = run(f"--output_dir={tmp_path / 'straight'}")
    assert result.returncode == 0, result.stderr[-3000:]
    monkeypatch.setattr(backups, "Backup", StopAfterFirstBackup)
    assert run(f"--output_dir={tmp_path / 'run'}").returncode == 130  # interrupted
    monkeypatch.undo()
    result = run(f"--output_dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "train_results.json").read_text())[
        "epochs_this_run"] == 2
    straight, resumed = (keras.saving.load_model(tmp_path / name / "model.keras")
                         for name in ("straight", "run"))
    for a, b in zip(straight.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6, rtol=0)


@pytest.mark.parametrize("packing", [(), ("--pack_examples",)], ids=["rows", "packed"])
def test_run_classifier_resumes_exactly(tiny_google_dir, tmp_path, monkeypatch, packing):
    assert_resume_is_exact("run_classifier.py", (
        "--task_name=MRPC", f"--data_dir={FIXTURES}/glue/MRPC",
        f"--init_checkpoint={tiny_google_dir}", "--max_seq_length=16", "--train_batch_size=2",
        "--learning_rate=1e-3", *packing), tmp_path, monkeypatch)


def test_run_ner_resumes_exactly(tiny_google_dir, tmp_path, monkeypatch):
    assert_resume_is_exact("run_ner.py", (
        f"--train_file={FIXTURES}/conll/train.txt", f"--init_checkpoint={tiny_google_dir}",
        "--max_seq_length=16", "--train_batch_size=4", "--max_train_examples=12",
        "--learning_rate=1e-3"), tmp_path, monkeypatch)
