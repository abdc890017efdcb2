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

import dataclasses
import math
import os

import keras
import numpy as np
from absl import logging

from kbert import io
from kbert import ranges
from kbert.data import glue
from kbert.data import packing
from kbert.data import pipeline
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.tasks import distribution
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning
from kbert.tasks import glue_metrics
from kbert.tasks import run_manifest
from kbert.tokenization import BertPreprocessor

OWN_TASK = "own"  # `TaskSpec.name` of a user's own data
# The score of each metric that picks the best epoch.
PRIMARY_SCORE = {"accuracy": "accuracy", "f1_accuracy": "accuracy_and_f1",
                 "matthews_corrcoef": "matthews_corrcoef", "pearson_spearman": "correlation"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class GlueConfig(fine_tuning.FineTuningConfig):
    """One classification run: the shared settings (`FineTuningConfig`) plus its data.

    Args:
        task_name: str. A GLUE task ("MRPC", "SST-2", "MNLI", ...; see `kbert.data.glue`),
            read from `data_dir`. None for own data.
        data_dir: str. The task's GLUE directory (`train.tsv`, `dev.tsv`, `test.tsv`).
        train_file, dev_file, test_file: str. Own data (`.csv`, `.tsv` with a header, or
            `.jsonl`) instead of a GLUE task; needed by do_train, do_eval, do_predict.
        text_a_column, text_b_column, label_column: str. Own data's columns (JSON keys).
            Defaults "text_a", None (single texts), "label".
        labels: tuple of str. Own data's classes in id order. Defaults to the sorted labels
            of `train_file` (or those recorded beside a trained model).
        regression: bool. Own data's labels are real numbers. Defaults to False.
        max_train_examples: int. Train on a seeded random subset of this many examples.
        skip_bad_rows: bool. Skip (and log with file:line) malformed rows of the dev and test
            files instead of stopping at the first; train rows are always skipped so.
            Defaults to False.
        pack_examples: bool. Train on packed rows (`kbert.data.packing`: several short
            examples per row, each attending to itself only; the same examples per step).
            Evaluation, predictions and the saved model are the usual unpacked classifier.
            Classification on one device only. Measured slower than the default
            length-grouped batches on a CPU (BENCHMARKS.md). Defaults to False.
    """

    task_name: str | None = None
    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    text_a_column: str = "text_a"
    text_b_column: str | None = None
    label_column: str = "label"
    labels: tuple[str, ...] | None = None
    regression: bool = False
    max_train_examples: int | None = ranges.field(None, ranges.at_least(1))
    skip_bad_rows: bool = False
    pack_examples: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.pack_examples and self.distribution_strategy != "one_device":
            raise ValueError("pack_examples trains on one device (distribution_strategy="
                             f"'one_device'), got {self.distribution_strategy!r}")
        if self.pack_examples and (self.regression or self.task_name is not None and
                                   glue.get_task(self.task_name).num_classes == 1):
            raise ValueError("pack_examples is for classification, not regression")
        own = [f for f in ("train_file", "dev_file", "test_file") if getattr(self, f)]
        if self.task_name is None:
            if not own:
                raise ValueError("pass task_name and data_dir (a GLUE task), or train_file / "
                                 "dev_file / test_file (own data)")
            if self.labels is not None and self.regression:
                raise ValueError("labels and regression exclude each other")
            return
        if own:
            raise ValueError(f"{', '.join(own)}: own data files go without task_name")
        if self.labels is not None or self.regression:
            raise ValueError(f"{'labels' if self.labels is not None else 'regression'} is for "
                             f"own data; task {self.task_name} has its own labels")
        if not self.data_dir:
            raise ValueError(f"task {self.task_name} needs data_dir")
        spec = glue.get_task(self.task_name)
        if self.do_train and spec.train_file is None or self.do_eval and not spec.dev_files:
            raise ValueError(f"{spec.name} can only be predicted, with a classifier fine-tuned "
                             f"on MNLI (init_checkpoint=.../{fine_tuning.MODEL_FILE}, "
                             f"do_predict only)")

    def data_files(self, spec):
        """(flag, path) of every file the steps asked for read."""
        wanted = ([("train", spec.splits["train"])] if self.do_train else []) + (
            list(spec.dev_files) if self.do_eval else []) + (
            [(split, file) for split, file, _ in spec.test_files] if self.do_predict else [])
        if self.task_name is None:
            return [(f"{split}_file", file) for split, file in wanted]
        return [(f"{split} split of data_dir", os.path.join(self.data_dir, file))
                for split, file in wanted]

    def read(self, spec, split, errors="raise"):
        """The examples of `split` ("train", a dev or a test split)."""
        if self.task_name is not None:
            return glue.read_glue(self.data_dir, spec, split, errors=errors)
        path = dict(self.data_files(spec))[f"{split}_file"]
        return glue.read_classification_file(
            path, self.text_a_column, self.text_b_column,
            None if split == "test" else self.label_column, label_names=spec.labels,
            regression=self.regression, errors=errors)


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
    return fine_tuning.run_with_strategy(config, _run_glue)


def _run_glue(config, strategy):
    source = fine_tuning.resolve_init(config.model_path(), config.vocab_file,
                                      config.bert_config_file)
    settings = fine_tuning.read_export_settings(source.path) if source.is_keras else {}
    spec = task_spec(config, settings)
    fine_tuning.validate_inputs(config, source, config.data_files(spec))
    fine_tuning.check_trained_head(config, source, BertClassifier)
    data = read_data(config, spec)  # every file parsed before any training
    keras.utils.set_random_seed(config.seed)
    if config.do_train:
        run_manifest.begin_training(config, run_manifest.manifest_for(
            config, source, config.data_files(spec)))
    model = load_classifier(config, spec, source)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    config = dataclasses.replace(
        config, output_dir=distribution.worker_output_dir(config.output_dir, strategy))
    os.makedirs(config.output_dir, exist_ok=True)
    # Unpadded: the pipeline pads each batch to its own longest example.
    preprocessor = BertPreprocessor(source.vocab_file, do_lower_case=config.do_lower_case,
                                    max_seq_length=config.max_seq_length, pad_to_max_length=False)
    results, reusable = {}, {}
    if config.do_train:
        results["train"], reusable = train(model, config, spec, preprocessor, data)
        fine_tuning.write_outputs(config.output_dir, model, source.vocab_file, {
            "do_lower_case": config.do_lower_case, "max_seq_length": config.max_seq_length,
            "text_pair": _is_pair(config, spec), "label_names": spec.labels})
        run_manifest.finish_training(config)
    if config.do_eval:
        results["eval"] = {}
        for split, _ in spec.dev_files:
            examples = data[split]
            outputs = reusable.get(split)
            if outputs is None:
                outputs = predict(model, examples, preprocessor, config.eval_batch_size)
            results["eval"][split] = score(spec, examples, outputs)
            write_dev_predictions(os.path.join(config.output_dir, f"{split}_predictions.tsv"),
                                  spec, examples, outputs)
        # A packed run's optimizer trained the packed twin: its step count is the run's.
        step = (results["train"]["steps"] if "train" in results
                else distribution.global_step(model))
        fine_tuning.write_eval_results(
            config.output_dir, results["eval"], step,
            task=spec.name, data_files=config.data_files(spec),
            **fine_tuning.kept_epoch_summary(results.get("train")))
    if config.do_predict:
        results["predict"] = {}
        for split, _, name in spec.test_files:
            examples = data[split]
            outputs = predict(model, examples, preprocessor, config.predict_batch_size)
            path = os.path.join(config.output_dir, f"{name}.tsv")
            write_predictions(path, examples.index, format_predictions(spec, outputs))
            results["predict"][name] = path
    return results


def _is_pair(config, spec):
    if config.task_name is None:
        return config.text_b_column is not None
    return (spec.labelled or spec.unlabelled).text_b is not None


def load_classifier(config, spec, source):
    """The classifier to start from: a `.keras` file as is, or a Google checkpoint with a new
    head (or its run_classifier.py head), built in the current strategy scope and policy."""
    if source.is_keras:
        model = fine_tuning.load_keras_model(source.path, BertClassifier, config.mixed_precision)
        if model.num_classes != spec.num_classes:
            raise ValueError(f"{source.path}: expected a BertClassifier with {spec.num_classes} "
                             f"outputs for {spec.name}")
        fine_tuning.check_loaded_model(config, model, source)
        return model
    return BertClassifier.from_google_checkpoint(source.path, spec.num_classes,
                                                 config=source.bert_config)


def read_data(config, spec):
    """{split: `Examples`} of every split the steps asked for."""
    splits = (["train"] if config.do_train else []) + (
        [split for split, _ in spec.dev_files] if config.do_eval else []) + (
        [split for split, _, _ in spec.test_files] if config.do_predict else [])
    return {split: config.read(spec, split,
                              errors="warn" if split == "train" or config.skip_bad_rows
                              else "raise")
            for split in splits}


def train(model, config, spec, preprocessor, data):
    """Fine-tunes `model` on `data["train"]`; returns (fit statistics, {dev split: outputs}
    of the kept epoch when they were computed during training)."""
    examples = data["train"].sample(config.max_train_examples, seed=config.seed)
    tokenized = pipeline.tokenize(examples, preprocessor)
    trained, compile_kwargs = model, {}
    if config.pack_examples:
        dataset, steps = packing.training_dataset(
            tokenized, examples.label, config.train_batch_size, config.max_seq_length,
            seed=config.seed)
        trained = packed_twin(model)
        # Empty slots are ignored: the loss is the mean over the batch's examples, as unpacked.
        compile_kwargs = dict(
            loss=keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, ignore_class=packing.PAD_LABEL),
            metrics=[], weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(
                name="accuracy")])
    else:
        dataset, steps = pipeline.training_dataset(
            tokenized, examples.label, config.train_batch_size, seed=config.seed)
        # Every worker shuffles alike (seeded) and keeps its part of each global batch.
        dataset = distribution.shard_by_data(dataset)
    dev_scores = None
    if config.do_eval and config.keep_best_epoch and spec.dev_files:
        dev = data[spec.dev_files[0][0]]  # the first dev set picks the epoch (MNLI: matched)

        def score_dev(m):
            if m is not model:  # the packed twin: score its weights on unpacked inputs
                model.set_weights(m.get_weights())
            outputs = predict(model, dev, preprocessor, config.eval_batch_size)
            return score(spec, dev, outputs), outputs

        dev_scores = epoch_callbacks.DevScores(score_dev, PRIMARY_SCORE[spec.metric])
    logging.info("%s: %d training examples, %d steps per epoch, %d epochs%s", spec.name,
                 len(examples), steps, int(config.num_train_epochs),
                 ", packed" if config.pack_examples else "")
    stats = fine_tuning.fit_and_record(
        trained, dataset, steps, config, dev_scores=dev_scores, compile_kwargs=compile_kwargs,
        stats={"task": spec.name, "examples": len(examples),
               "mean_tokens_per_example": float(np.mean(tokenized.lengths)),
               **({"packed": True} if config.pack_examples else {})})
    if trained is not model:
        model.set_weights(trained.get_weights())
    reusable = {}
    if dev_scores is not None and dev_scores.outputs_of(stats.get("kept_epoch")) is not None:
        reusable[spec.dev_files[0][0]] = dev_scores.outputs_of(stats["kept_epoch"])
    return stats, reusable


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
    dataset = distribution.shard_by_data(dataset)
    return pipeline.restore_order(model.predict(dataset, verbose=0), order)


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
        f.writelines(f"{i}\t{p}\n" for i, p in zip(index, predictions, strict=True))


def write_dev_predictions(path, spec, examples, outputs):
    """Writes index, texts, gold, predicted and class probabilities (or the score) as TSV."""
    predicted = format_predictions(spec, outputs)
    if spec.num_classes == 1:
        gold = [f"{value:.3f}" for value in examples.label]
        extra_names, extra = [], [[] for _ in predicted]
    else:
        gold = [spec.labels[i] for i in examples.label]
        extra_names = [f"p_{label}" for label in spec.labels]
        extra = [[f"{p:.4f}" for p in row] for row in _softmax(outputs)]
    texts = [examples.text_a] + ([examples.text_b] if examples.text_b is not None else [])
    header = ["index", "text_a"] + (["text_b"] if len(texts) == 2 else []) + [
        "gold", "predicted", *extra_names]
    clean = lambda text: text.replace("\t", " ").replace("\n", " ")  # noqa: E731
    with io.atomic_write(path) as f:
        f.write("\t".join(header) + "\n")
        for i, row in enumerate(zip(examples.index, *texts, gold, predicted, strict=True)):
            f.write("\t".join([*map(clean, row), *extra[i]]) + "\n")


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
