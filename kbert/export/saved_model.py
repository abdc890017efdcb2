"""export_saved_model: a kbert model as a TensorFlow SavedModel that takes raw text.

The SavedModel needs only TensorFlow and tensorflow-text to load and run (and a TensorFlow
Serving build with the tensorflow-text ops to serve): tokenization is in the graph, and the
vocab and label names are SavedModel assets.
"""

import os
import shutil
import tempfile

import tensorflow as tf

from kbert import artifacts
from kbert.export import serving
from kbert.models import opening
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.models.precision import with_compute_dtype
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tokenization import vocab as vocab_lib

TEXT_SIGNATURE = serving.TEXT_SIGNATURE
TOKEN_IDS_SIGNATURE = serving.TOKEN_IDS_SIGNATURE
_TASKS = (("span_labeler", BertSpanLabeler), ("classifier", BertClassifier),
          ("tagger", BertTokenClassifier), ("encoder", BertEncoder))


def export_saved_model(model, export_dir, vocab_file, *, do_lower_case=True,
                       max_seq_length=128, never_split=None, label_names=None,
                       text_pair=False, max_query_length=64, max_answer_length=30,
                       null_score_diff_threshold=0.0, thresholds=None, multi_label=None,
                       overwrite=False, compute_dtype="float32") -> str:
    """Writes `model` as a SavedModel with a raw-text and a token-id serving signature.

    `serving_default` takes string tensors [batch]: `text` (or `text_a` and `text_b` with
    `text_pair`), or `question` and `context` for a span labeler. It tokenizes in-graph
    exactly as `kbert.BertPreprocessor` with the same vocab, casing and never-split tokens,
    truncates to `max_seq_length` as training did, pads to the batch's longest sequence, and
    returns (all with a leading [batch] dimension; `seq` is the padded length):

    - `kbert.BertEncoder`: `pooled_output` [batch, hidden], `sequence_output`
      [batch, seq, hidden];
    - `BertClassifier`: `logits` and `probabilities` [batch, classes], `label_id` int32 and,
      with `label_names`, `label` string; a regression head (1 class) returns `score`. A
      `multi_label` classifier returns every label: `logits`, `probabilities` (the sigmoid of
      each logit) and `predicted` bool (probability >= the label's threshold), all
      [batch, labels], and with `label_names` the names, string [batch, labels], so that
      row b's label j is `label_names[b, j]` with `probabilities[b, j]`;
    - `BertSpanLabeler`: `start_logits`, `end_logits` [batch, seq]; `answer` string, the
      context text of the best valid span (see `serving.best_spans`; "" if the context is
      empty or, with `allow_null`, when "no answer" wins), and `answer_start`,
      `answer_end` int64, its character offsets in `context` (-1 if none). As run_squad.py,
      the question is cut to `max_query_length` pieces and the context fills the rest of
      one window;
    - those three also return `tokens`, string [batch, seq]: the word pieces ("" for padding);
    - `BertTokenClassifier`: `words` string [batch, words], the text split at whitespace
      (as `str.split()`), with `label_ids` int32 and `labels` string (with `label_names`)
      of each word, padded with "" / -1. Words are aligned as `kbert.data.conll` does in
      training (see `tagging`): a long text is split into windows, so every word is labelled.

    `serve_token_ids` takes Google's int32 [batch, seq] `input_ids`, `input_mask` and
    `segment_ids` and returns the same outputs, less those that need the text. For a tagger
    it also takes `label_mask` (1 on the first piece of each word, as `kbert.data.conll`'s
    label weights) and returns per piece `logits` [batch, seq, labels], `label_ids` and
    `labels` [batch, seq] (-1 / "" off the mask), decoded as `BertTokenClassifier.decode`.

    A bad request fails alone with `tf.errors.InvalidArgumentError` naming the inputs and the
    expected shape: an input of another rank, inputs of unequal shapes (a `text_b` per
    `text_a`, a `context` per `question`), and in `serve_token_ids` a `seq` longer than the
    model's positions or ids outside its embedding tables. Any string is served: invalid
    UTF-8 is replaced first (each invalid sequence by U+FFFD, as the tokenizer decodes text
    in training and as Python's `bytes.decode("utf-8", "replace")`), then the tokenizer
    cleans the text as Google's `_clean_text` (NUL, U+FFFD and control characters deleted,
    whitespace a space). So `words` and `answer` are valid UTF-8, and the tagger's `words`
    keep NUL and control characters, as `str.split()` does and `kbert.data.conll` reads them.

    The directory is written under a temporary name beside `export_dir` and renamed when
    complete, so a server watching the parent never sees half a model.

    Args:
        model: `kbert.BertEncoder`, `BertClassifier`, `BertSpanLabeler` or
            `BertTokenClassifier`.
        export_dir: str or os.PathLike. The SavedModel directory to create.
        vocab_file: str or os.PathLike. The `vocab.txt` the model was trained with: one
            token per row of its embedding table (`kbert.check_vocab_size`).
        do_lower_case: bool. Lower-case and strip accents (uncased models). Defaults to True.
        max_seq_length: int. Longest packed sequence; longer texts are truncated. At most the
            encoder's `max_sequence_length`. Defaults to 128.
        never_split: list of str or None. Tokens kept whole (see `kbert.FullTokenizer`).
            Defaults to those of `added_tokens.txt` beside `vocab_file`, if any.
        label_names: sequence of str or None. Name of each class (classifier) or tag
            (tagger), in id order; adds the string outputs. Defaults to None.
        text_pair: bool. The classifier or encoder takes text pairs. Defaults to False.
        max_query_length: int. Span labeler: question pieces kept. Defaults to 64.
        max_answer_length: int. Span labeler: longest answer in pieces. Defaults to 30.
        null_score_diff_threshold: float. Span labeler with `allow_null`: answer "" when the
            [CLS] score exceeds the best span's by more than this. Defaults to 0.0.
        thresholds: sequence of float in [0, 1], one per label, or None. Multi-label
            classifier: a label is `predicted` when its probability is at least its
            threshold. Defaults to 0.5 for each.
        multi_label: bool or None. What a recipe recorded (`export_settings.json`); the
            model carries it (`BertClassifier.multi_label`), so this only checks that the two
            agree. Defaults to None.
        overwrite: bool. Replace a non-empty `export_dir`. Defaults to False.
        compute_dtype: str. "float32", or "bfloat16" (or "float16") to serve a copy that
            computes in that dtype with the same float32 weights (see
            `kbert.with_compute_dtype`); outputs stay float32. Defaults to "float32".

    Returns:
        str, the absolute path of the SavedModel directory.

    Example:
    ```python
    kbert.export_saved_model(classifier, "/models/mrpc/1", "vocab.txt", text_pair=True,
                             label_names=["not_paraphrase", "paraphrase"])
    reloaded = tf.saved_model.load("/models/mrpc/1")  # needs `import tensorflow_text`
    reloaded.signatures["serving_default"](text_a=tf.constant(["..."]),
                                           text_b=tf.constant(["..."]))["label"]
    ```
    """
    export_dir = os.path.abspath(os.fspath(export_dir))
    _check_target(export_dir, overwrite)
    task = _task_of(model)
    encoder = model if task == "encoder" else model.encoder
    if not 3 <= max_seq_length <= encoder.max_sequence_length:
        raise ValueError(f"max_seq_length must be in [3, {encoder.max_sequence_length}] (the "
                         f"encoder's max_sequence_length), got {max_seq_length}")
    if task == "span_labeler" and not 0 < max_query_length < max_seq_length - 3:
        raise ValueError(f"max_query_length must be in [1, max_seq_length - 4 = "
                         f"{max_seq_length - 4}], got {max_query_length}")
    if text_pair and task in ("span_labeler", "tagger"):
        raise ValueError(f"text_pair does not apply to a {type(model).__name__}")
    thresholds = _thresholds(model, thresholds, multi_label)
    vocab = vocab_lib.load_vocab(vocab_file)
    vocab_lib.check_vocab_size(vocab, encoder.vocabulary_size)  # as the recipes check
    if never_split is None:
        never_split = vocab_lib.load_added_tokens(vocab_file)
    model = with_compute_dtype(model, compute_dtype)
    with tempfile.TemporaryDirectory(prefix="kbert-export-assets-") as asset_dir:
        assets = {"vocab": _write_lines(asset_dir, artifacts.VOCAB_FILE, vocab.tokens)}
        if never_split:
            assets["added_tokens"] = _write_lines(asset_dir, vocab_lib.ADDED_TOKENS_FILE,
                                                  never_split)
        if label_names is not None:
            _check_label_names(model, task, label_names)
            assets["labels"] = _write_lines(asset_dir, "label_names.txt", label_names)
        module = serving.ServingModule(
            model, task, assets, vocab, do_lower_case, list(never_split), max_seq_length,
            text_pair, max_query_length, max_answer_length, null_score_diff_threshold,
            thresholds)
        _save_atomically(module, module.signatures(), export_dir, overwrite)
    return export_dir


def load_for_export(path, vocab_file=None) -> tuple:
    """The model at `path` with its vocab file and recorded export settings.

    Args:
        path: str. Anything `kbert.models.opening.open_model` opens, as `kbert.convert`
            reads: a recipe's output directory (its `model.keras`), a `.keras` file, a Google
            checkpoint or release name, a Hugging Face or keras-hub directory. The model is
            the one its head makes; a pretrained model's encoder (its pretraining heads are
            not served).
        vocab_file: str or None. Defaults to the vocab beside the model.

    Returns:
        (model, vocab_file, settings): the vocab is None if there is none; settings are the
        keyword arguments of `export_saved_model` that the recipe recorded in
        `export_settings.json` (text pairs, label names, casing, lengths, a multi-label
        classifier's thresholds), or {}.
    """
    source = opening.open_model(path, vocab_file)
    model = source.load()
    if isinstance(model, BertPretrainer):
        model = model.encoder
    return model, source.vocab_file, source.settings


def _task_of(model):
    for task, cls in _TASKS:
        if isinstance(model, cls):
            return task
    names = ", ".join(cls.__name__ for _, cls in _TASKS)
    raise TypeError(f"export_saved_model: cannot export a {type(model).__name__}; expected "
                    f"one of {names}")


def _thresholds(model, thresholds, multi_label):
    """The thresholds of a multi-label classifier as a list of float; None for other models."""
    multi = getattr(model, "multi_label", False)
    if multi_label is not None and bool(multi_label) != multi:
        raise ValueError(f"multi_label={multi_label} was recorded, but the model's "
                         f"multi_label is {multi}")
    if not multi:
        if thresholds is not None:
            raise ValueError(f"thresholds apply to a multi-label classifier, not a "
                             f"{type(model).__name__}"
                             + (" (multi_label=False)" if isinstance(model, BertClassifier)
                                else ""))
        return None
    if thresholds is None:
        return [0.5] * model.num_classes
    if isinstance(thresholds, str) or len(thresholds) != model.num_classes:
        raise ValueError(f"thresholds must be one float per label ({model.num_classes}), got "
                         f"{thresholds!r}")
    thresholds = [float(t) for t in thresholds]
    for i, threshold in enumerate(thresholds):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"thresholds[{i}] must be a probability in [0, 1], got "
                             f"{threshold}")
    return thresholds


def _check_label_names(model, task, label_names):
    if task not in ("classifier", "tagger") or getattr(model, "is_regression", False):
        raise ValueError(f"label_names do not apply to a {type(model).__name__}"
                         + (" regression head" if task == "classifier" else ""))
    if isinstance(label_names, str):
        raise TypeError("label_names must be a sequence of str, not one str")
    label_names = list(label_names)
    expected = model.num_classes if task == "classifier" else model.num_labels
    if len(label_names) != expected:
        raise ValueError(f"{len(label_names)} label_names for {expected} classes: "
                         f"{label_names}")
    for i, name in enumerate(label_names):
        if not isinstance(name, str) or not name or "\n" in name or "\r" in name:
            raise ValueError(f"label_names[{i}] must be a non-empty one-line str, got {name!r}")


def _write_lines(directory, name, lines):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(f"{line}\n" for line in lines))
    return path


def _check_target(export_dir, overwrite):
    if os.path.exists(export_dir) and not os.path.isdir(export_dir):
        raise NotADirectoryError(f"{export_dir}: exists and is not a directory")
    artifacts.check_writable(os.path.dirname(export_dir))  # the temporary sibling goes there
    if os.path.isdir(export_dir) and os.listdir(export_dir) and not overwrite:
        raise FileExistsError(f"{export_dir}: directory is not empty; pass overwrite=True "
                              f"(--overwrite) to replace it")


def _save_atomically(module, signatures, export_dir, overwrite):
    """tf.saved_model.save into a temporary sibling directory, then a rename."""
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(export_dir)}.", suffix=".tmp",
                           dir=parent)
    old = None
    try:
        tf.saved_model.save(module, tmp, signatures=signatures)
        _check_target(export_dir, overwrite)  # again: another writer may have been quicker
        if os.path.isdir(export_dir):
            if os.listdir(export_dir):
                old = tmp + ".old"
                os.rename(export_dir, old)
            else:
                os.rmdir(export_dir)
        os.rename(tmp, export_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old and not os.path.exists(export_dir):
            os.rename(old, export_dir)
        raise
    if old:
        shutil.rmtree(old, ignore_errors=True)
