"""SQuAD v1.1 / v2.0 fine-tuning: read -> featurize -> fit (resumable) -> predict -> evaluate.

`run_squad` is the recipe behind tools/run_squad.py; its parts are usable alone:
`build_model`, `train` (model.fit on the mean of the start and end cross-entropies, BERT's
AdamW schedule, `kbert.tasks.backups.Backup`), `predict_logits`, and
`kbert.tasks.squad_postprocess` / `kbert.tasks.squad_metrics` for answers and scores.

Batches are cut to their longest window (rounded up to 16), and training batches are drawn
from pools of 64 batches sorted by length, so little time goes to padding; the data order is a
function of (seed, step), so a resumed run sees the batches it would have seen.

When `predict_file` has answers and training runs more than one epoch, it is the dev set:
scored (EM/F1) after every epoch, and the saved model is the epoch with the best F1
(`keep_best_epoch`; else the last), as the GLUE and NER recipes keep theirs.

`run_squad` runs on one device or several (`distribution_strategy`), in mixed precision if
asked; see `kbert.tasks.distribution`. The batch sizes are global: split over the replicas.
"""

import dataclasses
import json
import math
import os
import random
import shutil
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from kbert import artifacts
from kbert import io
from kbert.data import pipeline
from kbert.data import squad as squad_data
from kbert.models import opening
from kbert.models.encoder import BertEncoder
from kbert.models.span_labeler import MASKED_LOGIT
from kbert.models.span_labeler import BertSpanLabeler
from kbert.tasks import backups
from kbert.tasks import distribution
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning
from kbert.tasks import run_manifest
from kbert.tasks import squad_metrics
from kbert.tasks import squad_postprocess
from kbert.tasks.configs import SquadConfig
from kbert.tokenization import vocab as vocab_lib
from kbert.tokenization.tokenizer import FullTokenizer


def build_model(init_checkpoint=None, bert_config_file=None, allow_null=False,
                mixed_precision="float32"):
    """A `BertSpanLabeler` from a saved model, a pretrained checkpoint, or a fresh config.

    Built in the current strategy scope and dtype policy; a `.keras` file is converted to
    `mixed_precision`.

    Args:
        init_checkpoint: str, `kbert.models.opening.OpenedModel` or None. Anything
            `open_model` opens: a saved `.keras` span labeler, or a Google, Hugging Face or
            keras-hub checkpoint (its span head is loaded if present).
        bert_config_file: str or None. `bert_config.json`; required without a checkpoint,
            else defaults to the one beside a Google checkpoint.
        allow_null: bool. SQuAD 2.0's [CLS] "no answer". Defaults to False.
        mixed_precision: str. The policy of a model loaded from `.keras`. Defaults to
            "float32".
    """
    source = init_checkpoint
    if isinstance(source, (str, os.PathLike)):
        source = opening.open_model(source, bert_config_file=bert_config_file)
    if source is None:
        if not bert_config_file:
            raise ValueError("pass init_checkpoint, or bert_config_file for a model from "
                             "scratch")
        return BertSpanLabeler(BertEncoder.from_config_file(bert_config_file), allow_null)
    if source.kind != opening.KERAS:
        return BertSpanLabeler.from_google_checkpoint(source.google_checkpoint(), allow_null)
    model = fine_tuning.load_keras_model(source, BertSpanLabeler, mixed_precision)
    if model.allow_null != allow_null:
        raise ValueError(f"{source.keras_file}: allow_null is {model.allow_null}; this run "
                         f"needs {allow_null} (version_2_with_negative)")
    return model


def training_batches(features, batch_size, seed=0, start_step=0, group_by_length=True):
    """Endless (inputs, targets) batches of training windows, from global step `start_step`.

    `kbert.data.pipeline.resumable_batches` over the windows: the data order is a function of
    (seed, step); pools of 64 batches sorted by length with `group_by_length`.

    Yields:
        (dict of int32 [batch, width] model inputs, dict of int32 [batch] `start_logits` and
        `end_logits` targets); width is the longest window of the batch rounded up to 16.
    """
    if features.start_positions is None:
        raise ValueError("features have no labels; featurize with is_training=True")
    if len(features) < batch_size:
        raise ValueError(f"{len(features)} training windows make no batch of {batch_size}")
    return pipeline.resumable_batches(
        features.inputs(), {"start_logits": features.start_positions,
                            "end_logits": features.end_positions},
        features.padding_mask.sum(axis=1), batch_size, seed, start_step, group_by_length)


def train(model, features, output_dir, *, batch_size=32, num_train_epochs=3.0,
          learning_rate=5e-5, warmup_proportion=0.1, save_checkpoints_steps=1000, seed=12345,
          group_by_length=True, log_every_steps=50, callbacks=(), verbose=2, run_eagerly=False,
          jit_compile=False, dev_scores=None, keep_best_epoch=True, keep_backup=False,
          **compile_settings):
    """Fine-tunes `model` with `model.fit`; resumes from `output_dir/backup` if it is there.

    Steps are `int(len(features) // batch_size * num_train_epochs)`, rounded up so that
    they split into equal parts of at most `save_checkpoints_steps`; each part is one Keras
    "epoch", after which `kbert.tasks.backups.Backup` saves weights, optimizer state and
    position. A rerun with the same arguments restores them and continues with the same
    batches.

    With `dev_scores`, the parts are cut so that every epoch ends with one (an epoch is then
    `len(features) // batch_size` steps rounded up to whole parts); the dev set is scored
    after each epoch and after the last part, and the model ends with the weights of the best
    epoch (`keep_best_epoch`) or of the last, as `kbert.tasks.fine_tuning.fit_and_record`.

    Args:
        model: `BertSpanLabeler`.
        features: `SquadFeatures` made with `is_training=True`.
        output_dir: str. Holds `backup/` while training runs.
        batch_size: int. Defaults to 32.
        num_train_epochs: float. Passes over the windows. Defaults to 3.0.
        learning_rate: float. Peak of the warm-up / linear-decay schedule. Defaults to 5e-5.
        warmup_proportion: float. Share of steps in warm-up. Defaults to 0.1.
        save_checkpoints_steps: int. Most steps between backups. Defaults to 1000.
        seed: int. Data order. Defaults to 12345.
        group_by_length: bool. Length-sorted pools (see `training_batches`). Defaults to True.
        log_every_steps: int. Log loss and speed with absl this often; 0 for never.
        callbacks: more Keras callbacks.
        verbose: Keras `fit` verbosity. Defaults to 2 (a line per part).
        run_eagerly: bool. No tf.function (debugging, tiny models). Defaults to False.
        jit_compile: bool. XLA; it compiles once per batch width (up to seq / 16 widths),
            seconds each. Defaults to False.
        dev_scores: `kbert.tasks.epoch_callbacks.DevScores` or None. Scores the dev set.
        keep_best_epoch: bool. With `dev_scores`, end with the best epoch's weights.
            Defaults to True.
        keep_backup: bool. Leave `backup/` for the caller to remove once the model is
            saved (`run_squad`: a run that dies saving it resumes). Defaults to False.
        **compile_settings: more `kbert.tasks.fine_tuning.compile_model` settings
            (embedding_updates, head_learning_rate_multiplier, layerwise_lr_decay,
            steps_per_execution).

    Returns:
        dict: `steps`, `steps_per_part`, `start_step`, `loss` (mean over the last part) and
        `seconds`; with `dev_scores` also `kbert.tasks.epoch_callbacks.keep_epoch`'s entries.
    """
    steps_per_epoch = max(1, len(features) // batch_size)
    wanted = max(1, int(steps_per_epoch * num_train_epochs))
    if dev_scores is None:
        parts = math.ceil(wanted / save_checkpoints_steps)
        steps_per_part = math.ceil(wanted / parts)
    else:
        parts_per_epoch = math.ceil(steps_per_epoch / save_checkpoints_steps)
        steps_per_part = math.ceil(steps_per_epoch / parts_per_epoch)
        parts = math.ceil(wanted / steps_per_part)
    total = parts * steps_per_part
    fine_tuning.compile_model(model, total, learning_rate=learning_rate,
                              warmup_proportion=warmup_proportion, jit_compile=jit_compile,
                              run_eagerly=run_eagerly, **compile_settings)
    backup_dir = os.path.join(output_dir, artifacts.BACKUP_DIR)
    backup = backups.Backup(backup_dir)
    backup.set_model(model)
    backup.restore()  # now, so that the data stream can start where it stopped
    start = distribution.global_step(model)
    if start:
        logging.info("resuming at step %d of %d from %s", start, total, backup.backup_dir)
    spec = tf.TensorSpec([None, None], tf.int32)
    dataset = tf.data.Dataset.from_generator(
        lambda: training_batches(features, batch_size, seed, start, group_by_length),
        output_signature=({name: spec for name in features.inputs()},
                          {name: tf.TensorSpec([None], tf.int32)
                           for name in ("start_logits", "end_logits")}))
    # Every worker generates the same stream and keeps its part of each global batch.
    dataset = distribution.shard_by_data(pipeline.prefetched(dataset))
    logging.info("training %d steps (%d parts of %d) on %d windows, batch %d", total, parts,
                 steps_per_part, len(features), batch_size)
    began = time.time()
    extra = [_StepLogger(log_every_steps, batch_size)] if log_every_steps else []
    best = None
    if dev_scores is not None:
        best = epoch_callbacks.BestEpoch(backup_dir, f"dev_{dev_scores.metric}")
        # Before the backup: a backup of epoch N always comes with the best of epochs 1..N.
        extra.insert(0, _AtEpochEnds([dev_scores, best], parts_per_epoch, parts))
    history = model.fit(dataset, epochs=parts, steps_per_epoch=steps_per_part,
                        initial_epoch=start // steps_per_part,
                        callbacks=[*extra[:1], backup, *extra[1:],
                                   *epoch_callbacks.recording_callbacks(output_dir), *callbacks],
                        verbose=verbose, shuffle=False)  # the stream is already shuffled
    losses = history.history.get("loss") or [float("nan")]
    result = {"steps": total, "steps_per_part": steps_per_part, "start_step": start,
              "loss": float(losses[-1]), "seconds": time.time() - began}
    if best is not None:
        result.update(epoch_callbacks.keep_epoch(best, keep_best_epoch,
                                             math.ceil(parts / parts_per_epoch)))
    if not keep_backup:
        shutil.rmtree(backup_dir, ignore_errors=True)
    return result


class _AtEpochEnds(keras.callbacks.Callback):
    """Runs `callbacks`' `on_epoch_end` after the parts that end an epoch and after the last
    part, with the epoch's index (a part is one Keras epoch; see `train`)."""

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


class _StepLogger(keras.callbacks.Callback):
    def __init__(self, every, batch_size):
        super().__init__()
        self.every, self.batch_size, self.began = every, batch_size, None

    def on_train_batch_end(self, batch, logs=None):
        step = distribution.global_step(self.model)
        if self.began is None:
            self.began = (time.time(), step)
        elif step % self.every == 0:
            rate = (step - self.began[1]) * self.batch_size / (time.time() - self.began[0])
            logging.info("step %d loss %.4f (%.1f windows/s)", step, (logs or {}).get("loss",
                                                                                 math.nan), rate)


def predict_logits(model, features, batch_size=8):
    """Start and end logits of every window, float32 [features, seq] each.

    Windows are grouped by length rounded up to 16 and each group is predicted cut to that
    width (under a strategy `predict` splits every batch over the replicas); positions past
    it are `MASKED_LOGIT`.
    """
    lengths = features.padding_mask.sum(axis=1)
    shape = features.token_ids.shape
    widths = np.array([pipeline.padded_width(int(n), shape[1]) for n in lengths])
    start = np.full(shape, MASKED_LOGIT, np.float32)
    end = np.full(shape, MASKED_LOGIT, np.float32)
    for width in np.unique(widths):
        rows = np.flatnonzero(widths == width)
        inputs = {name: array[rows, :width] for name, array in features.inputs().items()}
        dataset = distribution.shard_by_data(pipeline.prefetched(
            tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)))
        outputs = model.predict(dataset, verbose=0)
        start[rows, :width] = outputs["start_logits"]
        end[rows, :width] = outputs["end_logits"]
    return start, end


def run_squad(config: SquadConfig) -> dict:
    """Google's run_squad.py as a function: train on `train_file`, predict `predict_file`.

    Writes the shared output layout of `kbert.tasks.fine_tuning` after training;
    `predictions.json`, `nbest_predictions.json` (and `null_odds.json` for SQuAD 2.0) after
    predicting; `eval_results.txt/.json` when `predict_file` has answers (official EM/F1).

    Returns:
        dict with "train" and/or "eval" results.
    """
    return fine_tuning.run_with_strategy(config, _run_squad)


def _run_squad(config, strategy):
    path = config.model_path()
    source = (opening.open_model(path, config.vocab_file, config.bert_config_file)
              if path else None)
    if source is None and config.vocab_file is None:
        raise ValueError("pass vocab_file (a model from scratch has no vocab beside it)")
    vocab_file = source.vocab_file if source else config.vocab_file
    fine_tuning.validate_inputs(config, source, config.data_files())
    fine_tuning.check_trained_head(config, source, BertSpanLabeler)
    # Both files parsed before any training.
    train_examples = squad_data.read_squad_examples(
        config.train_file, True, config.version_2_with_negative) if config.do_train else None
    if train_examples and config.max_train_examples:  # a seeded subset, in file order
        count = min(config.max_train_examples, len(train_examples))
        keep = sorted(random.Random(config.seed).sample(range(len(train_examples)), count))
        train_examples = [train_examples[i] for i in keep]
    if config.do_predict:
        dataset = squad_data.load_squad_file(config.predict_file)
        predict_examples = squad_data.read_squad_examples(
            dataset, False, config.version_2_with_negative, source=config.predict_file)
    keras.utils.set_random_seed(config.seed)
    if config.do_train:
        run_manifest.begin_training(config, run_manifest.manifest_for(
            config, source, config.data_files()))
    model = build_model(source, config.bert_config_file, config.version_2_with_negative,
                        config.mixed_precision)
    # The vocab validate_inputs read (a model from scratch: read here).
    tokenizer = FullTokenizer(source.vocab() if source else vocab_file,
                              do_lower_case=config.do_lower_case,
                              never_split=vocab_lib.load_added_tokens(vocab_file))
    featurize = dict(tokenizer=tokenizer, max_seq_length=config.max_seq_length,
                     doc_stride=config.doc_stride, max_query_length=config.max_query_length,
                     version_2_with_negative=config.version_2_with_negative)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    output_dir = distribution.worker_output_dir(config.output_dir, strategy)
    config = dataclasses.replace(config, output_dir=output_dir)
    os.makedirs(output_dir, exist_ok=True)
    results = {}
    has_answers = config.do_predict and any(
        qa.get("answers") for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"])
    if config.do_predict:
        predict_features = squad_data.convert_examples_to_features(
            predict_examples, is_training=False, **featurize)

    def predict(m):
        began = time.time()
        start_logits, end_logits = predict_logits(m, predict_features, config.predict_batch_size)
        logging.info("%s: predicted %d windows of %d examples in %.1f s", config.predict_file,
                     len(predict_features), len(predict_examples), time.time() - began)
        return squad_postprocess.postprocess(
            predict_examples, predict_features, start_logits, end_logits,
            squad_postprocess.basic_tokenizer_for(tokenizer),
            n_best_size=config.n_best_size, max_answer_length=config.max_answer_length,
            version_2_with_negative=config.version_2_with_negative,
            null_score_diff_threshold=config.null_score_diff_threshold)

    def evaluate(predictions):
        return squad_metrics.evaluate(dataset, predictions.predictions,
                                      config.version_2_with_negative, predictions.null_odds)

    def score_dev(m):
        predictions = predict(m)
        return evaluate(predictions), predictions

    # With answers, the predict file is the dev set: scored after every epoch to keep the best.
    dev_scores = None
    if config.do_train and has_answers and config.num_train_epochs > 1:
        dev_scores = epoch_callbacks.DevScores(score_dev, "f1")
    if config.do_train:
        examples = train_examples
        features = squad_data.convert_examples_to_features(examples, is_training=True,
                                                           **featurize)
        logging.info("%s: %d training examples -> %d windows", config.train_file,
                     len(examples), len(features))
        if len(features) < config.train_batch_size:
            raise ValueError(f"{config.train_file}: {len(features)} training windows make no "
                             f"batch of {config.train_batch_size} — lower train_batch_size or "
                             "add examples")
        results["train"] = train(
            model, features, output_dir, batch_size=config.train_batch_size,
            num_train_epochs=config.num_train_epochs,
            save_checkpoints_steps=config.save_checkpoints_steps, seed=config.seed,
            dev_scores=dev_scores, keep_best_epoch=config.keep_best_epoch, keep_backup=True,
            **config.compile_settings())
        results["train"].update(examples=len(examples), windows=len(features))
        fine_tuning.write_outputs(output_dir, model, vocab_file, {
            "do_lower_case": config.do_lower_case, "max_seq_length": config.max_seq_length,
            "max_query_length": config.max_query_length,
            "max_answer_length": config.max_answer_length,
            "null_score_diff_threshold": config.null_score_diff_threshold})
        io.write_json(os.path.join(output_dir, artifacts.TRAIN_RESULTS_FILE), results["train"])
        run_manifest.finish_training(config)
    if config.do_predict:
        # The kept epoch's dev predictions when they were the last ones made in training.
        predictions = (dev_scores.outputs_of(results["train"].get("kept_epoch"))
                       if dev_scores is not None else None)
        if predictions is None:
            predictions = predict(model)
        squad_postprocess.write_predictions(predictions, output_dir)
        if has_answers:
            results["eval"] = evaluate(predictions)
            logging.info("%s: %s", config.predict_file, json.dumps(results["eval"]))
            # Top-level keys, as the official evaluation script prints them.
            fine_tuning.write_eval_results(
                output_dir, {}, distribution.global_step(model), **results["eval"],
                data_files=config.data_files(),
                **fine_tuning.kept_epoch_summary(results.get("train")))
    return results
