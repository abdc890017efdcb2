"""Training backups that are complete or absent: a killed run resumes from the last complete one.

`Backup` takes the place of `keras.callbacks.BackupAndRestore`, which rewrites
`latest.weights.h5` in place: a run killed (or out of disk) while writing it left a torn
file that every later run failed on, with an h5py error, even with `double_checkpoint`
(its fallback catches OSError only, and the epoch number is written to a second file after
the weights). Here each backup is a directory `epoch-NNNNNN` holding the weights with the
optimizer state and `training_metadata.json`, written under a temporary name and renamed when
complete (`kbert.io.atomic_directory`); the newest stays until then, and after as a
fallback. The space a backup needs is checked before it is written (and a full disk while
writing, another writer's doing, raises the same `kbert.io.DiskFull`). A restart restores the
newest backup that loads and falls back to older ones (and to the files of Keras' callback
that an older kbert left).
"""

import json
import math
import os
import re
import shutil
import tempfile

import keras
import numpy as np
from absl import logging

from kbert import io
from kbert.tasks import strategies

WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "training_metadata.json"
_EPOCH_DIR = re.compile(r"^epoch-(\d+)$")
# What keras.callbacks.BackupAndRestore(double_checkpoint=True) of an older kbert left.
_KERAS_FILES = (("latest.weights.h5", "training_metadata.json"),
                ("latest.weights.h5.bkp", "training_metadata.json.bkp"))
# What a torn or partly written weights file raises in h5py and Keras.
_UNREADABLE = (OSError, ValueError, KeyError, RuntimeError)


class Backup(keras.callbacks.Callback):
    """Backs up weights, optimizer state, dropout's random state and the epoch after every
    epoch; restores them at the start of training (`model._initial_epoch`, as Keras'
    `BackupAndRestore`), or before it: `set_model`, then `restore`, whose epoch says where a
    data stream resumes.

    Args:
        backup_dir: str. Holds the backups (and may hold other files, e.g. the best epoch's
            weights of `kbert.tasks.epoch_callbacks.BestEpoch`).
        keep: int. Backups on disk, the one being written included: with 2, the newest and
            the one before (a fallback should the newest not load), and while a backup is
            written, the newest and the new one. Defaults to 2.
    """

    def __init__(self, backup_dir, keep=2):
        super().__init__()
        self.backup_dir, self.keep = backup_dir, keep
        self._restored = False

    def on_train_begin(self, logs=None):
        if not self._restored:
            self.restore()

    def on_epoch_end(self, epoch, logs=None):
        self.save(epoch + 1)

    def restore(self):
        """Loads the newest backup that can be read; returns its epoch (0: none found).

        Raises:
            ValueError: there are backups, and none can be read.
        """
        self._restored = True
        for path in io.remove_stale_temporaries(self.backup_dir):
            logging.info("%s: removed, a backup a killed run did not finish", path)
        failures = []
        for weights, metadata in self._candidates():
            try:
                epoch = self._load(weights, metadata)
            except _UNREADABLE as e:
                failures.append(f"{weights}: {_first_line(e)}")
                logging.warning("%s: cannot be read (%s); trying the backup before it",
                                weights, _first_line(e))
                continue
            self.model._initial_epoch = epoch
            logging.info("%s: restored, epoch %d (global step %s)", weights, epoch,
                         strategies.global_step(self.model))
            return epoch
        if failures:
            raise ValueError(f"{self.backup_dir}: no backup can be read ({'; '.join(failures)});"
                             " pass --overwrite_output_dir to start over, or remove it")
        return 0

    def save(self, epoch):
        """Writes the backup of `epoch` (1-based), keeping the newest `keep` in all."""
        final = os.path.join(self.backup_dir, f"epoch-{epoch:06d}")
        os.makedirs(self.backup_dir, exist_ok=True)
        needed = self._needed()
        # Room first: at most `keep` backups on disk, the one being written included.
        for old in [path for path, _ in self._epoch_dirs()][self.keep - 1:]:
            shutil.rmtree(old, ignore_errors=True)
        # Checked first: h5py that runs out of space mid-file leaves HDF5 in a state that
        # crashes the process at exit (SIGSEGV), after a screen of HDF5 errors.
        if shutil.disk_usage(self.backup_dir).free < needed:
            raise io.DiskFull(os.path.join(final, WEIGHTS_FILE), needed)
        try:
            with io.atomic_directory(final) as tmp:
                try:
                    self.model.save_weights(os.path.join(tmp, WEIGHTS_FILE))
                except Exception as e:
                    # Another writer took the space after the check: the same error.
                    if io.is_disk_full(e):
                        raise io.DiskFull(os.path.join(final, WEIGHTS_FILE), needed) from e
                    raise
                with open(os.path.join(tmp, METADATA_FILE), "w", encoding="utf-8") as f:
                    json.dump({"epoch": epoch,
                               "global_step": strategies.global_step(self.model),
                               "rng_state": [v.numpy().tolist() for v in self._rng_state()]},
                              f)
        except io.DiskFull as e:
            e.needed = e.needed or needed
            raise
        for names in _KERAS_FILES:
            for name in names:
                if os.path.exists(os.path.join(self.backup_dir, name)):
                    os.remove(os.path.join(self.backup_dir, name))

    def _epoch_dirs(self):
        """(path, epoch) of the complete backups, newest first."""
        if not os.path.isdir(self.backup_dir):
            return []
        found = [(os.path.join(self.backup_dir, n), int(m[1])) for n in os.listdir(
            self.backup_dir) if (m := _EPOCH_DIR.match(n))]
        return sorted(found, key=lambda item: -item[1])

    def _candidates(self):
        """(weights file, metadata file) to try, newest first."""
        found = [(os.path.join(path, WEIGHTS_FILE), os.path.join(path, METADATA_FILE))
                 for path, _ in self._epoch_dirs()]
        found += [(os.path.join(self.backup_dir, w), os.path.join(self.backup_dir, m))
                  for w, m in _KERAS_FILES
                  if os.path.exists(os.path.join(self.backup_dir, w))]
        return found

    def _load(self, weights, metadata):
        with open(metadata, encoding="utf-8") as f:
            metadata = json.load(f)
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            # Its variables, to load into; beside the model's (restored before `fit`, too).
            with self.model.distribute_strategy.scope():
                optimizer.build(self.model.trainable_variables)
        if weights.endswith(".weights.h5"):
            self.model.load_weights(weights)
        else:  # Keras' `.bkp` copy: load_weights goes by the file name's ending
            with tempfile.NamedTemporaryFile(suffix=".weights.h5", dir=self.backup_dir) as copy:
                shutil.copyfile(weights, copy.name)
                self.model.load_weights(copy.name)
        state = metadata.get("rng_state")
        if state is not None and len(state) == len(self._rng_state()):
            for variable, value in zip(self._rng_state(), state, strict=True):
                variable.assign(np.asarray(value, variable.dtype))
        return int(metadata["epoch"])

    def _rng_state(self):
        """The seed generators' states (dropout's): variables that are no weights, so not in
        `save_weights`; restored, a resumed run draws the dropout masks it would have drawn."""
        weights = {id(v) for v in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    def _needed(self):
        """Bytes a backup needs: the size of the last one, else of the variables it holds
        (and the optimizer's) plus HDF5's few kB per variable."""
        for path, _ in self._epoch_dirs():
            return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))
        variables = list(self.model.weights)
        if self.model.optimizer is not None:
            variables += list(self.model.optimizer.variables)
        return sum(math.prod(v.shape) * np.dtype(v.dtype).itemsize + 2048 for v in variables)


class SaveModel(keras.callbacks.Callback):
    """Saves the model (with its optimizer) to a `.keras` `path` after every epoch, under a
    temporary name renamed when complete (`keras.callbacks.ModelCheckpoint` writes in place:
    a kill mid-save left a torn file).

    Args:
        path: str. The `.keras` file.
    """

    def __init__(self, path):
        super().__init__()
        self.path = os.path.abspath(path)

    def on_epoch_end(self, epoch, logs=None):
        with io.atomic_files(os.path.dirname(self.path)) as tmp:
            self.model.save(os.path.join(tmp, os.path.basename(self.path)))


def _first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
