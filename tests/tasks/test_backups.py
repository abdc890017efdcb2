"""Backups are complete or absent; a restart resumes from the newest one that loads."""

import errno
import os
import shutil
import socket
from unittest import mock

import keras
import numpy as np
import pytest

from kbert import io
from kbert.tasks import backups

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

X, Y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")


class StopAfter(keras.callbacks.Callback):
    """Raises at the end of epoch `epoch` (1-based), after the backup, as a kill would."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epoch:
            raise KeyboardInterrupt


def model():
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    m.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse")
    return m


def fit(backup_dir, epochs=3, stop=None):
    m = model()
    callbacks = [backups.Backup(str(backup_dir))] + ([StopAfter(stop)] if stop else [])
    return m, m.fit(X, Y, batch_size=4, epochs=epochs, callbacks=callbacks, verbose=0)


def test_resume_equals_the_straight_run_and_keeps_two_backups(tmp_path):
    straight, _ = fit(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "run", stop=2)
    resumed, history = fit(tmp_path / "run")
    assert history.epoch == [2] and int(resumed.optimizer.iterations) == 6
    for a, b in zip(straight.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert sorted(os.listdir(tmp_path / "run")) == ["epoch-000002", "epoch-000003"]


def test_a_torn_backup_falls_back_to_the_one_before(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path, stop=2)
    weights = tmp_path / "epoch-000002" / backups.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:1000])
    m, history = fit(tmp_path)
    assert history.epoch == [1, 2] and int(m.optimizer.iterations) == 6
    # Nothing readable at all: one clear error, not an h5py one.
    for name in os.listdir(tmp_path):
        (tmp_path / name / backups.WEIGHTS_FILE).write_bytes(b"torn")
    with pytest.raises(ValueError, match=r"no backup can be read \(.*epoch-000003.*; .*epoch-"
                                         r"000002.*\); pass --overwrite_output_dir"):
        fit(tmp_path)


def test_a_backup_a_killed_run_left_half_written_is_ignored_and_removed(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path, stop=1)
    half = tmp_path / f".kbert-tmp-{socket.gethostname()}-999999999-abc"
    half.mkdir()
    (half / backups.WEIGHTS_FILE).write_bytes(b"half")
    _, history = fit(tmp_path)
    assert history.epoch == [1, 2] and not half.exists()


def test_a_full_disk_names_the_file_and_what_it_needs_and_keeps_the_last_backup(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path, stop=1)
    last = tmp_path / "epoch-000001"
    size = sum(os.path.getsize(last / name) for name in os.listdir(last))
    # Checked before writing: h5py out of space mid-file crashes the process at exit.
    nearly_full = shutil.disk_usage(tmp_path)._replace(free=size - 1)
    with mock.patch.object(shutil, "disk_usage", return_value=nearly_full), \
            pytest.raises(io.DiskFull) as caught:
        fit(tmp_path)
    assert caught.value.filename == str(tmp_path / "epoch-000002" / backups.WEIGHTS_FILE)
    assert caught.value.needed == size
    # Full while writing (another writer took the space): the same error, nothing half-made.
    # As the OS says it, and as h5py does (errno only in its text).
    for full in (OSError(errno.ENOSPC, "No space left on device"),
                 OSError("Unable to synchronously create dataset (file write failed: errno = "
                         "28, error message = 'No space left on device')")):
        with mock.patch.object(keras.Model, "save_weights", side_effect=full), \
                pytest.raises(io.DiskFull) as caught:
            fit(tmp_path)
        assert caught.value.filename == str(tmp_path / "epoch-000002" / backups.WEIGHTS_FILE)
        assert caught.value.needed == size
        assert os.listdir(tmp_path) == ["epoch-000001"]
    _, history = fit(tmp_path)  # space freed: it resumes
    assert history.epoch == [1, 2]


def test_the_first_backup_needs_its_variables_and_hdf5_overhead(tmp_path):
    m = model()
    m.fit(X, Y, epochs=1, verbose=0)
    backup = backups.Backup(str(tmp_path))
    backup.set_model(m)
    # Kernel and bias and their two Adam moments (3 x 16 bytes), the step and learning rate,
    # each with room for its HDF5 headers.
    estimate = backup._needed()
    assert estimate == 3 * 16 + 8 + 4 + 8 * 2048
    backup.save(1)
    first = tmp_path / "epoch-000001"
    size = sum(os.path.getsize(first / name) for name in os.listdir(first))
    assert size <= estimate and backup._needed() == size  # then: the last one's size


def test_restores_what_keras_backup_and_restore_left(tmp_path):
    m = model()
    callbacks = [keras.callbacks.BackupAndRestore(str(tmp_path), double_checkpoint=True,
                                                  delete_checkpoint=False), StopAfter(2)]
    with pytest.raises(KeyboardInterrupt):
        m.fit(X, Y, batch_size=4, epochs=3, callbacks=callbacks, verbose=0)
    (tmp_path / "latest.weights.h5").write_bytes(b"torn")  # what a kill left
    m, history = fit(tmp_path)
    assert history.epoch == [1, 2]  # from epoch 1 of the .bkp pair
    assert sorted(os.listdir(tmp_path)) == ["epoch-000002", "epoch-000003"]
