"""What every fine-tuning recipe does around `model.fit`: compile with BERT's AdamW, callbacks."""

import importlib.util
import os
import time

import keras
from absl import logging

from kbert.tasks import optimization

BACKUP_DIR = "backup"


def compile_model(model, config, num_train_steps):
    """Compiles `model` with BERT's AdamW (warm-up then linear decay) under its strategy.

    Args:
        model: the task model.
        config: a recipe config with `learning_rate`, `warmup_proportion` and `jit_compile`.
        num_train_steps: int. Steps of the whole run.
    """
    with model.distribute_strategy.scope():  # optimizer variables beside the model's
        optimizer = optimization.create_optimizer(
            config.learning_rate, num_train_steps,
            int(num_train_steps * config.warmup_proportion))
        # Bucketed batches have many shapes and XLA compiles each one: off by default.
        model.compile(optimizer=optimizer, jit_compile=config.jit_compile)


def callbacks(output_dir, model_file):
    """Resumable-run callbacks, and the list of epoch durations (s) they fill in.

    `BackupAndRestore` (an interrupted run restarts at its last finished epoch),
    `ModelCheckpoint` to `output_dir/model_file`, `CSVLogger` (`training_log.csv`) and, when
    tensorboard is installed, `TensorBoard` logs in `output_dir/logs`.
    """
    epoch_seconds = []
    found = [
        keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: epoch_seconds.append(time.perf_counter()),
            on_epoch_end=lambda epoch, logs: epoch_seconds.append(
                time.perf_counter() - epoch_seconds.pop())),
        keras.callbacks.BackupAndRestore(os.path.join(output_dir, BACKUP_DIR)),
        keras.callbacks.ModelCheckpoint(os.path.join(output_dir, model_file)),
        keras.callbacks.CSVLogger(os.path.join(output_dir, "training_log.csv"), append=True),
    ]
    if importlib.util.find_spec("tensorboard") is not None:
        found.append(keras.callbacks.TensorBoard(os.path.join(output_dir, "logs"),
                                                 write_graph=False))
    else:
        logging.warning("tensorboard is not installed: no TensorBoard logs (training_log.csv "
                        "has the per-epoch loss)")
    return found, epoch_seconds
