"""NER fine-tuning with `model.fit`: build -> compile -> fit -> evaluate -> predict -> write.

A `BertTokenClassifier` (optionally with a CRF) from a Google checkpoint, trained on a CoNLL or
two-column file (`kbert.data.conll`: BIO labels, the label on each word's first piece, long
sentences in windows) with BERT's AdamW, and scored with entity-level F1 equal to seqeval's
default (`kbert.tasks.ner_metrics`). Keras callbacks do what an Estimator would:
`BackupAndRestore` (an interrupted run resumes from its last finished epoch), `ModelCheckpoint`
(`model.keras` after every epoch), `CSVLogger`, `TensorBoard`, and the dev-set entity F1 at
the end of every epoch.

Files written to `output_dir`, each atomically (temporary name, then rename):
    eval_results.txt      Google's "key = value" lines: dev_f1, dev_precision, dev_f1_PER, ...
                          and test_* when the test file is labelled.
    eval_results.json     the same, nested by split, with per-type scores.
    train_results.json    sentences, windows, steps, seconds and the per-epoch dev F1.
    dev_predictions.txt,  `word gold predicted` per line, a blank line between sentences
    test_predictions.txt  (conlleval's input); labels in BIO.
    labels.txt            the label vocabulary, one per line, in id order.
    vocab.txt, model.keras  the fine-tuned tagger and its vocabulary; `backup/` while training.
    training_log.csv      per-epoch loss, accuracy and dev entity scores; `logs/` the same for
                          TensorBoard (when the tensorboard package is installed).

Trains on one device or several (`distribution_strategy`), in mixed precision if asked; see
`kbert.tasks.distribution`. The batch sizes are global: split over the replicas.
"""

import dataclasses
import json
import os
import random
import sys
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from kbert import io
from kbert.checkpoints import tf1
from kbert.data import conll
from kbert.models.tagger import BertTokenClassifier
from kbert.tasks import distribution
from kbert.tasks import fine_tuning
from kbert.tasks import ner_metrics
from kbert.tokenization import FullTokenizer
from kbert.tokenization.vocab import check_vocab_size

MODEL_FILE = "model.keras"
LABELS_FILE = "labels.txt"


@dataclasses.dataclass(frozen=True)
class NerConfig:
    """One NER fine-tuning run.

    Args:
        output_dir: str. Where results, `model.keras`, logs and the training backup go.
        train_file, dev_file, test_file: str or None. NER files in `data_format`; the
            dev file is evaluated (`do_eval`) and the test file predicted (`do_predict`, and
            scored when it has labels, as CoNLL-2003's does).
        data_format: str. "conll" (word ... label columns, -DOCSTART- lines) or "two_column"
            (`token label`). Defaults to "conll".
        tag_scheme: str. The files' label scheme ("auto", "bio", "iob1", "bmes", "bioes");
            all are converted to BIO. Defaults to "auto".
        init_checkpoint: str. A Google checkpoint (release directory or prefix), or a
            `.keras` `BertTokenClassifier` (with `labels.txt` beside it) to evaluate or
            predict. Defaults to `output_dir/model.keras` when only evaluating or predicting.
        vocab_file: str. Defaults to the `vocab.txt` beside the checkpoint.
        bert_config_file: str. Defaults to the `bert_config.json` beside the checkpoint.
        do_lower_case: bool. Whether the model is uncased. Defaults to True.
        max_seq_length: int. Pieces per window; longer sentences are split into windows.
            Defaults to 128.
        train_batch_size, eval_batch_size: int. Windows per batch. Defaults 32, 32.
        learning_rate: float. Peak AdamW learning rate. Defaults to 5e-5.
        num_train_epochs: int. Whole epochs. Defaults to 3.
        warmup_proportion: float. Fraction of training steps of linear warm-up. Defaults 0.1.
        use_crf: bool. A CRF output layer (Viterbi decoding) on a new tagger. Defaults False.
        do_train, do_eval, do_predict: bool. Which steps to run.
        max_train_sentences: int. Train on a seeded random subset of this many sentences.
        evaluate_every_epoch: bool. Score the dev file at the end of every training epoch
            (logged and in training_log.csv). Defaults to True.
        seed: int. Seeds the subset, the shuffle, dropout and the new head. Defaults to 12345.
        distribution_strategy: str or `tf.distribute.Strategy`. One of
            `kbert.tasks.distribution.STRATEGIES`. Defaults to "one_device".
        tpu: str. The TPU for distribution_strategy "tpu". Defaults to None.
        mixed_precision: str. "float32", "mixed_float16" or "mixed_bfloat16". Defaults to
            "float32".
        jit_compile: bool. XLA-compile the train step. Batches are padded to their longest
            window, so they come in many shapes and XLA compiles each new one, seconds each:
            on a short fine-tuning run that costs more than it saves. Defaults to False.
    """

    output_dir: str
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    data_format: str = "conll"
    tag_scheme: str = "auto"
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    bert_config_file: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    train_batch_size: int = 32
    eval_batch_size: int = 32
    learning_rate: float = 5e-5
    num_train_epochs: int = 3
    warmup_proportion: float = 0.1
    use_crf: bool = False
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    max_train_sentences: int | None = None
    evaluate_every_epoch: bool = True
    seed: int = 12345
    distribution_strategy: object = "one_device"
    tpu: str | None = None
    mixed_precision: str = "float32"
    jit_compile: bool = False

    def __post_init__(self):
        distribution.check(self.distribution_strategy, self.mixed_precision)
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("At least one of do_train, do_eval or do_predict must be set")
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
        if self.num_train_epochs != int(self.num_train_epochs) or self.num_train_epochs < 1:
            raise ValueError(f"num_train_epochs must be a whole number >= 1 (Keras fit counts "
                             f"epochs), got {self.num_train_epochs}; use max_train_sentences "
                             f"to train on part of the data")
        if not 0 <= self.warmup_proportion <= 1:
            raise ValueError(f"warmup_proportion must be in [0, 1], got {self.warmup_proportion}")
        if self.max_seq_length < 3:
            raise ValueError(f"max_seq_length must be >= 3, got {self.max_seq_length}")

    def read(self, path):
        return conll.read_ner_file(path, self.data_format, self.tag_scheme)


def run_ner(config):
    """Runs the steps `config` asks for and writes their results to `config.output_dir`.

    Returns:
        dict with "train" (fit statistics), "eval" ({"dev": scores, "test": scores}, from
        `ner_metrics.entity_scores` plus word_accuracy and sentences) and "predict"
        ({split: path of its predictions}) for the steps that ran.
    """
    # First: a multi-worker strategy must exist before TensorFlow runs an op.
    strategy = distribution.make_strategy(config.distribution_strategy, config.tpu)
    with distribution.mixed_precision_scope(config.mixed_precision), strategy.scope():
        return _run_ner(config, strategy)


def _run_ner(config, strategy):
    keras.utils.set_random_seed(config.seed)
    os.makedirs(config.output_dir, exist_ok=True)
    train = None
    if config.do_train:
        train = config.read(config.train_file)
        if config.max_train_sentences and config.max_train_sentences < len(train):
            keep = sorted(random.Random(config.seed).sample(range(len(train)),
                                                            config.max_train_sentences))
            train = [train[i] for i in keep]
    model, vocab_file, labels = load_tagger(config, train)
    check_vocab_size(vocab_file, model.bert_config.vocab_size, config.init_checkpoint)
    # Other workers of a multi-worker run write their copies under output_dir/worker_N.
    config = dataclasses.replace(
        config, output_dir=distribution.worker_output_dir(config.output_dir, strategy))
    os.makedirs(config.output_dir, exist_ok=True)
    positions = model.bert_config.max_position_embeddings
    if config.max_seq_length > positions:
        raise ValueError(f"max_seq_length={config.max_seq_length} is longer than the model's "
                         f"max_position_embeddings={positions}")
    if config.do_train:  # so that output_dir/model.keras comes with its vocab and labels
        io.copy_file(vocab_file, os.path.join(config.output_dir, tf1.VOCAB_FILE))
        with io.atomic_write(os.path.join(config.output_dir, LABELS_FILE)) as f:
            f.writelines(label + "\n" for label in labels)
    tokenizer = FullTokenizer(vocab_file, do_lower_case=config.do_lower_case)
    dev = config.read(config.dev_file) if config.dev_file and (
        config.do_eval or config.do_train and config.evaluate_every_epoch) else None
    results = {}
    if config.do_train:
        results["train"] = train_tagger(model, config, train, labels, tokenizer, dev)
    scored = {}
    if config.do_eval:
        scored["dev"] = dev
    if config.do_predict:
        scored["test"] = config.read(config.test_file)
    if scored:
        results["eval"], results["predict"] = {}, {}
        for split, sentences in scored.items():
            conll.unseen_labels(sentences, labels)
            predicted = predict_labels(model, sentences, tokenizer, labels,
                                       config.max_seq_length, config.eval_batch_size)
            path = os.path.join(config.output_dir, f"{split}_predictions.txt")
            conll.write_predictions(path, sentences, predicted)
            results["predict"][split] = path
            results["eval"][split] = score(sentences, predicted)
            logging.info("%s: %s", split, _summary(results["eval"][split]))
        write_eval_results(config.output_dir, results["eval"],
                           distribution.global_step(model))
    return results


def load_tagger(config, train=None):
    """The tagger to start from, its vocab file and its labels.

    Training builds a new tagger on a Google checkpoint, with the labels of `train`. A
    `.keras` file (by default `output_dir/model.keras` when not training) is loaded as is,
    with the `labels.txt` and `vocab.txt` beside it.
    """
    path = config.init_checkpoint
    if path is None and not config.do_train:
        path = os.path.join(config.output_dir, MODEL_FILE)
    if path is None:
        raise ValueError("init_checkpoint is required to train (a Google checkpoint)")
    if path.endswith(".keras"):
        if config.do_train:
            raise ValueError(f"{path}: training starts from a Google checkpoint; a .keras "
                             f"tagger can be evaluated or used to predict")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found; train first or pass init_checkpoint")
        model = distribution.load_model(path, config.mixed_precision)
        if not isinstance(model, BertTokenClassifier):
            raise ValueError(f"{path}: expected a BertTokenClassifier, got "
                             f"{type(model).__name__}")
        labels = read_labels(os.path.join(os.path.dirname(path), LABELS_FILE))
        if len(labels) != model.num_labels:
            raise ValueError(f"{path}: {model.num_labels} labels, but {LABELS_FILE} beside it "
                             f"has {len(labels)}")
        vocab_file = config.vocab_file or _existing(os.path.join(os.path.dirname(path),
                                                                 tf1.VOCAB_FILE))
    else:
        if not config.do_train:
            raise ValueError(f"{path}: a Google checkpoint has no NER head; evaluate or "
                             f"predict with a fine-tuned model.keras")
        labels = conll.label_vocabulary(train)
        model = BertTokenClassifier.from_google_checkpoint(
            path, len(labels), use_crf=config.use_crf, config=config.bert_config_file)
        vocab_file = config.vocab_file or tf1.GoogleCheckpoint.open(
            path, config.bert_config_file).vocab_file
    if vocab_file is None:
        raise ValueError(f"no vocab.txt beside {path}; pass vocab_file")
    return model, vocab_file, labels


def read_labels(path):
    """The label vocabulary written beside a model: one label per line."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: not found (the tagger's label vocabulary)")
    with open(path, encoding="utf-8") as f:
        return tuple(line.strip() for line in f if line.strip())


def train_tagger(model, config, sentences, labels, tokenizer, dev=None):
    """Fine-tunes `model` on `sentences`; returns fit statistics."""
    label_map = {label: i for i, label in enumerate(labels)}
    windows = conll.featurize(sentences, tokenizer, config.max_seq_length, label_map)
    dataset, steps = conll.training_dataset(windows, config.train_batch_size, seed=config.seed)
    # Every worker shuffles alike (seeded) and keeps its part of each global batch.
    dataset = distribution.shard_by_data(dataset)
    epochs = int(config.num_train_epochs)
    num_train_steps = steps * epochs
    fine_tuning.compile_model(model, config, num_train_steps)
    out = config.output_dir
    callbacks = []
    if dev is not None and config.evaluate_every_epoch:
        # First, so that the loggers and the checkpoint below see its scores in the logs.
        dev_windows = conll.featurize(dev, tokenizer, config.max_seq_length)
        callbacks.append(ner_metrics.EntityF1Callback(
            lambda m: predict_windows(m, dev_windows, dev, labels, config.eval_batch_size),
            [s.labels for s in dev]))
    fitting, epoch_seconds = fine_tuning.callbacks(out, MODEL_FILE)
    callbacks += fitting
    logging.info("%d training sentences in %d windows (%d labels%s), %d steps per epoch, %d "
                 "epochs", len(sentences), len(windows), len(labels),
                 ", CRF" if model.use_crf else "", steps, epochs)
    start = time.perf_counter()
    history = model.fit(dataset, epochs=epochs, callbacks=callbacks, verbose=2,
                        shuffle=False)  # the dataset shuffles itself, seeded
    seconds = time.perf_counter() - start
    epochs_run = len(history.epoch)  # fewer than `epochs` when resumed from a backup
    stats = {
        "sentences": len(sentences), "windows": len(windows),
        "words": int(sum(len(s.words) for s in sentences)), "labels": list(labels),
        "use_crf": model.use_crf, "epochs": epochs, "epochs_this_run": epochs_run,
        "steps": distribution.global_step(model), "seconds": round(seconds, 2),
        "sentences_per_second": (round(len(sentences) * epochs_run / seconds, 2)
                                 if seconds else None),
        "epoch_seconds": [round(t, 2) for t in epoch_seconds],
        "mean_pieces_per_window": float(np.mean(windows.lengths)),
        "final_loss": float(history.history["loss"][-1]) if epochs_run else None,
        "dev_entity_f1_per_epoch": history.history.get("dev_entity_f1", []),
    }
    with io.atomic_write(os.path.join(out, "train_results.json")) as f:
        json.dump(stats, f, indent=2)
    logging.info("Training done: %s", stats)
    return stats


def predict_labels(model, sentences, tokenizer, labels, max_seq_length, batch_size=32):
    """One predicted label per word of every sentence.

    Args:
        model: `BertTokenClassifier`.
        sentences: list of `kbert.data.conll.Sentence` (labels are not used).
        tokenizer: `kbert.FullTokenizer`.
        labels: sequence of str. The model's label names, in id order.
        max_seq_length: int. Pieces per window.
        batch_size: int. Windows per batch. Defaults to 32.

    Returns:
        list (per sentence) of lists of str.
    """
    windows = conll.featurize(sentences, tokenizer, max_seq_length)
    return predict_windows(model, windows, sentences, labels, batch_size)


def predict_windows(model, windows, sentences, labels, batch_size=32):
    """`predict_labels` on already featurized `windows` of `sentences`."""
    dataset, order = conll.inference_dataset(windows, batch_size)

    # One graph for the encoder and the decoding (argmax or Viterbi); batch widths vary, so
    # let TensorFlow generalise the shape instead of tracing each one.
    @tf.function(reduce_retracing=True)
    def decode(features, weights):
        return model.decode(model(features, training=False), weights)

    batches = -(-len(windows) // batch_size)
    if not sys.stdout.isatty():  # Progbar(verbose=2) prints one bare line at the end: name it
        print(f"predicting {len(windows)} windows:", end=" ", flush=True)
    progbar = keras.utils.Progbar(batches, verbose=1 if sys.stdout.isatty() else 2,
                                  unit_name="batch")
    rows = []
    for features, weights in dataset:
        rows.extend(decode(features, weights).numpy())
        progbar.add(1)
    predicted = [None] * len(windows)
    for row, window in zip(rows, order, strict=True):
        predicted[window] = row
    return conll.word_labels(windows, predicted, labels, sentences)


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


def write_eval_results(output_dir, results, global_step):
    """Writes eval_results.txt (`split_metric = value` lines) and eval_results.json."""
    flat = {}
    for split, scores in results.items():
        flat.update(ner_metrics.flat_scores(scores, f"{split}_"))
    flat["global_step"] = global_step
    with io.atomic_write(os.path.join(output_dir, "eval_results.txt")) as f:
        f.writelines(f"{key} = {flat[key]}\n" for key in sorted(flat))
    with io.atomic_write(os.path.join(output_dir, "eval_results.json")) as f:
        json.dump({"global_step": global_step, **results}, f, indent=2)


def _summary(scores):
    return ", ".join(f"{key} = {scores[key]:.4f}" for key in ("precision", "recall", "f1",
                                                              "word_accuracy"))


def _existing(path):
    return path if os.path.exists(path) else None

