"""What the recipes do at the end of each epoch: score the dev set, keep the best epoch's
weights, and record the epoch in `training_log.csv` and TensorBoard's `logs/`."""

import csv
import importlib.util
import math
import os

import keras
from absl import logging

from kbert import io
from kbert.tasks import strategies

TRAINING_LOG_FILE = "training_log.csv"
LOG_DIR = "logs"
_BEST_FILE = "best_epoch.json"  # in the backup dir, beside the best epoch's weights
_BEST_WEIGHTS = "best.weights.h5"


class DevScores(keras.callbacks.Callback):
    """Scores the dev set at the end of every epoch and adds `dev_<score>` to the logs.

    The outputs of the last scored epoch are kept, so the final evaluation of a model that
    ends with that epoch's weights need not predict the dev set again.

    Args:
        score_fn: callable. `score_fn(model)` -> (dict of score name -> float, outputs).
        metric: str. The score that picks the best epoch, e.g. "f1".
    """

    def __init__(self, score_fn, metric):
        super().__init__()
        self.score_fn, self.metric = score_fn, metric
        self.last = None  # (epoch, outputs)

    def on_epoch_end(self, epoch, logs=None):
        scores, outputs = self.score_fn(self.model)
        self.last = (epoch + 1, outputs)
        if logs is not None:
            # Scores only: counts such as "examples" are no per-epoch log column.
            logs.update({f"dev_{k}": v for k, v in scores.items() if isinstance(v, float)})
        logging.info("epoch %d dev: %s", epoch + 1, brief(scores))

    def outputs_of(self, epoch):
        """The dev outputs of `epoch` (1-based) if it was the last one scored, else None."""
        return self.last[1] if self.last is not None and self.last[0] == epoch else None


class BestEpoch(keras.callbacks.Callback):
    """Keeps the weights of the epoch with the highest `monitor` in `backup_dir`, across
    restarts.

    Args:
        backup_dir: str. Where the best weights and their epoch are kept.
        monitor: str. The epoch-log key to maximise, e.g. "dev_f1".
    """

    def __init__(self, backup_dir, monitor):
        super().__init__()
        self.backup_dir, self.monitor = backup_dir, monitor
        self.best = io.read_json(os.path.join(backup_dir, _BEST_FILE)) or None

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None or self.best is not None and value <= self.best["value"]:
            return
        with io.atomic_files(self.backup_dir) as tmp:  # a kill mid-write keeps the last best
            self.model.save_weights(os.path.join(tmp, _BEST_WEIGHTS))
        self.best = {"epoch": epoch + 1, "value": float(value)}
        io.write_json(os.path.join(self.backup_dir, _BEST_FILE), self.best)

    def restore(self):
        """Loads the best epoch's weights; returns {"epoch", "value"} or None."""
        if self.best is not None:
            self.model.load_weights(os.path.join(self.backup_dir, _BEST_WEIGHTS))
        return self.best


def keep_epoch(best, keep_best_epoch, epochs):
    """Ends training on the kept epoch: restores the best one's weights with
    `keep_best_epoch`, else keeps the last.

    Args:
        best: `BestEpoch` of the run (its model is the trained model).
        keep_best_epoch: bool.
        epochs: int. Epochs of the run (the last one's number).

    Returns:
        dict for train_results.json: dev_metric, kept ("best" or "last"), kept_epoch and,
        when an epoch was scored, best_epoch and best_dev_<metric>.
    """
    dev_metric = best.monitor.removeprefix("dev_")
    result = {"dev_metric": dev_metric, "kept": "best" if keep_best_epoch else "last"}
    if best.best is not None:
        result["best_epoch"], result[f"best_dev_{dev_metric}"] = (best.best["epoch"],
                                                                  best.best["value"])
    if keep_best_epoch and best.restore() is not None:
        logging.info("keeping epoch %d of %d (best dev %s %.4f)", best.best["epoch"], epochs,
                     dev_metric, best.best["value"])
    result["kept_epoch"] = result.get("best_epoch", epochs) if keep_best_epoch else epochs
    return result


class AtEpochEnds(keras.callbacks.Callback):
    """Runs `callbacks`' `on_epoch_end` after the parts that end an epoch and after the last
    part, with the epoch's index (a part is one Keras epoch: `parts` of
    `kbert.tasks.fine_tuning.fit_and_record`)."""

    def __init__(self, callbacks, parts_per_epoch, parts):
        super().__init__()
        self.callbacks, self.parts_per_epoch, self.parts = callbacks, parts_per_epoch, parts

    def set_model(self, model):
        super().set_model(model)
        for callback in self.callbacks:
            callback.set_model(model)

    def on_epoch_end(self, part, logs=None):
        if (part + 1) % self.parts_per_epoch and part + 1 != self.parts:
            return
        epoch = math.ceil((part + 1) / self.parts_per_epoch) - 1
        for callback in self.callbacks:
            callback.on_epoch_end(epoch, logs)


# Hand-written: Keras' `TerminateOnNaN` stops training quietly, so a run that diverged would
# still write its model and results and exit 0.
class StopIfDiverged(keras.callbacks.Callback):
    """Raises `ValueError` at the end of a Keras epoch whose mean training loss is nan or
    infinite, before that epoch is backed up or recorded: the backup of the epoch before it
    is kept, and nothing is written from the diverged weights."""

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise ValueError(f"the training loss became {float(loss)} in Keras epoch "
                             f"{epoch + 1}: training diverged — lower --learning_rate (or "
                             "check the data); the backup of the epoch before is kept")


class LogRestored(keras.callbacks.Callback):
    """Logs what `kbert.tasks.backups.Backup` (just before it) restored."""

    def on_train_begin(self, logs=None):
        step = strategies.global_step(self.model)
        if step:
            logging.info("restored from backup: epoch %d finished, global step %d",
                         getattr(self.model, "_initial_epoch", 0), step)


class TrainingLog(keras.callbacks.Callback):
    """Writes `path` as a CSV of one row per epoch: `epoch` (0-based), then every log key
    any epoch had, sorted; a key an epoch lacks is an empty cell.

    By hand rather than Keras' `CSVLogger`, which fixes its columns at the first epoch it
    writes: a score that first appears later (SQuAD scores the dev set after the part that
    ends an epoch, and each part is a Keras epoch) was dropped, and a restart whose first
    epoch had other keys appended rows under the old header. Here each epoch rewrites the
    file (a row an epoch, small) atomically: rows of earlier epochs are kept, rows of this
    epoch or later ones (left by an earlier run in the same directory) are replaced.

    Args:
        path: str. The CSV file.
    """

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_end(self, epoch, logs=None):
        rows = [row for row in _read_rows(self.path) if int(row["epoch"]) < epoch]
        rows.append({"epoch": epoch, **(logs or {})})
        keys = sorted({key for row in rows for key in row} - {"epoch"})
        with io.atomic_write(self.path, encoding="utf-8") as f:
            writer = csv.DictWriter(f, ["epoch", *keys], restval="", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


def _read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return [{k: v for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


def recording_callbacks(output_dir):
    """The per-epoch records every recipe keeps: `training_log.csv` and, when tensorboard is
    installed, TensorBoard logs in `logs/`."""
    os.makedirs(output_dir, exist_ok=True)
    found = [TrainingLog(os.path.join(output_dir, TRAINING_LOG_FILE))]
    if importlib.util.find_spec("tensorboard") is not None:
        found.append(keras.callbacks.TensorBoard(os.path.join(output_dir, LOG_DIR),
                                                 write_graph=False))
    else:
        logging.warning("tensorboard is not installed: no TensorBoard logs (%s has the "
                        "per-epoch loss)", TRAINING_LOG_FILE)
    return found


def brief(scores):
    """`name=value, ...` of the scalar entries of `scores`, for a log line."""
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in scores.items() if not isinstance(v, (dict, list)))
