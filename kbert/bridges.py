"""Move a BERT model, head included, between kbert, Google, Hugging Face and keras-hub formats.

Every format is read into one interchange form, a `GoogleCheckpoint` (Google's variable names
and layouts, the head under Google's fine-tuning names), and written from it; the kbert model
class follows from the head (`tf1.find_head`):

    head tensors                   kbert model           transformers class
    (none)                         BertEncoder           BertModel
    cls/predictions, seq_rel.      BertPretrainer        BertForPreTraining
    output_weights, output_bias    BertClassifier        BertForSequenceClassification
    cls/squad/*                    BertSpanLabeler       BertForQuestionAnswering
    cls/ner/* (+ cls/ner/crf/*)    BertTokenClassifier   BertForTokenClassification
"""

import os

import keras

from kbert import artifacts
from kbert.checkpoints import huggingface
from kbert.checkpoints import keras_hub_preset
from kbert.checkpoints import tf1
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier

FORMATS = ("google", "huggingface", "keras_hub")
KERAS_MODEL_FILE = "model.keras"


def read_checkpoint(path, exact_gelu=False):
    """Reads any supported model as a `GoogleCheckpoint` (Google names, head included).

    Args:
        path: str. A `.keras` file of a kbert model, or a directory holding `model.keras`
            (a recipe's --output_dir); a Hugging Face directory (`config.json` +
            `model.safetensors`); a keras-hub preset directory (`metadata.json`); a Google
            release directory, training directory or checkpoint prefix; or the name of one
            of Google's releases (`kbert.list_presets()`).
        exact_gelu: bool. Keep a Hugging Face model's erf GELU as "gelu_exact" (kbert only)
            rather than Google's tanh "gelu". Defaults to False.

    Returns:
        `GoogleCheckpoint`, with the vocabulary found beside the model (if any).
    """
    path = os.fspath(path)
    keras_file = os.path.join(path, KERAS_MODEL_FILE) if os.path.isdir(path) else path
    if keras_file.endswith(".keras") and os.path.isfile(keras_file):
        model = keras.saving.load_model(keras_file)
        vocab = os.path.join(os.path.dirname(keras_file), tf1.VOCAB_FILE)
        return tf1.GoogleCheckpoint.from_tensors(
            tf1.google_tensors(model), model.bert_config, keras_file,
            vocab if os.path.exists(vocab) else None)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "metadata.json")):
        return keras_hub_preset.read_keras_hub_preset(path)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, huggingface.HF_WEIGHTS)):
        return huggingface.read_huggingface(path, exact_gelu)
    return tf1.GoogleCheckpoint.open(path)


def load_model(path, **kwargs):
    """Builds the kbert model that `path` holds, with its head, and loads every weight.

    Args:
        path: str. Anything `read_checkpoint` reads.
        **kwargs: passed to `BertEncoder` (e.g. `dtype`).

    Returns:
        `BertEncoder`, `BertPretrainer`, `BertClassifier`, `BertSpanLabeler` or
        `BertTokenClassifier`, as the head says.

    Example:
    ```python
    classifier = kbert.load_model("mrpc_output")  # or a Hugging Face / keras-hub directory
    ```
    """
    checkpoint = read_checkpoint(path)
    shapes = checkpoint.shapes()
    encoder = BertEncoder(**checkpoint.config.encoder_kwargs(), **kwargs)
    head = tf1.find_head(shapes)
    if head is None:
        model = encoder
    elif head == "kbert>BertPretrainer":
        model = BertPretrainer(encoder)
    elif head == "kbert>BertClassifier":
        model = BertClassifier(encoder, shapes["output_weights"][0],
                               dropout=checkpoint.config.hidden_dropout_prob)
    elif head == "kbert>BertSpanLabeler":
        model = BertSpanLabeler(encoder)
    else:
        model = BertTokenClassifier(encoder, shapes["cls/ner/output_weights"][0],
                                    use_crf="cls/ner/crf/transitions" in shapes,
                                    dropout=checkpoint.config.hidden_dropout_prob)
    tf1.load_google_weights(model, checkpoint)
    return model


def save_model(model, output_dir, format="google", vocab_file=None, label_names=None):
    """Writes a kbert model, head included, as a Google, Hugging Face or keras-hub directory.

    Args:
        model: a kbert model (encoder, pretrainer, classifier, span labeler, token
            classifier with or without CRF).
        output_dir: str. The directory to write (`bert_model.ckpt.*` for "google").
        format: str. One of "google", "huggingface", "keras_hub". Defaults to "google".
        vocab_file: str. The vocabulary to put beside the weights.
        label_names: list of str. Hugging Face `id2label` of a classifier head.
    """
    checkpoint = tf1.GoogleCheckpoint.from_tensors(
        tf1.google_tensors(model), model.bert_config, model.name, vocab_file)
    write_checkpoint(checkpoint, output_dir, format, label_names)


def write_checkpoint(checkpoint, output_dir, format, label_names=None):
    """Writes a `GoogleCheckpoint` in `format` (see `save_model`)."""
    _check_format(format)
    if format == "google":
        prefix = os.path.join(output_dir, tf1.RELEASE_PREFIX)
        tensors = {name: checkpoint.tensor(name) for name in checkpoint.shapes()
                   if not tf1.is_training_state(name)}
        tf1.write_google_release(prefix, tensors, checkpoint.config, checkpoint.vocab_file)
    elif format == "huggingface":
        huggingface.write_huggingface(checkpoint, output_dir, label_names)
    else:
        keras_hub_preset.write_keras_hub_preset(checkpoint, output_dir)


def convert(path, output_dir, format="google", label_names=None, exact_gelu=False,
            overwrite_output_dir=False):
    """Converts the model at `path` (anything `read_checkpoint` reads) to `format`.

    The output dir is guarded (`kbert.artifacts`): one writer at a time; it may not be or
    hold the input; a directory holding other files, or a finished conversion, is refused
    unless `overwrite_output_dir` (which removes the files of the conversion recorded there).

    Args:
        path: str. See `read_checkpoint`.
        output_dir: str. The directory to write.
        format: str. One of "google", "huggingface", "keras_hub". Defaults to "google".
        label_names: list of str. Hugging Face `id2label` of a classifier head.
        exact_gelu: bool. See `read_checkpoint`. Defaults to False.
        overwrite_output_dir: bool. Replace what is in `output_dir`. Defaults to False.

    Example:
    ```python
    kbert.convert("mrpc_output", "mrpc_hf", format="huggingface")
    ```
    """
    _check_format(format)
    checkpoint = read_checkpoint(path, exact_gelu)
    manifest = {"settings": {"format": format, "label_names": label_names,
                             "exact_gelu": exact_gelu},
                "input": artifacts.fingerprint(checkpoint.prefix)}
    with artifacts.locked(output_dir):
        claim = artifacts.claim(output_dir, manifest, overwrite_output_dir=overwrite_output_dir,
                                inputs=[("input", path), ("input", checkpoint.prefix),
                                        ("vocabulary", checkpoint.vocab_file)])
        write_checkpoint(checkpoint, output_dir, format, label_names)
        claim.finish()


def _check_format(format):
    if format not in FORMATS:
        raise ValueError(f"format {format!r}: expected one of {', '.join(FORMATS)}")
