"""NER fine-tuning: CoNLL or two-column files -> BIO tagger -> entity-level F1.

A `BertTokenClassifier` (optionally with a CRF) from a Google checkpoint, trained on a CoNLL or
two-column file (`kbert.data.conll`: BIO labels, the label on each word's first piece, long
sentences in consecutive or overlapping windows, optionally the document's neighbouring
sentences as context) on the shared skeleton (`kbert.tasks.fine_tuning`: resumable fit, best
epoch by dev entity F1, logs, output layout), and scored with entity-level F1 equal to
seqeval's default (`kbert.tasks.ner_metrics`).

Files written to `output_dir` besides the shared layout of `kbert.tasks.fine_tuning`:
    eval_results.txt      Google's "key = value" lines: dev_f1, dev_precision, dev_f1_PER, ...
                          and test_* when the test file is labelled.
    dev_predictions.txt,  `word gold predicted` per line, a blank line between sentences
    test_predictions.txt  (conlleval's input); labels in BIO.
    labels.txt            the label vocabulary, one per line, in id order.
"""

import dataclasses
import os
import random
import sys
import weakref

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from kbert import io
from kbert import ranges
from kbert.data import conll
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tasks import distribution
from kbert.tasks import epoch_callbacks
from kbert.tasks import fine_tuning
from kbert.tasks import ner_metrics
from kbert.tasks import run_manifest
from kbert.tokenization import FullTokenizer

LABELS_FILE = "labels.txt"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerConfig(fine_tuning.FineTuningConfig):
    """One NER run: the shared settings (`FineTuningConfig`) plus its data and head.

    Args:
        train_file, dev_file, test_file: str or None. NER files in `data_format`; the
            dev file is evaluated (`do_eval`) and the test file predicted (`do_predict`, and
            scored when it has labels, as CoNLL-2003's does).
        data_format: str. "conll" (word ... label columns, -DOCSTART- lines) or "two_column"
            (`token label`). Defaults to "conll".
        tag_scheme: str. The files' label scheme ("auto", "bio", "iob1", "bmes", "bioes");
            all are converted to BIO. Defaults to "auto".
        use_crf: bool. A CRF output layer (Viterbi decoding) on a new tagger. Defaults False.
        max_train_sentences: int. Train on a seeded random subset of this many sentences.
        document_context: bool. Fill each window with the neighbouring sentences of the same
            document (`-DOCSTART-` lines split documents; a file without them is one
            document, with a warning); labels, loss and predictions only on the target
            sentence (`kbert.data.conll.featurize`). Serving (`export_saved_model`) tags
            single texts, without context. Defaults to False.
        window_stride: int or None. Sentences longer than a window are split into windows
            whose starts are this many pieces apart (overlapping); each word is predicted
            from the window where it has the most context. None: consecutive windows, as
            serving splits long texts. Defaults to None.
        evaluate_every_epoch: bool. With a dev file, score it at the end of every training
            epoch (logged, in training_log.csv, and picks the best epoch). Defaults to True.
        eval_batch_size: int. Windows per batch. Defaults to 32.
    """

    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    data_format: str = "conll"
    tag_scheme: str = "auto"
    use_crf: bool = False
    max_train_sentences: int | None = ranges.field(None, ranges.at_least(1))
    document_context: bool = False
    window_stride: int | None = None
    evaluate_every_epoch: bool = True
    eval_batch_size: int = 32

    def __post_init__(self):
        super().__post_init__()
        for step, name in (("do_train", "train_file"), ("do_eval", "dev_file"),
                           ("do_predict", "test_file")):
            if getattr(self, step) and not getattr(self, name):
                raise ValueError(f"{step} needs {name}")
        if self.data_format not in conll.FORMATS:
            raise ValueError(f"data_format must be one of {conll.FORMATS}, got "
                             f"{self.data_format!r}")
        if self.tag_scheme not in conll.TAG_SCHEMES:
            raise ValueError(f"tag_scheme must be one of {sorted(conll.TAG_SCHEMES)}, got "
                             f"{self.tag_scheme!r}")
        if self.window_stride is not None and not 0 < self.window_stride <= (
                self.max_seq_length - 2):
            raise ValueError(f"window_stride must be in [1, max_seq_length - 2 = "
                             f"{self.max_seq_length - 2}] pieces, got {self.window_stride}")

    def data_files(self):
        """(flag, path) of every file the steps asked for read."""
        dev = self.do_eval or self.do_train and self.evaluate_every_epoch and self.dev_file
        return [(name, getattr(self, name)) for name, wanted in (
            ("train_file", self.do_train), ("dev_file", dev),
            ("test_file", self.do_predict)) if wanted]

    def read(self, path):
        sentences = conll.read_ner_file(path, self.data_format, self.tag_scheme)
        if self.document_context and len({s.document for s in sentences}) == 1:
            logging.warning("%s: one document (no %s lines between sentences): with "
                            "document_context every sentence's context is its neighbours "
                            "in the file", path, conll.DOCSTART)
        return sentences

    def windows(self):
        """Keyword arguments of `kbert.data.conll.featurize`: how sentences fill windows."""
        return dict(window_stride=self.window_stride, document_context=self.document_context)


def run_ner(config: NerConfig) -> dict:
    """Runs the steps `config` asks for and writes their results to `config.output_dir`.

    Returns:
        dict with "train" (fit statistics), "eval" ({"dev": scores, "test": scores}, from
        `ner_metrics.entity_scores` plus word_accuracy and sentences) and "predict"
        ({split: path of its predictions}) for the steps that ran.
    """
    return fine_tuning.run_with_strategy(config, _run_ner)


def _run_ner(config, strategy):
    source = fine_tuning.resolve_init(config.model_path(), config.vocab_file,
                                      config.bert_config_file)
    if source.is_keras and config.do_train:
        raise ValueError(f"{source.path}: training starts from a Google checkpoint; a .keras "
                         f"tagger can be evaluated or used to predict")
    if not source.is_keras and not config.do_train:
        raise ValueError(f"{source.path}: a Google checkpoint has no NER head; evaluate or "
                         f"predict with a fine-tuned model.keras")
    fine_tuning.validate_inputs(config, source, config.data_files())
    # Every file parsed before any training.
    data = {name: config.read(path) for name, path in config.data_files()}
    keras.utils.set_random_seed(config.seed)
    train = data.get("train_file")
    if config.do_train:
        run_manifest.begin_training(config, run_manifest.manifest_for(
            config, source, config.data_files()))
        if config.max_train_sentences and config.max_train_sentences < len(train):
            keep = sorted(random.Random(config.seed).sample(range(len(train)),
                                                            config.max_train_sentences))
            train = [train[i] for i in keep]
    model, labels = load_tagger(config, source, train)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    config = dataclasses.replace(
        config, output_dir=distribution.worker_output_dir(config.output_dir, strategy))
    os.makedirs(config.output_dir, exist_ok=True)
    tokenizer = FullTokenizer(source.vocab_file, do_lower_case=config.do_lower_case)
    dev = data.get("dev_file")
    results, reusable = {}, None
    if config.do_train:
        results["train"], reusable = train_tagger(model, config, train, labels, tokenizer, dev)
        fine_tuning.write_outputs(config.output_dir, model, source.vocab_file, {
            "do_lower_case": config.do_lower_case, "max_seq_length": config.max_seq_length,
            "label_names": list(labels)})
        with io.atomic_write(os.path.join(config.output_dir, LABELS_FILE)) as f:
            f.writelines(label + "\n" for label in labels)
        run_manifest.finish_training(config)
    scored = {}
    if config.do_eval:
        scored["dev"] = dev
    if config.do_predict:
        scored["test"] = data["test_file"]
    if scored:
        results["eval"], results["predict"] = {}, {}
        for split, sentences in scored.items():
            conll.unseen_labels(sentences, labels)
            predicted = reusable if split == "dev" and reusable is not None else predict_labels(
                model, sentences, tokenizer, labels, config.max_seq_length,
                config.eval_batch_size, **config.windows())
            path = os.path.join(config.output_dir, f"{split}_predictions.txt")
            conll.write_predictions(path, sentences, predicted)
            results["predict"][split] = path
            results["eval"][split] = score(sentences, predicted)
            logging.info("%s: %s", split, _summary(results["eval"][split]))
        flat = {}
        for split, scores in results["eval"].items():
            flat.update(ner_metrics.flat_scores(scores, f"{split}_"))
        fine_tuning.write_eval_results(
            config.output_dir, results["eval"], distribution.global_step(model), flat=flat,
            data_files=config.data_files(), **fine_tuning.kept_epoch_summary(results.get("train")))
    return results


def load_tagger(config, source, train=None):
    """The tagger to start from and its labels.

    Training builds a new tagger on a Google checkpoint, with the labels of `train`. A
    `.keras` file (by default `output_dir/model.keras` when not training) is loaded as is,
    with the `labels.txt` beside it.
    """
    if source.is_keras:
        model = fine_tuning.load_keras_model(source.path, BertTokenClassifier,
                                             config.mixed_precision)
        fine_tuning.check_loaded_model(config, model, source)
        labels = read_labels(os.path.join(os.path.dirname(source.path), LABELS_FILE))
        if len(labels) != model.num_labels:
            raise ValueError(f"{source.path}: {model.num_labels} labels, but {LABELS_FILE} "
                             f"beside it has {len(labels)}")
        return model, labels
    labels = conll.label_vocabulary(train)
    model = BertTokenClassifier.from_google_checkpoint(
        source.path, len(labels), use_crf=config.use_crf, config=source.bert_config)
    return model, labels


def read_labels(path):
    """The label vocabulary written beside a model: one label per line."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: not found (the tagger's label vocabulary)")
    with open(path, encoding="utf-8") as f:
        return tuple(line.strip() for line in f if line.strip())


def train_tagger(model, config, sentences, labels, tokenizer, dev=None):
    """Fine-tunes `model` on `sentences`; returns (fit statistics, the dev predictions of the
    kept epoch when they were made during training, else None)."""
    label_map = {label: i for i, label in enumerate(labels)}
    windows = conll.featurize(sentences, tokenizer, config.max_seq_length, label_map,
                              **config.windows())
    dataset, steps = conll.training_dataset(windows, config.train_batch_size, seed=config.seed)
    # Every worker shuffles alike (seeded) and keeps its part of each global batch.
    dataset = distribution.shard_by_data(dataset)
    dev_scores = None
    if dev is not None and config.evaluate_every_epoch:
        dev_windows = conll.featurize(dev, tokenizer, config.max_seq_length,
                                      **config.windows())

        def score_dev(m):
            predicted = predict_windows(m, dev_windows, dev, labels, config.eval_batch_size)
            scores = ner_metrics.entity_scores([s.labels for s in dev], predicted)
            return {k: scores[k] for k in ("precision", "recall", "f1")}, predicted

        dev_scores = epoch_callbacks.DevScores(score_dev, "f1")
    logging.info("%d training sentences in %d windows (%d labels%s), %d steps per epoch, %d "
                 "epochs", len(sentences), len(windows), len(labels),
                 ", CRF" if model.use_crf else "", steps, int(config.num_train_epochs))
    stats = fine_tuning.fit_and_record(model, dataset, steps, config, dev_scores=dev_scores, stats={
        "sentences": len(sentences), "windows": len(windows),
        "words": int(sum(len(s.words) for s in sentences)), "labels": list(labels),
        "use_crf": model.use_crf, **config.windows(),
        "mean_pieces_per_window": float(np.mean(windows.lengths))})
    reusable = dev_scores.outputs_of(stats.get("kept_epoch")) if dev_scores else None
    return stats, reusable


def predict_labels(model, sentences, tokenizer, labels, max_seq_length, batch_size=32,
                   **options):
    """One predicted label per word of every sentence.

    Args:
        model: `BertTokenClassifier`.
        sentences: list of `kbert.data.conll.Sentence` (labels are not used).
        tokenizer: `kbert.FullTokenizer`.
        labels: sequence of str. The model's label names, in id order.
        max_seq_length: int. Pieces per window.
        batch_size: int. Windows per batch. Defaults to 32.
        **options: `window_stride`, `document_context` of `kbert.data.conll.featurize`.

    Returns:
        list (per sentence) of lists of str.
    """
    windows = conll.featurize(sentences, tokenizer, max_seq_length, **options)
    return predict_windows(model, windows, sentences, labels, batch_size, progress=True)


def predict_windows(model, windows, sentences, labels, batch_size=32, progress=False):
    """`predict_labels` on already featurized `windows` of `sentences`; `progress` shows a
    progress bar (off while `model.fit`'s own bar is on screen)."""
    dataset, order = conll.inference_dataset(windows, batch_size)
    decode = _decoder(model)
    progbar = _progbar(len(windows), -(-len(windows) // batch_size)) if progress else None
    rows = []
    for features, weights in dataset:
        rows.extend(decode(features, weights).numpy())
        if progbar:
            progbar.add(1)
    predicted = [None] * len(windows)
    for row, window in zip(rows, order, strict=True):
        predicted[window] = row
    return conll.word_labels(windows, predicted, labels, sentences)


def _progbar(windows, batches):
    if not sys.stdout.isatty():  # Progbar(verbose=2) prints one bare line at the end: name it
        print(f"predicting {windows} windows:", end=" ", flush=True)
    return keras.utils.Progbar(batches, verbose=1 if sys.stdout.isatty() else 2,
                               unit_name="batch")


# Per model, one graph for the encoder and the decoding (argmax or Viterbi), reused by every
# dev scoring of a run; batch widths vary, so TensorFlow generalises the shape instead of
# tracing each one.
_DECODERS = weakref.WeakKeyDictionary()


def _decoder(model):
    if model not in _DECODERS:
        ref = weakref.ref(model)  # the function must not keep its key alive

        def decode(features, weights):
            return ref().decode(ref()(features, training=False), weights)

        _DECODERS[model] = tf.function(decode, reduce_retracing=True)
    return _DECODERS[model]


def score(sentences, predicted):
    """Entity scores (`ner_metrics.entity_scores`) plus word accuracy and the sentence count."""
    gold = [s.labels for s in sentences]
    scores = ner_metrics.entity_scores(gold, predicted)
    words = sum(len(g) for g in gold)
    right = sum(a == b for g, p in zip(gold, predicted, strict=True)
                for a, b in zip(g, p, strict=True))
    scores["word_accuracy"] = right / words if words else 0.0
    scores["sentences"] = len(sentences)
    return scores


def _summary(scores):
    return ", ".join(f"{key} = {scores[key]:.4f}" for key in ("precision", "recall", "f1",
                                                              "word_accuracy"))
