"""Sentence (pair) classification and regression: GLUE tasks, or a user's own files.

The recipe of Google's run_classifier.py on the shared skeleton (`kbert.tasks.fine_tuning`):
a `BertClassifier` from a Google checkpoint, length-grouped batches (`kbert.data.pipeline`),
and the task's official metric (`kbert.tasks.glue_metrics`), which also picks the best epoch.

Data is either a GLUE task directory (`task_name`, `data_dir`) or a user's `.csv`, `.tsv` or
`.jsonl` files (`train_file`, `dev_file`, `test_file`) read by column name
(`kbert.data.glue.read_classification_file`).

Files written to `output_dir` besides the shared layout of `kbert.tasks.fine_tuning`:
    <TASK>.tsv              test predictions in the GLUE server's format: `index<TAB>prediction`
                            (MNLI-m.tsv and MNLI-mm.tsv for MNLI, AX.tsv for the diagnostic
                            set; test_predictions.tsv for own data).
    <dev split>_predictions.tsv  index, text_a, (text_b,) gold, predicted and the
                            probability of each class (or the score, for regression).
"""

import math
import os

import keras
import numpy as np
from absl import logging

from kbert import io
from kbert.data import glue
from kbert.data import packing
from kbert.data import pipeline
from kbert.models import opening
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.tasks import fine_tuning
from kbert.tasks import glue_metrics
from kbert.tasks import progress
from kbert.tasks import strategies
from kbert.tasks import template
from kbert.tasks.configs import GlueConfig
from kbert.tokenization import BertPreprocessor
from kbert.tokenization import vocab as vocab_lib

OWN_TASK = "own"  # `TaskSpec.name` of a user's own data
# A tab, and every character `str.splitlines` breaks a line at: spaces in a predictions TSV.
_TSV_BREAKS = str.maketrans(dict.fromkeys("\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))
# The score of each metric that picks the best epoch.
PRIMARY_SCORE = {"accuracy": "accuracy", "f1_accuracy": "accuracy_and_f1",
                 "matthews_corrcoef": "matthews_corrcoef", "pearson_spearman": "correlation"}


def data_files(config, spec):
    """(option, path) of every file the steps of `config` ask for read."""
    wanted = ([("train", spec.splits["train"])] if config.do_train else []) + (
        list(spec.dev_files) if config.do_eval else []) + (
        [(split, file) for split, file, _ in spec.test_files] if config.do_predict else [])
    if config.task_name is None:
        return [(f"{split}_file", file) for split, file in wanted]
    return [(f"{split} split of data_dir", os.path.join(config.data_dir, file))
            for split, file in wanted]


def read_split(config, spec, split, errors="raise"):
    """The examples of `split` ("train", a dev or a test split)."""
    if config.task_name is not None:
        return glue.read_glue(config.data_dir, spec, split, errors=errors)
    path = dict(data_files(config, spec))[f"{split}_file"]
    return glue.read_classification_file(
        path, config.text_a_column, config.text_b_column,
        None if split == "test" else config.label_column, label_names=spec.labels,
        regression=config.regression, errors=errors)


def task_spec(config, settings=None):
    """The `TaskSpec` of `config`: a GLUE task's, or one made for own data.

    Own data's labels are `config.labels`, else the training file's, else `settings`'
    `label_names` (the `export_settings.json` of the model to evaluate).
    """
    if config.task_name is not None:
        return glue.get_task(config.task_name)
    labels = glue.REGRESSION if config.regression else config.labels
    if labels is None and not config.regression:
        if config.do_train:
            labels = glue.read_classification_file(config.train_file, config.text_a_column,
                                                   config.text_b_column, config.label_column,
                                                   errors="skip").label_names
        elif settings and settings.get("label_names"):
            labels = tuple(settings["label_names"])
        else:
            raise ValueError("pass labels (the classes in id order) to evaluate or predict "
                             "own data without training")
    labels = None if labels is None else tuple(labels)
    metric = "pearson_spearman" if labels is None else (
        "f1_accuracy" if len(labels) == 2 else "accuracy")
    return glue.TaskSpec(
        OWN_TASK, labels, metric, labelled=None, unlabelled=glue.Layout(text_a=0),
        dev_files=(("dev", config.dev_file),) if config.dev_file else (),
        test_files=(("test", config.test_file, "test_predictions"),) if config.test_file else (),
        train_file=config.train_file)


def run_glue(config: GlueConfig) -> dict:
    """Runs the steps `config` asks for and writes their results to `config.output_dir`.

    Returns:
        dict with "train" (fit statistics), "eval" ({split: {metric: value}}) and "predict"
        ({prediction name: path}) for the steps that ran.
    """
    if config.multi_label:
        from kbert.tasks import multi_label  # here: it builds on this module

        return template.run(config, multi_label.MultiLabelRecipe)
    return template.run(config, ClassifierRecipe)


class ClassifierRecipe(template.Recipe):
    """Classification and regression (`kbert.tasks.template`): a `BertClassifier`,
    length-grouped batches, the task's official metric."""

    head = BertClassifier

    def data_files(self, source):
        self.spec = task_spec(self.config, source.settings)
        return data_files(self.config, self.spec)

    def read(self, files):
        config, spec = self.config, self.spec
        splits = (["train"] if config.do_train else []) + (
            [split for split, _ in spec.dev_files] if config.do_eval else []) + (
            [split for split, _, _ in spec.test_files] if config.do_predict else [])
        data = {split: read_split(config, spec, split,
                                  errors="warn" if config.skip_bad_rows else "raise")
                for split in splits}
        if config.do_train and spec.labels is not glue.REGRESSION and len(spec.labels) < 2:
            raise ValueError(f"{config.train_file}: only one label: {spec.labels[0]!r}; a "
                             "classifier needs at least 2 classes (for real-valued labels, pass "
                             "regression (--regression))")
        return data

    def build_model(self, source, data):
        self.preprocessor = preprocessor(self.config, source)
        return load_classifier(self.config, source, self.spec.num_classes)

    def training(self, model, data):
        config, spec = self.config, self.spec
        examples = data["train"].sample(config.max_train_examples, seed=config.seed)
        tokenized = pipeline.tokenize(examples, self.preprocessor)
        stats = {"task": spec.name, "examples": len(examples),
                 "mean_tokens_per_example": float(np.mean(tokenized.lengths))}
        logging.info("%s: %d training examples%s", spec.name, len(examples),
                     ", packed" if config.pack_examples else "")
        if not config.pack_examples:
            # (seed, epoch) -> that epoch's batches: a resumed run sees the same data.
            dataset, steps = pipeline.training_epochs(
                tokenized, examples.label, config.train_batch_size, seed=config.seed)
            return template.Training(dataset, steps, stats)
        dataset, steps = packing.packed_training_dataset(
            tokenized, examples.label, config.train_batch_size, config.max_seq_length,
            seed=config.seed)
        # Empty slots are ignored: the loss is the mean over the batch's examples, as unpacked.
        compile_kwargs = dict(
            loss=keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=packing.PAD_LABEL),
            metrics=[], weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(
                name="accuracy")])
        return template.Training(dataset, steps, {**stats, "packed": True}, compile_kwargs,
                                 model=packed_twin(model))

    def dev_scorer(self, model, data):
        config, spec = self.config, self.spec
        if not (config.do_eval and config.keep_best_epoch and spec.dev_files):
            return None
        split = spec.dev_files[0][0]  # the first dev set picks the epoch (MNLI: matched)

        def score_dev(trained):
            if trained is not model:  # the packed twin: score its weights on unpacked inputs
                model.set_weights(trained.get_weights())
            outputs = predict(model, data[split], self.preprocessor, config.eval_batch_size)
            return score(spec, data[split], outputs), outputs

        return PRIMARY_SCORE[spec.metric], score_dev

    def export_settings(self, model, data, reused):
        return {"do_lower_case": self.config.do_lower_case,
                "max_seq_length": self.config.max_seq_length,
                "text_pair": _is_pair(self.config, self.spec), "label_names": self.spec.labels}

    def score(self, model, data, output_dir, reused):
        config, spec = self.config, self.spec
        scored = template.Scored(extra={"task": spec.name})
        for split, _ in spec.dev_files if config.do_eval else ():
            outputs = reused if reused is not None and split == spec.dev_files[0][0] else (
                predict(model, data[split], self.preprocessor, config.eval_batch_size))
            scored.eval[split] = score(spec, data[split], outputs)
            write_dev_predictions(os.path.join(output_dir, f"{split}_predictions.tsv"),
                                  spec, data[split], outputs)
        for split, _, name in spec.test_files if config.do_predict else ():
            outputs = predict(model, data[split], self.preprocessor, config.predict_batch_size)
            path = os.path.join(output_dir, f"{name}.tsv")
            write_predictions(path, data[split].index, format_predictions(spec, outputs))
            scored.predict[name] = path
        return scored


def preprocessor(config, source):
    """The `BertPreprocessor` of a run, unpadded: the pipeline pads each batch to its own
    longest example."""
    return BertPreprocessor(source.vocab_file, vocabulary=source.vocab().tokens,
                            never_split=vocab_lib.load_added_tokens(source.vocab_file),
                            do_lower_case=config.do_lower_case,
                            max_seq_length=config.max_seq_length, pad_to_max_length=False)


def _is_pair(config, spec):
    if config.task_name is None:
        return config.text_b_column is not None
    return (spec.labelled or spec.unlabelled).text_b is not None


def load_classifier(config, source, num_classes, multi_label=False):
    """The classifier to start from: a `.keras` file as is, or a checkpoint of another kind
    (`kbert.models.opening`) with a new head (or its own, run_classifier.py's), built in the
    current strategy scope and policy."""
    if source.kind != opening.KERAS:
        return BertClassifier.from_google_checkpoint(
            source.google_checkpoint(), num_classes, multi_label=multi_label)
    model = fine_tuning.load_keras_model(source, BertClassifier, config.mixed_precision)
    if model.num_classes != num_classes or model.multi_label != multi_label:
        raise ValueError(f"{source.keras_file}: expected a {'multi-label ' * multi_label}"
                         f"BertClassifier with {num_classes} outputs")
    return model


def packed_twin(model):
    """A `BertClassifier` on a packed encoder with `model`'s weights, to train on packed rows
    (`kbert.data.packing`); its weights go back into `model` after training."""
    with model.distribute_strategy.scope():
        encoder = BertEncoder.from_config({**model.encoder.get_config(), "packed": True})
        twin = BertClassifier(encoder, model.num_classes, dropout=model.dropout,
                              dtype=model.dtype_policy)
    twin.set_weights(model.get_weights())
    return twin


def predict(model, examples, preprocessor, batch_size):
    """Model outputs [examples, num_classes] for `examples`, in their order."""
    tokenized = pipeline.tokenize(examples, preprocessor)
    dataset, order = pipeline.inference_dataset(tokenized, batch_size)
    # Under a strategy `predict` splits each batch over the replicas and joins the outputs
    # back in order.
    dataset = strategies.shard_by_data(dataset)
    outputs = model.predict(dataset, verbose=0, callbacks=[progress.PredictionProgress()])
    return pipeline.restore_order(outputs, order)


def score(spec, examples, outputs):
    """The task's official metrics and the loss of `outputs` on labelled `examples`."""
    scores = glue_metrics.compute(spec.metric, examples.label, outputs)
    scores["loss"] = _loss(examples.label, outputs, spec.num_classes)
    scores["examples"] = len(examples)
    logging.info("%s %s: %s", spec.name, examples.source, scores)
    return scores


def format_predictions(spec, outputs):
    """Class names, or regression scores with 3 decimals, as the GLUE server expects."""
    if spec.num_classes == 1:
        return [f"{value:.3f}" for value in np.asarray(outputs).reshape(-1)]
    return [spec.labels[i] for i in glue_metrics.predictions_from_outputs(outputs)]


def write_predictions(path, index, predictions):
    """Writes `index<TAB>prediction` lines under that header, atomically."""
    with io.atomic_write(path) as f:
        f.write("index\tprediction\n")
        f.writelines(f"{_tsv_field(i)}\t{_tsv_field(p)}\n"
                     for i, p in zip(index, predictions, strict=True))


def write_dev_predictions(path, spec, examples, outputs):
    """Writes index, texts, gold, predicted and class probabilities (or the score) as TSV."""
    predicted = format_predictions(spec, outputs)
    if spec.num_classes == 1:
        write_prediction_table(path, examples, [f"{value:.3f}" for value in examples.label],
                               predicted)
    else:
        write_prediction_table(path, examples, [spec.labels[i] for i in examples.label],
                               predicted, spec.labels, _softmax(outputs))


def write_prediction_table(path, examples, gold, predicted, label_names=(),
                           probabilities=None):
    """Writes a TSV of index, text_a, (text_b,) (gold,) predicted and p_<label> columns.

    Args:
        path: str.
        examples: `kbert.data.glue.Examples`.
        gold, predicted: sequence of str per example; gold None for unlabelled examples.
        label_names: sequence of str. Names of the probability columns.
        probabilities: array [examples, len(label_names)] or None.
    """
    texts = [examples.text_a] + ([examples.text_b] if examples.text_b is not None else [])
    columns = [examples.index, *texts] + ([gold] if gold is not None else []) + [predicted]
    header = ["index", "text_a", "text_b"][:len(texts) + 1] + (
        ["gold"] if gold is not None else []) + ["predicted"] + [f"p_{n}" for n in label_names]
    if probabilities is None:
        probabilities = [[] for _ in predicted]
    with io.atomic_write(path) as f:
        f.write("\t".join(header) + "\n")
        for *row, p in zip(*columns, probabilities, strict=True):
            f.write("\t".join([*map(_tsv_field, row), *(f"{value:.4f}" for value in p)]) + "\n")


def _tsv_field(text):
    """`text` as one field of a TSV line: tabs and line breaks (a CSV field may hold them)
    become spaces, which would otherwise shift the columns or start a line."""
    return str(text).translate(_TSV_BREAKS)


def _softmax(outputs):
    outputs = np.asarray(outputs, dtype=np.float64)
    shifted = np.exp(outputs - outputs.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _loss(labels, outputs, num_classes):
    outputs = np.asarray(outputs, dtype=np.float64)
    if num_classes == 1:
        return float(np.mean((outputs.reshape(-1) - labels) ** 2))
    shifted = outputs - outputs.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -np.mean(log_probs[np.arange(len(labels)), labels])
    return float(loss) if math.isfinite(loss) else None
