"""Pretraining with `model.fit`: BertPretrainer, Google's MLM + NSP losses, BERT's AdamW, resumable.

The recipe of Google's run_pretraining.py on Keras parts. The loss is Google's: masked-LM
cross-entropy averaged over the real predictions (`masked_lm_weights`), plus the next-sentence
cross-entropy averaged over the batch. Keras callbacks do what the Estimator did:
`BackupAndRestore` (an interrupted run resumes from its last finished "epoch", i.e. every
`save_checkpoints_steps` steps) and `ModelCheckpoint` (`pretrainer.keras`).

Files written to `output_dir`:
    model.ckpt-<steps>.*, bert_config.json, vocab.txt   the final Google checkpoint (Google's
                       modeling.py and `kbert.BertPretrainer.from_google_checkpoint` read it).
    pretrainer.keras   the Keras model after the latest epoch; `backup/` while training.
    train_results.json steps, seconds, examples per second and the last epoch's metrics.
    eval_results.txt   Google's "key = value" lines, when an eval input is given.

Runs on one device or several (`distribution_strategy`), in mixed precision if asked; see
`kbert.tasks.distribution`. `train_batch_size` is global: split over the replicas. With
several workers each reads its share of the input files (give at least as many files as
workers).
"""

import collections
import dataclasses
import json
import math
import os
import time

import keras
from absl import logging

from kbert import io
from kbert.checkpoints import tf1
from kbert.config import BertConfig
from kbert.data import pretraining_input
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.tasks import distribution
from kbert.tasks import optimization

MODEL_FILE = "pretrainer.keras"


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """One pretraining run, with the flag names and defaults of Google's run_pretraining.py.

    Args:
        input_file: str. Pretraining TFRecords (comma-separated files or globs).
        output_dir: str. Checkpoints, the backup and results go here.
        bert_config_file: str. The model to train from scratch; with `init_checkpoint`,
            defaults to the `bert_config.json` beside it.
        init_checkpoint: str. A Google checkpoint to continue from (release directory or
            prefix), heads included when present. Defaults to None (random init).
        vocab_file: str. Copied beside the final checkpoint. Defaults to the checkpoint's.
        max_seq_length, max_predictions_per_seq: int. Default to the records' `*_meta.json`.
        train_batch_size: int. Defaults to 32.
        learning_rate: float. Peak AdamW learning rate. Defaults to 5e-5.
        num_train_steps: int. Defaults to 100000.
        num_warmup_steps: int. Defaults to 10000.
        save_checkpoints_steps: int. Backup and `pretrainer.keras` at most this often
            (an epoch is the largest divisor of `num_train_steps` not above it). Defaults 1000.
        eval_input_file: str. Records to evaluate on after training. Defaults to None.
        max_eval_steps: int. Eval batches. Defaults to 100.
        eval_batch_size: int. Defaults to 8.
        seed: int. Seeds initialization, dropout and the input shuffle. Defaults to 12345.
        jit_compile: bool. XLA-compile the train step (fixed shapes make it pay). Defaults
            to False.
        distribution_strategy: str or `tf.distribute.Strategy`. One of
            `kbert.tasks.distribution.STRATEGIES`. Defaults to "one_device".
        tpu: str. The TPU for distribution_strategy "tpu". Defaults to None.
        mixed_precision: str. "float32", "mixed_float16" or "mixed_bfloat16". Defaults to
            "float32".
    """

    input_file: str
    output_dir: str
    bert_config_file: str | None = None
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    max_seq_length: int | None = None
    max_predictions_per_seq: int | None = None
    train_batch_size: int = 32
    learning_rate: float = 5e-5
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    save_checkpoints_steps: int = 1000
    eval_input_file: str | None = None
    max_eval_steps: int = 100
    eval_batch_size: int = 8
    seed: int = 12345
    jit_compile: bool = False
    distribution_strategy: object = "one_device"
    tpu: str | None = None
    mixed_precision: str = "float32"

    def __post_init__(self):
        distribution.check(self.distribution_strategy, self.mixed_precision)
        if not self.bert_config_file and not self.init_checkpoint:
            raise ValueError("Give bert_config_file (train from scratch) or init_checkpoint")
        if self.num_train_steps < 1 or self.save_checkpoints_steps < 1:
            raise ValueError("num_train_steps and save_checkpoints_steps must be positive")


def pretraining_losses():
    """Google's run_pretraining.py losses, keyed by `BertPretrainer` output.

    `mlm_logits`: cross-entropy summed over predictions weighted by `masked_lm_weights`,
    divided by the sum of the weights; `nsp_logits`: mean cross-entropy. `fit` adds them.
    """
    return {
        "mlm_logits": keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"),
        "nsp_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    }


def pretraining_metrics():
    """Accuracy of each head; as weighted metrics, MLM accuracy counts real predictions only.

    Reported as `mlm_logits_accuracy` and `nsp_logits_accuracy`.
    """
    return {"mlm_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "nsp_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}


def compile_pretrainer(model, optimizer, jit_compile=False):
    """Compiles a `BertPretrainer` for `fit` on `kbert.data.pretraining_dataset` batches."""
    with model.distribute_strategy.scope():  # optimizer variables beside the model's
        model.compile(optimizer=optimizer, loss=pretraining_losses(),
                      weighted_metrics=pretraining_metrics(), jit_compile=jit_compile)
    return model


def build_pretrainer(config):
    """The model to train and its vocab file: from `init_checkpoint`, or new from the config.

    Built in the current strategy scope and dtype policy.
    """
    if config.init_checkpoint:
        source = tf1.GoogleCheckpoint.open(config.init_checkpoint, config.bert_config_file)
        model = BertPretrainer(BertEncoder(**source.config.encoder_kwargs()))
        tf1.load_google_weights(model, source)
        return model, config.vocab_file or source.vocab_file
    bert_config = BertConfig.from_json_file(config.bert_config_file)
    return BertPretrainer(BertEncoder(**bert_config.encoder_kwargs())), config.vocab_file


def epoch_steps(num_train_steps, save_checkpoints_steps):
    """The largest divisor of `num_train_steps` that is at most `save_checkpoints_steps`."""
    limit = min(save_checkpoints_steps, num_train_steps)
    return max(d for d in range(1, limit + 1) if num_train_steps % d == 0)


def run_pretraining(config):
    """Trains (or resumes), saves the Google checkpoint, evaluates if asked.

    Args:
        config: `PretrainingConfig`.

    Returns:
        dict with "train" (steps, seconds, examples per second, last metrics), "checkpoint"
        (the Google checkpoint prefix) and, with an eval input, "eval".
    """
    # First: a multi-worker strategy must exist before TensorFlow runs an op.
    strategy = distribution.make_strategy(config.distribution_strategy, config.tpu)
    with distribution.mixed_precision_scope(config.mixed_precision), strategy.scope():
        return _run_pretraining(config, strategy)


def _run_pretraining(config, strategy):
    keras.utils.set_random_seed(config.seed)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    out = distribution.worker_output_dir(config.output_dir, strategy)
    os.makedirs(out, exist_ok=True)
    model, vocab_file = build_pretrainer(config)
    # Input files are sharded over workers (TensorFlow's AUTO policy: by file).
    dataset = pretraining_input.pretraining_dataset(
        config.input_file, config.train_batch_size, max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq, seed=config.seed)
    optimizer = optimization.create_optimizer(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps)
    compile_pretrainer(model, optimizer, jit_compile=config.jit_compile)

    steps = epoch_steps(config.num_train_steps, config.save_checkpoints_steps)
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(out, "backup")),
        keras.callbacks.ModelCheckpoint(os.path.join(out, MODEL_FILE)),
    ]
    start = time.perf_counter()
    history = model.fit(dataset, epochs=config.num_train_steps // steps, steps_per_epoch=steps,
                        callbacks=callbacks, verbose=2)
    seconds = time.perf_counter() - start
    trained = len(history.epoch) * steps  # this session's steps (after a resume, fewer)
    results = {"train": {
        "global_step": distribution.global_step(model),
        "steps_this_run": trained,
        "seconds": round(seconds, 1),
        "examples_per_second": round(trained * config.train_batch_size / max(seconds, 1e-9), 1),
        **{k: float(v[-1]) for k, v in history.history.items()},
    }}
    prefix = os.path.join(out, f"model.ckpt-{config.num_train_steps}")
    tf1.save_google_checkpoint(model, prefix, vocab_file=vocab_file)
    results["checkpoint"] = prefix
    logging.info("Google checkpoint written: %s", prefix)
    if config.eval_input_file:
        results["eval"] = evaluate(model, config)
        with io.atomic_write(os.path.join(out, "eval_results.txt")) as f:
            for key in sorted(results["eval"]):
                f.write(f"{key} = {results['eval'][key]}\n")
    with io.atomic_write(os.path.join(out, "train_results.json")) as f:
        json.dump(results, f, indent=2, sort_keys=True)
    return results


def evaluate(model, config):
    """Google's eval metric names over `max_eval_steps` batches of the eval input, in order."""
    dataset = pretraining_input.pretraining_dataset(
        config.eval_input_file, config.eval_batch_size, max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq, shuffle=False, repeat=True)
    metrics = model.evaluate(dataset, steps=config.max_eval_steps, return_dict=True, verbose=0)
    return {
        "masked_lm_accuracy": metrics["mlm_logits_accuracy"],
        "masked_lm_loss": metrics["mlm_logits_loss"],
        "next_sentence_accuracy": metrics["nsp_logits_accuracy"],
        "next_sentence_loss": metrics["nsp_logits_loss"],
        "loss": metrics["loss"],
        "global_step": distribution.global_step(model),
    }


def unigram_accuracy(file_pattern, max_batches=None, **kwargs):
    """Accuracy of always predicting the most frequent masked token: the baseline to beat."""
    counts = collections.Counter()
    dataset = pretraining_input.pretraining_dataset(
        file_pattern, 256, shuffle=False, repeat=False, drop_remainder=False, **kwargs)
    for _, labels, weights in dataset.take(-1 if max_batches is None else max_batches):
        counts.update(labels["mlm_logits"].numpy()[weights["mlm_logits"].numpy() > 0].tolist())
    return max(counts.values()) / sum(counts.values()) if counts else math.nan
