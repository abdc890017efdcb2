"""A fine-tuning run interrupted after an epoch and restarted ends with exactly the weights of
the uninterrupted run: same batches (`kbert.data.pipeline.training_epochs`), same dropout.
(Pretraining's: tests/tasks/test_pretraining.py; SQuAD's: tests/tasks/test_squad.py.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.data import pipeline
from kbert.tasks import backups
from kbert.tasks import configs
from kbert.tasks import fine_tuning

EPOCHS, BATCH, SEED = 3, 4, 7


class StopAfterFirstBackup(backups.Backup):
    """Raises once the backup of epoch 1 is written, as a kill would."""

    def save(self, epoch):
        super().save(epoch)
        if epoch == 1:
            raise KeyboardInterrupt


def config(output_dir, steps_per_execution=1):
    return configs.FineTuningConfig(
        output_dir=str(output_dir), do_train=True, num_train_epochs=EPOCHS,
        train_batch_size=BATCH, learning_rate=1e-2, keep_best_epoch=False, seed=SEED,
        steps_per_execution=steps_per_execution, log_every_n_steps=0)


def tokenized(examples=22):
    """Random unpadded inputs in the tiny vocab, 3 to 12 tokens each."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 13, size=examples)
    ids = tf.RaggedTensor.from_row_lengths(
        rng.integers(5, 31, size=lengths.sum()).astype("int32"), lengths)
    segments = tf.RaggedTensor.from_row_lengths(np.zeros(lengths.sum(), "int32"), lengths)
    return pipeline.Tokenized({"token_ids": ids, "segment_ids": segments,
                               "padding_mask": tf.ones_like(ids)}, lengths)


def train(make_model, targets, output_dir, monkeypatch, interrupt=False, **settings):
    keras.utils.set_random_seed(SEED)  # as a tool does: the new head and dropout's generators
    model = make_model()
    dataset, steps = pipeline.training_epochs(tokenized(), targets, BATCH, seed=SEED)
    if interrupt:
        monkeypatch.setattr(backups, "Backup", StopAfterFirstBackup)
    try:
        stats = fine_tuning.fit_and_record(model, dataset, steps, config(output_dir, **settings),
                                           compile_kwargs=dict(run_eagerly=True))
    finally:
        monkeypatch.undo()
    return model, stats


def assert_resume_is_exact(make_model, targets, tmp_path, monkeypatch, **resumed_settings):
    straight, _ = train(make_model, targets, tmp_path / "straight", monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train(make_model, targets, tmp_path / "run", monkeypatch, interrupt=True,
              **resumed_settings)
    resumed, stats = train(make_model, targets, tmp_path / "run", monkeypatch,
                           **resumed_settings)
    assert (stats["epochs_this_run"], stats["steps"]) == (EPOCHS - 1, EPOCHS * 6)
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(
        straight.encoder.get_weights(), make_model().encoder.get_weights(), strict=True))
    assert moved > 1e-3  # training changed the weights, and dropout was on
    for a, b in zip(straight.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6, rtol=0)


def test_a_resumed_classifier_equals_the_uninterrupted_one(tiny_google_dir, tmp_path,
                                                           monkeypatch):
    """Also with steps_per_execution=4, which does not divide the 6 steps of an epoch: graph
    calls of 3 steps then, so that epochs (and backups) end where the data's epochs do."""
    labels = np.random.default_rng(1).integers(0, 2, size=22)
    assert_resume_is_exact(
        lambda: kbert.BertClassifier.from_google_checkpoint(tiny_google_dir, 2, dropout=0.3),
        labels, tmp_path, monkeypatch, steps_per_execution=4)


def test_a_resumed_tagger_equals_the_uninterrupted_one(tiny_google_dir, tmp_path, monkeypatch):
    # As `kbert.data.conll.training_dataset`: per-token label ids and weights, ragged.
    lengths = tokenized().lengths
    label_ids = tf.RaggedTensor.from_row_lengths(
        np.random.default_rng(2).integers(0, 3, size=lengths.sum()).astype("int32"), lengths)
    weights = tf.RaggedTensor.from_row_lengths(np.ones(lengths.sum(), "float32"), lengths)
    assert_resume_is_exact(
        lambda: kbert.BertTokenClassifier.from_google_checkpoint(tiny_google_dir, 3,
                                                                 dropout=0.3),
        (label_ids, weights), tmp_path, monkeypatch)



def test_a_resumed_run_in_batch_parts_equals_the_uninterrupted_one(tiny_google_dir, tmp_path,
                                                                   monkeypatch):
    """Two row blocks a batch (`BertTask.batch_parts`): each dropout layer draws twice a
    step, and a restart continues its draws where the backup left them."""
    labels = np.random.default_rng(1).integers(0, 2, size=22)

    def make_model():
        model = kbert.BertClassifier.from_google_checkpoint(tiny_google_dir, 2, dropout=0.3)
        model.batch_parts = 2
        return model

    assert_resume_is_exact(make_model, labels, tmp_path, monkeypatch)
