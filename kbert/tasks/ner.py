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

import os
import random
import sys
import weakref

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from kbert import artifacts
from kbert import io
from kbert.data import conll
from kbert.models import opening
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tasks import fine_tuning
from kbert.tasks import ner_metrics
from kbert.tasks import template
from kbert.tasks.configs import NerConfig
from kbert.tokenization import FullTokenizer
from kbert.tokenization import vocab as vocab_lib

LABELS_FILE = "labels.txt"


def run_ner(config: NerConfig) -> dict:
    """Runs the steps `config` asks for and writes their results to `config.output_dir`.

    Returns:
        dict with "train" (fit statistics), "eval" ({"dev": scores, "test": scores}, from
        `ner_metrics.entity_scores` plus word_accuracy and sentences) and "predict"
        ({split: path of its predictions}) for the steps that ran.
    """
    return template.run(config, TaggerRecipe)


class TaggerRecipe(template.Recipe):
    """NER on the recipe template (`kbert.tasks.template`): a `BertTokenClassifier`, windows
    of word pieces, entity-level F1."""

    def open(self):
        source = super().open()
        keras_model = source.kind == opening.KERAS
        if keras_model and self.config.do_train:
            raise ValueError(f"{source.path}: training starts from a pretrained checkpoint "
                             "(Google, Hugging Face or keras-hub; in a recipe's output "
                             "directory, its bert_model.ckpt prefix); a .keras tagger can be "
                             "evaluated or used to predict")
        if not keras_model and not self.config.do_train:
            raise ValueError(f"{source.path}: a {source.kind} checkpoint has no NER labels; "
                             f"evaluate or predict with a fine-tuned {artifacts.MODEL_FILE}")
        return source

    def read(self, files):
        data = {name: read_sentences(self.config, path) for name, path in files}
        train, count = data.get("train_file"), self.config.max_train_examples
        if train is None:
            return data
        sampled = count and count < len(train)
        if sampled:
            keep = sorted(random.Random(self.config.seed).sample(range(len(train)), count))
            data["train_file"] = [train[i] for i in keep]
        labels = conll.label_vocabulary(data["train_file"])
        if len(labels) < 2:  # one class: nothing to learn (and Keras squeezes its axis away)
            where = f" in the {count} sentences of max_train_examples" if sampled else ""
            needs = "at least one entity type" if labels == ("O",) else "O and an entity type"
            raise ValueError(f"{dict(files)['train_file']}: only one label{where}: {labels[0]}; "
                             f"a tagger needs {needs}")
        return data

    def build_model(self, source, data):
        model, self.labels = load_tagger(self.config, source, data.get("train_file"))
        self.tokenizer = FullTokenizer(
            source.vocab(), do_lower_case=self.config.do_lower_case,
            never_split=vocab_lib.load_added_tokens(source.vocab_file))
        return model

    def training(self, model, data):
        config, sentences = self.config, data["train_file"]
        label_map = {label: i for i, label in enumerate(self.labels)}
        windows = conll.featurize(sentences, self.tokenizer, config.max_seq_length, label_map,
                                  **config.windows())
        dataset, steps = conll.training_epochs(windows, config.train_batch_size,
                                               seed=config.seed)
        logging.info("%d training sentences in %d windows (%d labels%s)", len(sentences),
                     len(windows), len(self.labels), ", CRF" if model.use_crf else "")
        return template.Training(dataset, steps, {
            "sentences": len(sentences), "windows": len(windows),
            "words": int(sum(len(s.words) for s in sentences)), "labels": list(self.labels),
            "use_crf": model.use_crf, **config.windows(),
            "mean_pieces_per_window": float(np.mean(windows.lengths))})

    def dev_scorer(self, model, data):
        config, dev = self.config, data.get("dev_file")
        if dev is None or not config.evaluate_every_epoch:
            return None
        dev_windows = conll.featurize(dev, self.tokenizer, config.max_seq_length,
                                      **config.windows())

        def score_dev(m):
            predicted = predict_windows(m, dev_windows, dev, self.labels, config.eval_batch_size)
            scores = ner_metrics.entity_scores([s.labels for s in dev], predicted)
            return {k: scores[k] for k in ("precision", "recall", "f1")}, predicted

        return "f1", score_dev

    def export_settings(self, model, data, reused):
        return {"do_lower_case": self.config.do_lower_case,
                "max_seq_length": self.config.max_seq_length, "label_names": list(self.labels)}

    def write_extra(self, output_dir):
        with io.atomic_write(os.path.join(output_dir, LABELS_FILE)) as f:
            f.writelines(label + "\n" for label in self.labels)

    def score(self, model, data, output_dir, reused):
        config, scored = self.config, template.Scored(flat={})
        for split, sentences in (("dev", data.get("dev_file") if config.do_eval else None),
                                 ("test", data.get("test_file"))):
            if sentences is None:
                continue
            conll.unseen_labels(sentences, self.labels)
            predicted = reused if split == "dev" and reused is not None else predict_labels(
                model, sentences, self.tokenizer, self.labels, config.max_seq_length,
                config.eval_batch_size, **config.windows())
            path = os.path.join(output_dir, f"{split}_predictions.txt")
            conll.write_predictions(path, sentences, predicted)
            scored.predict[split] = path
            scored.eval[split] = score(sentences, predicted)
            scored.flat.update(ner_metrics.flat_scores(scored.eval[split], f"{split}_"))
            logging.info("%s: %s", split, _summary(scored.eval[split]))
        return scored


def read_sentences(config, path):
    """The sentences of a NER file in `config.data_format`."""
    sentences = conll.read_ner_file(path, config.data_format, config.tag_scheme)
    if config.document_context and len({s.document for s in sentences}) == 1:
        logging.warning("%s: one document (no %s lines between sentences): with "
                        "document_context every sentence's context is its neighbours in the "
                        "file", path, conll.DOCSTART)
    return sentences


def load_tagger(config, source, train=None):
    """The tagger to start from and its labels.

    Training builds a new tagger on a pretrained checkpoint, with the labels of `train`. A
    `.keras` file (by default `output_dir/model.keras` when not training) is loaded as is,
    with the `labels.txt` beside it.
    """
    if source.kind == opening.KERAS:
        model = fine_tuning.load_keras_model(source, BertTokenClassifier,
                                             config.mixed_precision)
        labels = read_labels(os.path.join(os.path.dirname(source.keras_file), LABELS_FILE))
        if len(labels) != model.num_labels:
            raise ValueError(f"{source.keras_file}: {model.num_labels} labels, but "
                             f"{LABELS_FILE} beside it has {len(labels)}")
        return model, labels
    labels = conll.label_vocabulary(train)
    model = BertTokenClassifier.from_google_checkpoint(
        source.google_checkpoint(), len(labels), use_crf=config.use_crf)
    return model, labels


def read_labels(path):
    """The label vocabulary written beside a model: one label per line."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: not found (the tagger's label vocabulary)")
    with open(path, encoding="utf-8") as f:
        return tuple(line.strip() for line in f if line.strip())


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
    return (f"entity F1 {scores['f1']:.4f} (precision {scores['precision']:.4f}, recall "
            f"{scores['recall']:.4f}), word accuracy {scores['word_accuracy']:.4f}")
