"""kbert.tasks.epoch_callbacks.TrainingLog: a column per key any epoch had, restarts replace."""

import csv

from kbert.tasks import epoch_callbacks


def _rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_a_key_that_first_appears_in_a_later_epoch_gets_its_column(tmp_path):
    path = tmp_path / "training_log.csv"
    log = epoch_callbacks.TrainingLog(str(path))
    log.on_epoch_end(0, {"loss": 0.9})  # a part that ends no epoch: no dev scores
    log.on_epoch_end(1, {"loss": 0.6, "dev_f1": 0.5, "dev_exact_match": 0.25})
    log.on_epoch_end(2, {"loss": 0.5})
    header, rows = _rows(path)
    assert header == ["epoch", "dev_exact_match", "dev_f1", "loss"]
    assert [(r["epoch"], r["dev_f1"], r["loss"]) for r in rows] == [
        ("0", "", "0.9"), ("1", "0.5", "0.6"), ("2", "", "0.5")]


def test_a_restart_keeps_earlier_epochs_and_replaces_the_rest(tmp_path):
    path = tmp_path / "training_log.csv"
    first = epoch_callbacks.TrainingLog(str(path))
    for epoch, loss in enumerate([0.9, 0.8, 0.7]):  # epoch 2 ran but its backup was lost
        first.on_epoch_end(epoch, {"loss": loss})
    restarted = epoch_callbacks.TrainingLog(str(path))  # resumes after epoch 1
    restarted.on_epoch_end(2, {"loss": 0.65, "dev_f1": 0.5})
    header, rows = _rows(path)
    assert header == ["epoch", "dev_f1", "loss"]
    assert [(r["epoch"], r["dev_f1"], r["loss"]) for r in rows] == [
        ("0", "", "0.9"), ("1", "", "0.8"), ("2", "0.5", "0.65")]
    epoch_callbacks.TrainingLog(str(path)).on_epoch_end(0, {"loss": 1.0})  # a new run
    assert _rows(path) == (["epoch", "loss"], [{"epoch": "0", "loss": "1.0"}])
