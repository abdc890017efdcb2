"""GLUE fine-tuning with `model.fit`: build -> compile -> fit -> evaluate -> predict -> write.

The recipe of Google's run_classifier.py on Keras parts: a `BertClassifier` from a Google
checkpoint, BERT's AdamW (`create_optimizer`), length-bucketed tf.data input, and Keras
callbacks for what the Estimator did: `BackupAndRestore` (an interrupted run resumes from its
last finished epoch), `ModelCheckpoint` (`model.keras` after every epoch) and `TensorBoard`.

Files written to `output_dir`, each atomically (temporary name, then rename):
    eval_results.txt   Google's "key = value" lines, e.g. `dev_accuracy = 0.86`.
    eval_results.json  the same, nested by split.
    train_results.json steps, epochs, seconds and examples per second of the fit.
    <TASK>.tsv         test predictions in the GLUE server's format: `index<TAB>prediction`
                       (MNLI-m.tsv and MNLI-mm.tsv for MNLI, AX.tsv for the diagnostic set).
    model.keras        the fine-tuned classifier; `backup/` while training.
    training_log.csv   per-epoch loss and accuracy; `logs/` the same for TensorBoard (when
                       the tensorboard package is installed).

Runs on one device or several (`distribution_strategy`), in mixed precision if asked; see
`kbert.tasks.distribution`. The batch sizes are global: split over the replicas.
"""

import dataclasses
import json
import math
import os
import time

import keras
import numpy as np
from absl import logging

from kbert import io
from kbert.checkpoints import tf1
from kbert.data import glue
from kbert.data import pipeline
from kbert.models.classifier import BertClassifier
from kbert.tasks import distribution
from kbert.tasks import fine_tuning
from kbert.tasks import metrics
from kbert.tokenization import BertPreprocessor
from kbert.tokenization.vocab import check_vocab_size

MODEL_FILE = "model.keras"


@dataclasses.dataclass(frozen=True)
class GlueConfig:
    """One fine-tuning run, with the flag names and defaults of Google's run_classifier.py.

    Args:
        task_name: str. A GLUE task ("MRPC", "SST-2", "MNLI", ...; see `kbert.data.glue`).
        data_dir: str. The task's GLUE directory (`train.tsv`, `dev.tsv`, `test.tsv`).
        output_dir: str. Where results, `model.keras`, logs and the training backup go.
        init_checkpoint: str. A Google checkpoint (release directory or prefix; a head from
            run_classifier.py is restored too) or a `.keras` `BertClassifier`. Defaults to
            `output_dir/model.keras` when only evaluating or predicting.
        vocab_file: str. Defaults to the `vocab.txt` beside the checkpoint.
        bert_config_file: str. Defaults to the `bert_config.json` beside the checkpoint.
        do_lower_case: bool. Whether the model is uncased. Defaults to True.
        max_seq_length: int. Longer inputs are truncated (pairs as Google: longer side first).
        train_batch_size, eval_batch_size, predict_batch_size: int. Defaults 32, 8, 8.
        learning_rate: float. Peak AdamW learning rate. Defaults to 5e-5.
        num_train_epochs: int. Whole epochs (Keras `fit` counts whole epochs). Defaults to 3.
        warmup_proportion: float. Fraction of training steps of linear warm-up. Defaults 0.1.
        do_train, do_eval, do_predict: bool. Which steps to run.
        max_train_examples: int. Train on a random subset of this many examples (seeded).
        seed: int. Seeds the subset, the shuffle, dropout and the new head. Defaults to 12345.
        skip_bad_rows: bool. Skip (and log with file:line) malformed rows of the dev and test
            files instead of stopping at the first; train rows are always skipped so.
            Defaults to False.
        distribution_strategy: str or `tf.distribute.Strategy`. One of
            `kbert.tasks.distribution.STRATEGIES`. Defaults to "one_device".
        tpu: str. The TPU for distribution_strategy "tpu". Defaults to None.
        mixed_precision: str. "float32", "mixed_float16" or "mixed_bfloat16". Defaults to
            "float32".
        jit_compile: bool. XLA-compile the train step. Each batch is padded to its
            longest example, so batches come in many shapes (a width per length, and the
            smaller last batch of each bucket), and XLA compiles every new shape, seconds
            each: on a short fine-tuning run that costs more than it saves. Defaults to False.
    """

    task_name: str
    data_dir: str
    output_dir: str
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    bert_config_file: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: int = 3
    warmup_proportion: float = 0.1
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    max_train_examples: int | None = None
    seed: int = 12345
    skip_bad_rows: bool = False
    distribution_strategy: object = "one_device"
    tpu: str | None = None
    mixed_precision: str = "float32"
    jit_compile: bool = False

    def __post_init__(self):
        distribution.check(self.distribution_strategy, self.mixed_precision)
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("At least one of do_train, do_eval or do_predict must be set")
        if self.num_train_epochs != int(self.num_train_epochs) or self.num_train_epochs < 1:
            raise ValueError(f"num_train_epochs must be a whole number >= 1 (Keras fit counts "
                             f"epochs), got {self.num_train_epochs}; use max_train_examples "
                             f"to train on part of the data")
        if not 0 <= self.warmup_proportion <= 1:
            raise ValueError(f"warmup_proportion must be in [0, 1], got {self.warmup_proportion}")
        spec = glue.get_task(self.task_name)
        if self.do_train and spec.train_file is None or self.do_eval and not spec.dev_files:
            raise ValueError(f"{spec.name} can only be predicted, with a classifier fine-tuned "
                             f"on MNLI (init_checkpoint=.../{MODEL_FILE}, do_predict only)")


def run_glue(config):
    """Runs the steps `config` asks for and writes their results to `config.output_dir`.

    Returns:
        dict with "train" (fit statistics), "eval" ({split: {metric: value}}) and "predict"
        ({prediction name: path}) for the steps that ran.
    """
    # First: a multi-worker strategy must exist before TensorFlow runs an op.
    strategy = distribution.make_strategy(config.distribution_strategy, config.tpu)
    with distribution.mixed_precision_scope(config.mixed_precision), strategy.scope():
        return _run_glue(config, strategy)


def _run_glue(config, strategy):
    spec = glue.get_task(config.task_name)
    keras.utils.set_random_seed(config.seed)
    os.makedirs(config.output_dir, exist_ok=True)
    model, vocab_file = load_classifier(config, spec)
    check_vocab_size(vocab_file, model.bert_config.vocab_size, config.init_checkpoint)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    config = dataclasses.replace(
        config, output_dir=distribution.worker_output_dir(config.output_dir, strategy))
    if config.do_train:  # so that output_dir/model.keras comes with its vocab
        io.copy_file(vocab_file, os.path.join(config.output_dir, tf1.VOCAB_FILE))
    # Unpadded: the pipeline pads each batch to its own longest example.
    preprocessor = BertPreprocessor(vocab_file, do_lower_case=config.do_lower_case,
                                    max_seq_length=config.max_seq_length, pad_to_max_length=False)
    results = {}
    if config.do_train:
        results["train"] = train(model, config, spec, preprocessor)
    if config.do_eval:
        results["eval"] = {
            split: evaluate(model, glue.read_glue(config.data_dir, spec, split,
                                                  errors=_row_errors(config)),
                            spec, preprocessor, config.eval_batch_size)
            for split, _ in spec.dev_files}
        write_eval_results(config.output_dir, spec, results["eval"],
                           distribution.global_step(model))
    if config.do_predict:
        results["predict"] = {}
        for split, _, name in spec.test_files:
            examples = glue.read_glue(config.data_dir, spec, split, errors=_row_errors(config))
            outputs = predict(model, examples, preprocessor, config.predict_batch_size)
            path = os.path.join(config.output_dir, f"{name}.tsv")
            write_predictions(path, examples.index, format_predictions(spec, outputs))
            results["predict"][name] = path
    return results


def load_classifier(config, spec):
    """The classifier to start from, and the vocab file that goes with it.

    A `.keras` file is loaded as is; a Google checkpoint gives a `BertClassifier` with a new
    head (or its run_classifier.py head). Without `init_checkpoint`, evaluating or predicting
    uses `output_dir/model.keras`, as Google's Estimator restores its `output_dir`. Models
    are built in the current strategy scope and dtype policy (a `.keras` file is converted to
    `config.mixed_precision`).
    """
    path = config.init_checkpoint
    if path is None and not config.do_train:
        path = os.path.join(config.output_dir, MODEL_FILE)
    if path is None:
        raise ValueError("init_checkpoint is required to train (a Google checkpoint)")
    if path.endswith(".keras"):
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found; train first or pass init_checkpoint")
        model = distribution.load_model(path, config.mixed_precision)
        if not isinstance(model, BertClassifier) or model.num_classes != spec.num_classes:
            raise ValueError(f"{path}: expected a BertClassifier with {spec.num_classes} "
                             f"outputs for {spec.name}")
        vocab_file = config.vocab_file or _existing(os.path.join(os.path.dirname(path),
                                                                 tf1.VOCAB_FILE))
    else:
        model = BertClassifier.from_google_checkpoint(path, spec.num_classes,
                                                      config=config.bert_config_file)
        vocab_file = config.vocab_file or tf1.GoogleCheckpoint.open(
            path, config.bert_config_file).vocab_file
    if vocab_file is None:
        raise ValueError(f"no vocab.txt beside {path}; pass vocab_file")
    return model, vocab_file


def _row_errors(config):
    return "warn" if config.skip_bad_rows else "raise"


def train(model, config, spec, preprocessor):
    """Fine-tunes `model` on the task's train split; returns fit statistics."""
    examples = glue.read_glue(config.data_dir, spec, "train", errors="warn")
    examples = examples.sample(config.max_train_examples, seed=config.seed)
    tokenized = pipeline.tokenize(examples, preprocessor)
    dataset, steps = pipeline.training_dataset(
        tokenized, examples.label, config.train_batch_size, seed=config.seed)
    # Every worker shuffles alike (seeded) and keeps its part of each global batch.
    dataset = distribution.shard_by_data(dataset)
    epochs = int(config.num_train_epochs)
    num_train_steps = steps * epochs
    fine_tuning.compile_model(model, config, num_train_steps)
    out = config.output_dir
    callbacks, epoch_seconds = fine_tuning.callbacks(out, MODEL_FILE)
    logging.info("%s: %d training examples, %d steps per epoch, %d epochs", spec.name,
                 len(examples), steps, epochs)
    start = time.perf_counter()
    history = model.fit(dataset, epochs=epochs, callbacks=callbacks, verbose=2,
                        shuffle=False)  # the dataset shuffles itself, seeded
    seconds = time.perf_counter() - start
    epochs_run = len(history.epoch)  # fewer than `epochs` when resumed from a backup
    stats = {
        "task": spec.name, "examples": len(examples), "epochs": epochs,
        "epochs_this_run": epochs_run, "steps": distribution.global_step(model),
        "seconds": round(seconds, 2),
        "examples_per_second": round(len(examples) * epochs_run / seconds, 2) if seconds else None,
        "epoch_seconds": [round(t, 2) for t in epoch_seconds],
        "mean_tokens_per_example": float(np.mean(tokenized.lengths)),
        "final_loss": float(history.history["loss"][-1]) if epochs_run else None,
    }
    with io.atomic_write(os.path.join(out, "train_results.json")) as f:
        json.dump(stats, f, indent=2)
    logging.info("Training done: %s", stats)
    return stats


def predict(model, examples, preprocessor, batch_size):
    """Model outputs [examples, num_classes] for `examples`, in their order."""
    tokenized = pipeline.tokenize(examples, preprocessor)
    dataset, order = pipeline.inference_dataset(tokenized, batch_size)
    # Under a strategy `predict` splits each batch over the replicas and joins the outputs
    # back in order.
    dataset = distribution.shard_by_data(dataset)
    return pipeline.restore_order(model.predict(dataset, verbose=0), order)


def evaluate(model, examples, spec, preprocessor, batch_size):
    """The task's official metrics and the loss on labelled `examples`."""
    outputs = predict(model, examples, preprocessor, batch_size)
    scores = metrics.compute(spec.metric, examples.label, outputs)
    scores["loss"] = _loss(examples.label, outputs, spec.num_classes)
    scores["examples"] = len(examples)
    logging.info("%s %s: %s", spec.name, examples.source, scores)
    return scores


def format_predictions(spec, outputs):
    """Class names, or regression scores with 3 decimals, as the GLUE server expects."""
    if spec.num_classes == 1:
        return [f"{value:.3f}" for value in np.asarray(outputs).reshape(-1)]
    return [spec.labels[i] for i in metrics.predictions_from_outputs(outputs)]


def write_predictions(path, index, predictions):
    """Writes `index<TAB>prediction` lines under that header, atomically."""
    with io.atomic_write(path) as f:
        f.write("index\tprediction\n")
        f.writelines(f"{i}\t{p}\n" for i, p in zip(index, predictions, strict=True))


def write_eval_results(output_dir, spec, results, global_step):
    """Writes eval_results.txt (`split_metric = value` lines) and eval_results.json."""
    flat = {f"{split}_{name}": value for split, scores in results.items()
            for name, value in scores.items()}
    flat["global_step"] = global_step
    with io.atomic_write(os.path.join(output_dir, "eval_results.txt")) as f:
        f.writelines(f"{key} = {flat[key]}\n" for key in sorted(flat))
    with io.atomic_write(os.path.join(output_dir, "eval_results.json")) as f:
        json.dump({"task": spec.name, "global_step": global_step, **results}, f, indent=2)


def _existing(path):
    return path if os.path.exists(path) else None


def _loss(labels, outputs, num_classes):
    outputs = np.asarray(outputs, dtype=np.float64)
    if num_classes == 1:
        return float(np.mean((outputs.reshape(-1) - labels) ** 2))
    shifted = outputs - outputs.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -np.mean(log_probs[np.arange(len(labels)), labels])
    return float(loss) if math.isfinite(loss) else None
