"""Read and write Google's original TF1 BERT checkpoints, strictly, through the name table."""

import dataclasses
import glob
import os
import shutil

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from kbert import artifacts
from kbert import io
from kbert.checkpoints import releases
from kbert.checkpoints import tf1_names
from kbert.config import BertConfig

# A release directory's files, as every output directory names them (`kbert.artifacts`).
CONFIG_FILE = artifacts.BERT_CONFIG_FILE
VOCAB_FILE = artifacts.VOCAB_FILE
RELEASE_PREFIX = "bert_model.ckpt"


@dataclasses.dataclass(frozen=True)
class GoogleCheckpoint:
    """An opened Google checkpoint: its prefix, config, vocab (if any) and a tensor reader."""

    prefix: str
    config: BertConfig
    vocab_file: str | None
    reader: object

    @classmethod
    def open(cls, path, config=None) -> "GoogleCheckpoint":
        """Finds the checkpoint and its config.

        Args:
            path: str. A release directory (`bert_model.ckpt.*`), a training directory (its
                latest checkpoint), a checkpoint prefix (`.index` may be included), or the
                name of one of Google's releases (`kbert.list_presets()`), downloaded once.
            config: `BertConfig`, path of a `bert_config.json`, or None to read the
                `bert_config.json` beside the checkpoint.
        """
        prefix = _resolve_prefix(releases.resolve_release(os.fspath(path)))
        directory = os.path.dirname(prefix)
        if config is None:
            config_path = os.path.join(directory, CONFIG_FILE)
            if not os.path.exists(config_path):
                raise FileNotFoundError(
                    f"{config_path}: not found; pass `config=` (a BertConfig or the path of the "
                    f"checkpoint's {CONFIG_FILE})")
            config = config_path
        if not isinstance(config, BertConfig):
            config = BertConfig.from_json_file(config)
        try:
            reader = tf.train.load_checkpoint(prefix)
        except (tf.errors.OpError, ValueError) as e:
            raise ValueError(f"{prefix}: not a readable TF checkpoint: {_message(e)}") from None
        vocab = os.path.join(directory, VOCAB_FILE)
        return cls(prefix, config, vocab if os.path.exists(vocab) else None, reader)

    @classmethod
    def opened(cls, path_or_checkpoint, config=None) -> "GoogleCheckpoint":
        """`path_or_checkpoint` if it is open already, else `open(path_or_checkpoint, config)`.

        Raises:
            ValueError: `config` given with an open checkpoint, which has its own.
        """
        if not isinstance(path_or_checkpoint, GoogleCheckpoint):
            return cls.open(path_or_checkpoint, config)
        if config is not None:
            raise ValueError(f"{path_or_checkpoint.prefix}: an open checkpoint has its config; "
                             "pass config=None")
        return path_or_checkpoint

    @classmethod
    def from_tensors(cls, tensors, config, source, vocab_file=None):
        """An in-memory checkpoint of Google-named numpy arrays (a converted foreign format).

        Args:
            tensors: dict of Google variable name -> numpy array.
            config: `BertConfig`.
            source: str. Where the tensors came from, for error messages.
            vocab_file: str or None. The vocabulary that goes with them.
        """
        return cls(source, config, vocab_file, _ArrayReader(tensors))

    def shapes(self):
        """Dict of variable name -> shape tuple."""
        return {k: tuple(v) for k, v in self.reader.get_variable_to_shape_map().items()}

    def tensor(self, name):
        """Reads one tensor; a truncated or corrupt data file is a ValueError naming it."""
        try:
            return self.reader.get_tensor(name)
        except (tf.errors.OpError, IndexError) as e:  # IndexError: "Read less bytes than requested"
            raise ValueError(f"{self.prefix}: cannot read variable {name!r}, the checkpoint's "
                             f"data file is truncated or corrupt: {_message(e)}") from None


class _ArrayReader:
    """The two methods of `tf.train.load_checkpoint`'s reader that kbert uses, over a dict."""

    def __init__(self, tensors):
        self.tensors = tensors

    def get_variable_to_shape_map(self):
        return {name: list(value.shape) for name, value in self.tensors.items()}

    def get_tensor(self, name):
        return self.tensors[name]


def load_google_weights(model, checkpoint, new_head=False):
    """Assigns every weight of `model` from `checkpoint` (a `GoogleCheckpoint`), strictly.

    Every model variable must be covered by the name table and present in the checkpoint with
    the right shape, and every `bert/` tensor of the checkpoint must be used. Optimizer slots,
    `global_step` and heads this model does not have (`cls/*` for an encoder, a classifier's
    `output_weights`) are skipped and reported at debug level. Otherwise one ValueError lists
    the missing, unexpected and shape-mismatched variables.

    Args:
        model: a kbert model: `BertEncoder`, `BertPretrainer` or a task model of
            `tf1_names.HEADS`.
        checkpoint: `GoogleCheckpoint`.
        new_head: bool. A checkpoint with none of the head's tensors (a pretrained release
            for a task model) leaves the head as initialised; a head present in part is
            still an error. Defaults to False.
    """
    variables = _variables_by_path(model)
    available = checkpoint.shapes()
    heads = head_rows(model)
    keep_head = new_head and not any(google in available for google, keras_path, _ in heads
                                     if keras_path in variables)
    expected, plan = [], []
    for google, keras_path, transform in _expand(model):
        variable = variables.pop(keras_path, None)
        if variable is None or (keep_head and (google, keras_path, transform) in heads):
            continue  # a head row this model lacks (a tagger without CRF), or a new head
        expected.append((google, keras_path, _google_shape(transform, tuple(variable.shape))))
        plan.append((google, variable, transform))
    uncovered = [f"{path} (model variable not in the name table)" for path in sorted(variables)]
    _check_tensors(checkpoint, expected, "model", [("not loadable", uncovered)])
    for google, variable, transform in plan:
        value = to_keras(transform, checkpoint.tensor(google), tuple(variable.shape))
        variable.assign(value.astype(variable.dtype))
    if keep_head and heads:
        logging.info("%s: no %s head in the checkpoint; the head starts from its initialiser",
                     checkpoint.prefix, model.name)
    logging.info("Loaded %d variables from %s", len(plan), checkpoint.prefix)


def check_checkpoint(checkpoint, optional=()):
    """Raises unless `checkpoint` holds every weight its config gives the model of its head.

    What `load_google_weights` checks, without building the model: every encoder variable
    and every row of the head that `find_head` sees is present with the shape the config
    (and the head's label count) gives it, and no other `bert/` tensor is there. For
    converters and the vocab expansion, which copy tensors without a model.

    Args:
        checkpoint: `GoogleCheckpoint`.
        optional: Google names that may be absent (the heads a Hugging Face class may lack).

    Raises:
        ValueError: as `load_google_weights`, listing the missing, unexpected and
            mis-shaped tensors.
    """
    available = checkpoint.shapes()
    head = find_head(available)
    rows = encoder_rows(checkpoint.config.num_hidden_layers) + list(
        tf1_names.HEADS.get(head, ()))
    if head == "kbert>BertTokenClassifier" and "cls/ner/crf/transitions" not in available:
        rows = [row for row in rows if not row[0].startswith("cls/ner/crf/")]
    labels = _label_count(available, rows)
    expected = [(google, keras_path, _config_shape(google, checkpoint.config, labels))
                for google, keras_path, _ in rows
                if google in available or google not in optional]
    _check_tensors(checkpoint, expected, "config")


def _label_count(available, rows):
    """The outputs of a classifier or tagger head: the rows of its output weights."""
    for google, _, _ in rows:
        if google in ("output_weights", "cls/ner/output_weights") and available[google]:
            return available[google][0]
    return None


def _config_shape(google, config, labels):
    """The Google shape of the weight `google` in a model of `config` with `labels` outputs."""
    hidden, intermediate = config.hidden_size, config.intermediate_size
    fixed = {
        "bert/embeddings/word_embeddings": (config.vocab_size, hidden),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, hidden),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, hidden),
        "cls/predictions/output_bias": (config.vocab_size,),
        "cls/seq_relationship/output_weights": (2, hidden),
        "cls/seq_relationship/output_bias": (2,),
        "cls/squad/output_weights": (2, hidden),
        "cls/squad/output_bias": (2,),
        "output_weights": (labels, hidden),
        "output_bias": (labels,),
        "cls/ner/output_weights": (labels, hidden),
        "cls/ner/output_bias": (labels,),
        "cls/ner/crf/transitions": (labels, labels),
        "cls/ner/crf/start_transitions": (labels,),
        "cls/ner/crf/end_transitions": (labels,),
    }
    if google in fixed:
        return fixed[google]
    scope, leaf = google.rsplit("/", 1)
    width = intermediate if scope.endswith("/intermediate/dense") else hidden
    if leaf == "kernel":  # [in, out]; a layer's output dense reads the intermediate width
        layer_output = scope.endswith("/output/dense") and "/attention/" not in scope
        return (intermediate if layer_output else hidden, width)
    return (width,)  # bias, gamma, beta


def _check_tensors(checkpoint, expected, against, more=()):
    """Raises one ValueError listing the rows of `expected` (Google name, Keras path, Google
    shape) that `checkpoint` lacks or holds in another shape, its other `bert/` weights,
    and the (title, items) of `more`; `against` says what expects them ("model")."""
    available = checkpoint.shapes()
    missing, mismatched = [], []
    for google, keras_path, shape in expected:
        if google not in available:
            missing.append(f"{google} (for {keras_path}, shape {list(shape)})")
        elif available[google] != shape:
            mismatched.append(f"{google}: checkpoint {list(available[google])}, "
                              f"{against} expects {list(shape)} for {keras_path}")
    unexpected = []
    for name in sorted(set(available) - {google for google, _, _ in expected}):
        if name.startswith("bert/") and not is_training_state(name):
            unexpected.append(f"{name} {list(available[name])}")
        else:
            logging.debug("%s: skipping %s (not a weight of this model)", checkpoint.prefix, name)
    problems = [("missing from the checkpoint", missing), ("shape mismatch", mismatched),
                ("unexpected in the checkpoint", unexpected), *more]
    if any(items for _, items in problems):
        lines = [f"{checkpoint.prefix}: checkpoint does not match the {against} "
                 f"(config: {_config_summary(checkpoint.config)})"]
        for title, items in problems:
            if items:
                lines.append(f"  {title} ({len(items)}):")
                lines.extend(f"    {item}" for item in items)
        raise ValueError("\n".join(lines))


def google_tensors(model) -> dict:
    """The weights of `model` under Google's names, as the name table maps them.

    Args:
        model: a kbert model: `BertEncoder`, `BertPretrainer` or a task model of
            `tf1_names.HEADS` (classifier, span labeler, token classifier with or without CRF).

    Returns:
        dict of Google variable name -> float32 numpy array.
    """
    variables = _variables_by_path(model)
    tensors = {}
    for google, keras_path, transform in _expand(model):
        if keras_path in variables:
            value = np.asarray(variables.pop(keras_path).numpy(), dtype=np.float32)
            tensors[google] = to_google(transform, value)
    if variables:
        raise ValueError(f"Cannot save {model.name}: variables not in the name table: "
                         f"{sorted(variables)}")
    return tensors


def save_google_checkpoint(model, prefix, vocab_file=None) -> None:
    """Writes `model` as Google's TF1 checkpoint plus `bert_config.json`, atomically.

    Google's modeling.py restores the result with `tf.train.Saver`; a classifier's head is
    run_classifier.py's (`output_weights`, `output_bias`) and a span labeler's run_squad.py's
    (`cls/squad/*`), so their `create_model` restores it too. A `checkpoint` state file is
    written as well, so `tf.train.latest_checkpoint(directory)` finds it.

    Args:
        model: a kbert model: `BertEncoder`, `BertPretrainer`, `BertClassifier`,
            `BertSpanLabeler` or `BertTokenClassifier` (heads as in `tf1_names.HEADS`).
        prefix: str. Checkpoint prefix, e.g. "out/bert_model.ckpt".
        vocab_file: str. Copied beside the checkpoint as `vocab.txt`, if given.
    """
    write_google_release(prefix, google_tensors(model), model.bert_config, vocab_file)


def write_google_release(prefix, tensors, config, vocab_file=None):
    """Writes a checkpoint of Google-named `tensors` with its `bert_config.json` (and vocab).

    Args:
        prefix: str. Checkpoint prefix, e.g. "out/bert_model.ckpt".
        tensors: dict of Google variable name -> numpy array.
        config: `BertConfig`.
        vocab_file: str. Copied beside the checkpoint as `vocab.txt`, if given.
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(os.path.abspath(prefix))
    write_tf1_checkpoint(prefix, tensors)
    with io.atomic_write(os.path.join(directory, CONFIG_FILE)) as f:
        f.write(config.to_json_string())
    if vocab_file is not None:
        target = os.path.join(directory, VOCAB_FILE)
        if os.path.abspath(vocab_file) != target:
            with io.atomic_write(target, "wb") as f, open(vocab_file, "rb") as src:
                shutil.copyfileobj(src, f)


def head_rows(model):
    """The name-table rows of `model`'s head (empty for an encoder)."""
    return tf1_names.HEADS.get(keras.saving.get_registered_name(type(model)), ())


def find_head(names):
    """The registered name of the kbert model whose head `names` (Google names) hold, or None.

    A checkpoint of Google's run_classifier.py gives "kbert>BertClassifier", run_squad.py's
    "kbert>BertSpanLabeler", run_pretraining.py's "kbert>BertPretrainer".
    """
    for model_name, rows in tf1_names.HEADS.items():
        if rows[0][0] in names:
            return model_name
    return None


def write_tf1_checkpoint(prefix, tensors):
    """Writes a name-based (TF1 `Saver` V2 format) checkpoint of numpy arrays, atomically.

    TF2's object-based `tf.train.Checkpoint` would key tensors by object path; Google's code
    restores by variable name, which only the raw SaveV2 op writes.

    Args:
        prefix: str. Checkpoint prefix.
        tensors: dict of Google variable name -> numpy array.
    """
    prefix = os.path.abspath(os.fspath(prefix))
    directory, base = os.path.split(prefix)
    names = sorted(tensors)
    with io.atomic_files(directory) as tmp:
        tf.raw_ops.SaveV2(
            prefix=os.path.join(tmp, base), tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.convert_to_tensor(tensors[n]) for n in names])
        with open(os.path.join(tmp, "checkpoint"), "w", encoding="utf-8") as f:
            f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')


def _resolve_prefix(path):
    for suffix in (".index", ".meta"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if ".data-" in os.path.basename(path):
        path = path[: path.rindex(".data-")]
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        candidates = [latest] if latest else [
            p[: -len(".index")] for p in sorted(glob.glob(os.path.join(path, "*.index")))]
        if len(candidates) != 1:
            found = ", ".join(os.path.basename(p) for p in candidates) or "none"
            raise FileNotFoundError(
                f"{path}: expected one checkpoint (e.g. {RELEASE_PREFIX}.index) in the "
                f"directory, found {found}; pass the checkpoint prefix instead")
        path = candidates[0]
    if not os.path.exists(path + ".index"):
        raise FileNotFoundError(f"{path}.index: checkpoint index not found")
    if not glob.glob(glob.escape(path) + ".data-*"):
        raise FileNotFoundError(f"{path}.data-*: checkpoint data file not found")
    return path


def is_training_state(name):
    """Optimizer slots, `global_step` and loss-scale state: not weights of any model."""
    return (name in tf1_names.TRAINING_STATE_NAMES
            or name.endswith(tf1_names.OPTIMIZER_SLOT_SUFFIXES))


def _variables_by_path(model):
    variables = {}
    for variable in model.weights:
        variables.setdefault(variable.path, variable)  # tied weights appear twice
    return variables


def _expand(model):
    return encoder_rows(model.bert_config.num_hidden_layers) + list(head_rows(model))


def encoder_rows(num_layers):
    """The encoder's name-table rows with `{i}` expanded for `num_layers` layers."""
    rows = list(tf1_names.ENCODER)
    for i in range(num_layers):
        rows += [(g.format(i=i), k.format(i=i), t) for g, k, t in tf1_names.ENCODER_LAYER]
    return rows


def _google_shape(transform, shape):
    if transform == tf1_names.SPLIT_HEADS:
        return shape[:-2] + (shape[-2] * shape[-1],)
    if transform == tf1_names.MERGE_HEADS:
        return (shape[0] * shape[1],) + shape[2:]
    if transform == tf1_names.TRANSPOSE:
        return shape[::-1]
    return shape


def to_keras(transform, value, shape):
    """A Google tensor as the Keras variable of `shape` that a table row maps it to."""
    if transform == tf1_names.TRANSPOSE:
        return value.T
    return value.reshape(shape)  # row-major: heads are the major part of Google's hidden axis


def to_google(transform, value):
    """A Keras variable's value as the Google tensor that a table row maps it to."""
    if transform == tf1_names.TRANSPOSE:
        return np.ascontiguousarray(value.T)
    return value.reshape(_google_shape(transform, value.shape))


def _config_summary(config):
    return (f"vocab_size={config.vocab_size}, hidden_size={config.hidden_size}, "
            f"num_hidden_layers={config.num_hidden_layers}")


def _message(error):
    return getattr(error, "message", None) or str(error)
