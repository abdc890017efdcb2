"""kbert.tasks.epoch_callbacks: TrainingLog has a column per key any epoch had and restarts
replace; StopIfDiverged ends a fit whose epoch loss is not finite."""

import csv
import os
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.tasks import epoch_callbacks
from kbert.tasks import fitting


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


def test_a_diverged_epoch_stops_the_fit_and_the_epoch_before_stays_backed_up(tmp_path):
    # Epoch 1 trains on finite targets, epoch 2 on an overflowing one (its loss is inf).
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((4, 1), np.float32)
    y = np.array([[1.0], [1.0], [3e38], [3e38]], np.float32)
    stream = lambda first_epoch: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        (x, y)).skip(2 * first_epoch).batch(1)
    config = types.SimpleNamespace(output_dir=str(tmp_path), log_every_n_steps=100,
                                   train_batch_size=1)
    with pytest.raises(ValueError, match=r"training loss became inf in Keras epoch 2: "
                                         r"training diverged — lower --learning_rate"):
        fitting.fit_resumably(model, stream, steps_per_epoch=2, epochs=2, config=config)
    assert sorted(os.listdir(tmp_path / "backup")) == ["epoch-000001"]
    _, rows = _rows(tmp_path / epoch_callbacks.TRAINING_LOG_FILE)
    assert [r["epoch"] for r in rows] == ["0"]  # the diverged epoch is not recorded
