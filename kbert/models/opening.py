"""open_model: which model a path names and which vocab goes with it, one answer for all.

Every recipe, tool and converter opens its model here, so all of them take the same inputs:

    kind           path                                                  checkpoint_file
    "keras"        a `.keras` file, or a directory holding model.keras   the `.keras` file
                   (a recipe's output_dir)
    "huggingface"  a directory of config.json + model.safetensors        model.safetensors
    "keras_hub"    a keras-hub preset directory (metadata.json)          the directory
    "google"       a Google release directory, training directory or     `<prefix>.index`
                   checkpoint prefix, or a release name (`kbert.list_presets()`)

Opening reads only what is small: the config (`bert_config.json`, the `.keras` file's own
config.json, the Hugging Face or keras-hub config), `export_settings.json`, and for Google
the checkpoint's index. The weights are read when first asked for (`google_checkpoint`,
`load`) and the vocab likewise (`vocab`), each once per `OpenedModel`.
"""

import dataclasses
import functools
import glob
import json
import os
import re
import zipfile

import keras
from absl import logging

from kbert import artifacts
from kbert import io
from kbert.checkpoints import huggingface
from kbert.checkpoints import keras_hub_preset
from kbert.checkpoints import releases
from kbert.checkpoints import tf1
from kbert.config import BertConfig
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tokenization import vocab as vocab_lib

GOOGLE, KERAS, HUGGINGFACE, KERAS_HUB = "google", "keras", "huggingface", "keras_hub"
KERAS_HUB_METADATA = "metadata.json"  # what marks a keras-hub preset directory
ACCEPTED = (
    "a Google release directory, training directory or checkpoint prefix; the name of a "
    "Google release (kbert.list_presets()); a recipe's output directory (holding "
    f"{artifacts.MODEL_FILE}) or a .keras file; a Hugging Face BERT directory "
    f"({huggingface.HF_CONFIG} + {huggingface.HF_WEIGHTS}); or a keras-hub preset directory "
    f"({KERAS_HUB_METADATA})")
_CHECKPOINT_SUFFIX = re.compile(r"\.(index|meta|data-\d+-of-\d+)$")


@dataclasses.dataclass
class OpenedModel:
    """A model `open_model` found, with its vocab; reads its weights and vocab once.

    Attributes:
        path: str. The path (or release name) as given.
        kind: str. "google", "keras", "huggingface" or "keras_hub".
        vocab_file: str or None. The vocab given, else the one beside the model, else None.
        bert_config: `BertConfig`, or None for a `.keras` file that holds no kbert encoder.
        checkpoint_file: str. What fingerprints the weights (run manifests).
        settings: dict. The `export_settings.json` beside the model (a recipe's output), or
            {}.
        multi_label: bool. The classifier head is multi-label, as the format records it
            (Google's cannot: False).
        keras_file: str or None. The `.keras` file of a "keras" model.
    """

    path: str
    kind: str
    vocab_file: str | None
    bert_config: BertConfig | None
    checkpoint_file: str
    settings: dict
    multi_label: bool = False
    keras_file: str | None = None
    # () -> GoogleCheckpoint: reads the weights (None for "keras": they come from `load`).
    _read: object = dataclasses.field(default=None, repr=False, compare=False)
    _checkpoint: object = dataclasses.field(default=None, init=False, repr=False, compare=False)
    _model: object = dataclasses.field(default=None, init=False, repr=False, compare=False)
    _vocab: object = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def google_checkpoint(self):
        """The weights as a `GoogleCheckpoint` (Google's names, head included), read once;
        its vocab is `vocab_file`. `from_google_checkpoint` builders take it as `path`."""
        if self._checkpoint is None:
            if self.kind == KERAS:
                model = self.load()
                checkpoint = tf1.GoogleCheckpoint.from_tensors(
                    tf1.google_tensors(model), model.bert_config, self.keras_file)
            else:
                checkpoint = self._read()
            self._checkpoint = dataclasses.replace(checkpoint, vocab_file=self.vocab_file)
        return self._checkpoint

    def vocab(self):
        """The `Vocab` of `vocab_file`, read once.

        Raises:
            ValueError: there is no vocab (none given, none beside the model).
        """
        if self._vocab is None:
            if self.vocab_file is None:
                raise ValueError(f"no {artifacts.VOCAB_FILE} beside {self.path}; pass "
                                 "vocab_file (--vocab_file)")
            self._vocab = vocab_lib.load_vocab(self.vocab_file)
        return self._vocab

    def load(self, multi_label=None, **encoder_kwargs):
        """The model with its head, every weight loaded.

        A `.keras` model is loaded as saved, once (later calls return the same object); the
        other kinds are built from the head their weights hold (`build_from_checkpoint`).

        Args:
            multi_label: bool or None. The classifier head is multi-label. Defaults to
                `self.multi_label`.
            **encoder_kwargs: passed to `BertEncoder` (e.g. `dtype`); a `.keras` model
                given some is rebuilt from its weights.

        Returns:
            `BertEncoder`, `BertPretrainer`, `BertClassifier`, `BertSpanLabeler` or
            `BertTokenClassifier`, as the head says.
        """
        multi_label = self.multi_label if multi_label is None else multi_label
        if self.kind == KERAS and not encoder_kwargs and multi_label == self.multi_label:
            if self._model is None:
                self._model = keras.saving.load_model(self.keras_file)
            return self._model
        return build_from_checkpoint(self.google_checkpoint(), multi_label, **encoder_kwargs)


def open_model(path, vocab_file=None, bert_config_file=None, exact_gelu=False):
    """Finds the model `path` names, its config and its vocab; reads no weights yet.

    Args:
        path: str or os.PathLike. A Google release directory, training directory or
            checkpoint prefix; the name of a Google release (`kbert.list_presets()`,
            downloaded once); a recipe's output directory (its `model.keras`) or a `.keras`
            file; a Hugging Face BERT directory; or a keras-hub preset directory.
        vocab_file: str or None. Defaults to the vocab beside the model (`vocab.txt`; a
            keras-hub preset's `assets/tokenizer/vocabulary.txt`), if there is one.
        bert_config_file: str or None. A Google checkpoint's config. Defaults to the
            `bert_config.json` beside it; the other kinds hold their own.
        exact_gelu: bool. Keep a Hugging Face model's erf GELU as "gelu_exact" (kbert only)
            rather than Google's tanh "gelu". Defaults to False.

    Returns:
        `OpenedModel`.

    Raises:
        FileNotFoundError or ValueError: `path` is none of those, naming what is accepted;
            or the model's files are incomplete, naming the file.
    """
    path = os.fspath(path)
    kind = _kind(path)
    if bert_config_file and kind != GOOGLE:
        logging.warning("%s: a %s model holds its config; bert_config_file %s is not read",
                        path, kind, bert_config_file)
    if kind == KERAS:
        return _open_keras(path, vocab_file)
    if kind == HUGGINGFACE:
        config = huggingface.huggingface_config_to_google(
            huggingface.read_config(path), exact_gelu,
            source=os.path.join(path, huggingface.HF_CONFIG))
        return _opened(path, kind, vocab_file, os.path.join(path, artifacts.VOCAB_FILE),
                       config, os.path.join(path, huggingface.HF_WEIGHTS), path,
                       huggingface.is_multi_label(path),
                       _read=functools.partial(huggingface.read_huggingface, path, exact_gelu,
                                               config=config))
    if kind == KERAS_HUB:
        return _opened(path, kind, vocab_file, os.path.join(path, keras_hub_preset.VOCABULARY),
                       keras_hub_preset.read_config(path), path, path,
                       keras_hub_preset.is_multi_label(path),
                       _read=functools.partial(keras_hub_preset.read_keras_hub_preset, path))
    checkpoint = tf1.GoogleCheckpoint.open(path, bert_config_file)
    return _opened(path, kind, vocab_file, checkpoint.vocab_file, checkpoint.config,
                   checkpoint.prefix + ".index", os.path.dirname(checkpoint.prefix), False,
                   _read=lambda: checkpoint)


def build_from_checkpoint(checkpoint, multi_label=False, **encoder_kwargs):
    """Builds the kbert model whose head `checkpoint` (a `GoogleCheckpoint`) holds, loaded.

    Args:
        checkpoint: `GoogleCheckpoint`.
        multi_label: bool. The classifier head is multi-label. Defaults to False.
        **encoder_kwargs: passed to `BertEncoder` (e.g. `dtype`).
    """
    shapes = checkpoint.shapes()
    config = checkpoint.config
    encoder = BertEncoder(**config.encoder_kwargs(), **encoder_kwargs)
    head = tf1.find_head(shapes)
    if multi_label and head != "kbert>BertClassifier":
        raise ValueError(f"{checkpoint.prefix}: multi_label applies to a classifier head, not "
                         f"to {head or 'an encoder'}")
    if head is None:
        model = encoder
    elif head == "kbert>BertPretrainer":
        model = BertPretrainer(encoder)
    elif head == "kbert>BertClassifier":
        model = BertClassifier(encoder, shapes["output_weights"][0],
                               dropout=config.hidden_dropout_prob, multi_label=multi_label)
    elif head == "kbert>BertSpanLabeler":
        model = BertSpanLabeler(encoder)
    else:
        model = BertTokenClassifier(encoder, shapes["cls/ner/output_weights"][0],
                                    use_crf="cls/ner/crf/transitions" in shapes,
                                    dropout=config.hidden_dropout_prob)
    tf1.load_google_weights(model, checkpoint)
    return model


def _kind(path):
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, artifacts.MODEL_FILE)):
            return KERAS
        if os.path.exists(os.path.join(path, KERAS_HUB_METADATA)):
            return KERAS_HUB
        if os.path.exists(os.path.join(path, huggingface.HF_WEIGHTS)):
            return HUGGINGFACE
    elif path.endswith(".keras"):
        return KERAS
    if path in releases.RELEASES or _holds_google_checkpoint(path):
        return GOOGLE
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: not found — expected {ACCEPTED}")
    raise ValueError(f"{path}: not a model kbert reads — expected {ACCEPTED}")


def _holds_google_checkpoint(path):
    """Whether `path` has a checkpoint's files; which one, and whether it is whole, is for
    `GoogleCheckpoint.open` to say."""
    if os.path.isdir(path):
        return bool(glob.glob(os.path.join(glob.escape(path), "*.index"))) or os.path.exists(
            os.path.join(path, "checkpoint"))  # a training directory's state file
    prefix = glob.escape(_CHECKPOINT_SUFFIX.sub("", path))
    return bool(glob.glob(prefix + ".index") or glob.glob(prefix + ".data-*"))


def _open_keras(path, vocab_file):
    keras_file = os.path.join(path, artifacts.MODEL_FILE) if os.path.isdir(path) else path
    if not os.path.isfile(keras_file):
        raise FileNotFoundError(f"{keras_file}: not found")
    # Keras has no public reader of a .keras file's config short of building the model; the
    # format (Keras 3) is a zip whose config.json is the serialized model.
    try:
        with zipfile.ZipFile(keras_file) as archive:
            config = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise ValueError(f"{keras_file}: not a Keras 3 .keras model ({e})") from None
    encoder = _encoder_config(config)
    directory = os.path.dirname(os.path.abspath(keras_file))
    return _opened(path, KERAS, vocab_file, os.path.join(directory, artifacts.VOCAB_FILE),
                   encoder and BertConfig.from_encoder_kwargs(encoder), keras_file, directory,
                   bool(config.get("config", {}).get("multi_label")), keras_file=keras_file)


def _encoder_config(config):
    """The `BertEncoder` config inside a serialized kbert model's config, or None."""
    if config.get("registered_name") == keras.saving.get_registered_name(BertEncoder):
        return config["config"]
    inner = config.get("config", {}).get("encoder")
    return _encoder_config(inner) if isinstance(inner, dict) else None


def _opened(path, kind, vocab_file, beside, config, checkpoint_file, directory, multi_label,
            **kwargs):
    """The `OpenedModel`: the vocab given or the one `beside`, the settings in `directory`."""
    if vocab_file is None and beside is not None and os.path.exists(beside):
        vocab_file = beside
    settings = io.read_json(os.path.join(directory, artifacts.EXPORT_SETTINGS_FILE))
    return OpenedModel(path, kind, vocab_file, config, checkpoint_file, settings, multi_label,
                       **kwargs)
