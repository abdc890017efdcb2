"""The fit path every recipe takes, fine-tuning and pretraining: resumable, timed and recorded.

`fit_resumably` runs `model.fit` over Keras epochs that are whole epochs or parts of one
(SQuAD: at most save_checkpoints_steps steps between backups; pretraining: every
save_checkpoints_steps steps), with the callbacks every run has:

    timing      each epoch's training seconds (first, so later callbacks' work is left out)
    divergence  a nan or infinite epoch loss is a ValueError (`epoch_callbacks.StopIfDiverged`)
    (epoch_logs) the caller's additions to the logs (dev scores,
                `kbert.tasks.epoch_callbacks.DevScores`) or renamings (pretraining's metrics)
    backup      `kbert.tasks.backups.Backup` in `output_dir/backup`: a killed run resumes
                from its last complete epoch
    recording   training_log.csv and TensorBoard's logs/ (`epoch_callbacks.recording_callbacks`)
    (callbacks) the caller's others (pretraining: `backups.SaveModel`)
    progress    steps, steps/s and ETA (`kbert.tasks.progress`), last: its epoch line shows
                what the callbacks before it added

Compiling is the caller's: the recipes differ in optimizer, losses and metrics.
"""

import os
import time

import keras

from kbert import artifacts
from kbert.tasks import backups
from kbert.tasks import epoch_callbacks
from kbert.tasks import progress
from kbert.tasks import strategies


def fit_resumably(model, dataset, steps_per_epoch, epochs, config, *, epoch_logs=(),
                  callbacks=()):
    """Fits compiled `model` for `epochs` Keras epochs, resumably, timed and recorded.

    Args:
        model: a compiled Keras model.
        dataset: a function first_epoch (0-based) -> the input of the epochs from
            `first_epoch` on, as one stream of `steps_per_epoch` steps an epoch: the backup
            is restored first (global step `first_epoch * steps_per_epoch`) and the data
            start there, so a resumed run sees the batches of the uninterrupted one. Or a
            `tf.data.Dataset` of one epoch that reshuffles itself: a resumed run then sees
            other orders.
        steps_per_epoch: int. Steps of one Keras epoch (a whole epoch or a part).
        epochs: int. Keras epochs of the whole run.
        config: `kbert.tasks.configs.RunConfig`: `output_dir` (this worker's),
            `log_every_n_steps` and `train_batch_size`.
        epoch_logs: sequence of callbacks that add to or rename the logs, run first (after
            the epoch's timing and the divergence check) so that the backup, the records,
            the progress line and the history see what they do.
        callbacks: sequence of more callbacks, run after the backup and the records.

    Returns:
        (dict, `keras.callbacks.History`): the dict holds epochs_this_run (fewer than
        `epochs` when resumed), steps (the global step), seconds, epoch_seconds and
        final_loss (None when no epoch was left to run).
    """
    out = config.output_dir
    backup = backups.Backup(os.path.join(out, artifacts.BACKUP_DIR))
    fit_steps = None
    if callable(dataset):
        backup.set_model(model)  # restored now: the data start at the epoch it restores
        dataset = dataset(backup.restore())
        fit_steps = steps_per_epoch  # one stream for every epoch
    epoch_seconds = []
    all_callbacks = [
        # First: epoch_seconds is training time, without the dev scoring.
        keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: epoch_seconds.append(time.perf_counter()),
            on_epoch_end=lambda epoch, logs: epoch_seconds.append(
                time.perf_counter() - epoch_seconds.pop())),
        # A diverged epoch is an error before it is scored, backed up or recorded.
        epoch_callbacks.StopIfDiverged(),
        # Then the logs' additions, so that the loggers see them; a backup of epoch N comes
        # after the best of epochs 1..N is kept (`epoch_callbacks.BestEpoch`).
        *epoch_logs,
        backup,
        epoch_callbacks.LogRestored(),
        *epoch_callbacks.recording_callbacks(out),
        *callbacks,
        progress.TrainingProgress(config.log_every_n_steps,
                                  examples_per_step=config.train_batch_size),
    ]
    start = time.perf_counter()
    history = model.fit(dataset, epochs=epochs, steps_per_epoch=fit_steps,
                        callbacks=all_callbacks, verbose=0,
                        shuffle=False)  # the input shuffles itself, seeded
    seconds = time.perf_counter() - start
    epochs_run = len(history.epoch)
    return {
        "epochs_this_run": epochs_run, "steps": strategies.global_step(model),
        "seconds": round(seconds, 2), "epoch_seconds": [round(t, 2) for t in epoch_seconds],
        "final_loss": float(history.history["loss"][-1]) if epochs_run else None,
    }, history
