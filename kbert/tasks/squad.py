"""SQuAD v1.1 / v2.0 fine-tuning: read -> featurize -> fit (resumable) -> predict -> evaluate.

`run_squad` is the recipe behind tools/run_squad.py, on the recipe template
(`kbert.tasks.template`, `SpanRecipe`: the fit path of every recipe, with epochs cut into
parts); its parts are usable alone: `build_model`, `training_batches`, `predict_logits`, and
`kbert.tasks.squad_postprocess` / `kbert.tasks.squad_metrics` for answers and scores.

Batches are cut to their longest window (rounded up to 16), and training batches are drawn
from pools of 64 batches sorted by length, so little time goes to padding; the data order is a
function of (seed, step), so a resumed run sees the batches it would have seen.

When `predict_file` has answers and training runs more than one epoch, it is the dev set:
scored (EM/F1) after every epoch, and the saved model is the epoch with the best F1
(`keep_best_epoch`; else the last), as the GLUE and NER recipes keep theirs.

`run_squad` runs on one device or several (`distribution_strategy`), in mixed precision if
asked; see `kbert.tasks.strategies`. The batch sizes are global: split over the replicas.
"""

import json
import math
import os
import random
import time

import numpy as np
import tensorflow as tf
from absl import logging

from kbert.data import pipeline
from kbert.data import squad as squad_data
from kbert.models import opening
from kbert.models.encoder import BertEncoder
from kbert.models.span_labeler import MASKED_LOGIT
from kbert.models.span_labeler import BertSpanLabeler
from kbert.tasks import fine_tuning
from kbert.tasks import squad_metrics
from kbert.tasks import squad_postprocess
from kbert.tasks import strategies
from kbert.tasks import template
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
        dataset = strategies.shard_by_data(pipeline.prefetched(
            tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)))
        outputs = model.predict(dataset, verbose=0)
        start[rows, :width] = outputs["start_logits"]
        end[rows, :width] = outputs["end_logits"]
    return start, end


def run_squad(config: SquadConfig) -> dict:
    """Google's run_squad.py as a function: train on `train_file`, predict `predict_file`.

    Writes the shared output layout of `kbert.tasks.template` after training;
    `predictions.json`, `nbest_predictions.json` (and `null_odds.json` for SQuAD 2.0) after
    predicting; `eval_results.txt/.json` when `predict_file` has answers (official EM/F1).

    Returns:
        dict with "train" and/or "eval" results.
    """
    return template.run(config, SpanRecipe)


class SpanRecipe(template.Recipe):
    """SQuAD on the recipe template: a `BertSpanLabeler`, document windows, official EM/F1.

    Training steps are `int(windows // batch * num_train_epochs)` (fractions allowed), cut
    into parts of at most `save_checkpoints_steps` steps, each a Keras epoch with a backup
    after it; with a scored predict file, parts end at epoch ends, where the dev set is scored
    and the best epoch kept. The batches are a stream whose order is a function of (seed,
    step), so a resumed run sees the batches the uninterrupted one saw.
    """

    head = BertSpanLabeler

    def open(self):
        config = self.config
        path = config.model_path()
        if path is None:  # a model from scratch, on bert_config_file
            if config.vocab_file is None:
                raise ValueError("pass vocab_file (a model from scratch has no vocab beside it)")
            return None
        return opening.open_model(path, config.vocab_file, config.bert_config_file)

    def read(self, files):
        config, data = self.config, {}
        if config.do_train:
            examples = squad_data.read_squad_examples(config.train_file, True,
                                                      config.version_2_with_negative)
            count = min(config.max_train_examples or len(examples), len(examples))
            keep = sorted(random.Random(config.seed).sample(range(len(examples)), count))
            data["train"] = [examples[i] for i in keep]  # a seeded subset, in file order
        if config.do_predict:
            data["json"] = squad_data.load_squad_file(config.predict_file)
            data["predict"] = squad_data.read_squad_examples(
                data["json"], False, config.version_2_with_negative, source=config.predict_file)
            data["has_answers"] = any(qa.get("answers") for article in data["json"]["data"]
                                      for p in article["paragraphs"] for qa in p["qas"])
        return data

    def build_model(self, source, data):
        config = self.config
        model = build_model(source, config.bert_config_file, config.version_2_with_negative,
                            config.mixed_precision)
        vocab_file = source.vocab_file if source else config.vocab_file
        # The vocab validate_inputs read (a model from scratch: read here).
        self.tokenizer = FullTokenizer(source.vocab() if source else vocab_file,
                                       do_lower_case=config.do_lower_case,
                                       never_split=vocab_lib.load_added_tokens(vocab_file))
        self.featurize = dict(
            tokenizer=self.tokenizer, max_seq_length=config.max_seq_length,
            doc_stride=config.doc_stride, max_query_length=config.max_query_length,
            version_2_with_negative=config.version_2_with_negative)
        if config.do_predict:
            self.predict_features = squad_data.convert_examples_to_features(
                data["predict"], is_training=False, **self.featurize)
        return model

    def training(self, model, data):
        config = self.config
        features = squad_data.convert_examples_to_features(data["train"], is_training=True,
                                                           **self.featurize)
        logging.info("%s: %d training examples -> %d windows", config.train_file,
                     len(data["train"]), len(features))
        if len(features) < config.train_batch_size:
            raise ValueError(f"{config.train_file}: {len(features)} training windows make no "
                             f"batch of {config.train_batch_size} — lower train_batch_size or "
                             "add examples")
        steps_per_epoch = max(1, len(features) // config.train_batch_size)
        wanted = max(1, int(steps_per_epoch * config.num_train_epochs))
        if self.dev_scorer(model, data) is None:
            parts = math.ceil(wanted / config.save_checkpoints_steps)
            steps_per_part, parts_per_epoch = math.ceil(wanted / parts), 1
        else:  # parts end at epoch ends, where the dev set is scored
            parts_per_epoch = math.ceil(steps_per_epoch / config.save_checkpoints_steps)
            steps_per_part = math.ceil(steps_per_epoch / parts_per_epoch)
            parts = math.ceil(wanted / steps_per_part)
        spec = tf.TensorSpec([None, None], tf.int32)
        signature = ({name: spec for name in features.inputs()},
                     {name: tf.TensorSpec([None], tf.int32)
                      for name in ("start_logits", "end_logits")})

        def from_part(first):
            return pipeline.prefetched(tf.data.Dataset.from_generator(
                lambda: training_batches(features, config.train_batch_size, config.seed,
                                         first * steps_per_part),
                output_signature=signature))

        return template.Training(
            from_part, steps_per_part,
            {"examples": len(data["train"]), "windows": len(features),
             "steps_per_part": steps_per_part}, parts=parts, parts_per_epoch=parts_per_epoch)

    def dev_scorer(self, model, data):
        # With answers, the predict file is the dev set: scored after every epoch.
        if not (self.config.do_train and data.get("has_answers")
                and self.config.num_train_epochs > 1):
            return None
        return "f1", lambda m: self._scores_and_predictions(m, data)

    def _scores_and_predictions(self, model, data):
        predictions = self._predict(model, data)
        return self._evaluate(data, predictions), predictions

    def export_settings(self, model, data, reused):
        config = self.config
        return {"do_lower_case": config.do_lower_case, "max_seq_length": config.max_seq_length,
                "max_query_length": config.max_query_length,
                "max_answer_length": config.max_answer_length,
                "null_score_diff_threshold": config.null_score_diff_threshold}

    def score(self, model, data, output_dir, reused):
        scored = template.Scored()
        if not self.config.do_predict:
            return scored
        # The kept epoch's dev predictions when they were the last ones made in training.
        predictions = reused if reused is not None else self._predict(model, data)
        squad_postprocess.write_predictions(predictions, output_dir)
        scored.predict["predictions"] = os.path.join(output_dir, "predictions.json")
        if data["has_answers"]:
            # Top-level keys, as the official evaluation script prints them.
            scored.summary = self._evaluate(data, predictions)
            logging.info("%s: %s", self.config.predict_file, json.dumps(scored.summary))
        return scored

    def _predict(self, model, data):
        config, began = self.config, time.time()
        start_logits, end_logits = predict_logits(model, self.predict_features,
                                                  config.predict_batch_size)
        logging.info("%s: predicted %d windows of %d examples in %.1f s", config.predict_file,
                     len(self.predict_features), len(data["predict"]), time.time() - began)
        return squad_postprocess.postprocess(
            data["predict"], self.predict_features, start_logits, end_logits,
            squad_postprocess.basic_tokenizer_for(self.tokenizer),
            n_best_size=config.n_best_size, max_answer_length=config.max_answer_length,
            version_2_with_negative=config.version_2_with_negative,
            null_score_diff_threshold=config.null_score_diff_threshold)

    def _evaluate(self, data, predictions):
        return squad_metrics.evaluate(data["json"], predictions.predictions,
                                      self.config.version_2_with_negative,
                                      predictions.null_odds)
