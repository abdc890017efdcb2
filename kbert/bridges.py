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

Whether a classifier is multi-label is no tensor: a `.keras` model carries it
(`BertClassifier.multi_label`), Hugging Face as `problem_type` "multi_label_classification",
a keras-hub preset written by kbert in `kbert_task.json`; Google's format cannot, so
`load_model` and `convert` take it as an argument too.
"""

import os

from absl import logging

from kbert import artifacts
from kbert.checkpoints import huggingface
from kbert.checkpoints import keras_hub_preset
from kbert.checkpoints import tf1
from kbert.models import opening
from kbert.tokenization import vocab as vocab_lib

FORMATS = (opening.GOOGLE, opening.HUGGINGFACE, opening.KERAS_HUB)


def read_checkpoint(path, exact_gelu=False):
    """Reads any supported model as a `GoogleCheckpoint` (Google names, head included).

    Args:
        path: str. Anything `kbert.models.opening.open_model` opens: a `.keras` file of a
            kbert model, or a directory holding `model.keras` (a recipe's --output_dir); a
            Hugging Face directory (`config.json` + `model.safetensors`); a keras-hub preset
            directory (`metadata.json`); a Google release directory, training directory or
            checkpoint prefix; or the name of one of Google's releases (`kbert.list_presets()`).
        exact_gelu: bool. Keep a Hugging Face model's erf GELU as "gelu_exact" (kbert only)
            rather than Google's tanh "gelu". Defaults to False.

    Returns:
        `GoogleCheckpoint`, with the vocabulary found beside the model (if any).
    """
    return opening.open_model(path, exact_gelu=exact_gelu).google_checkpoint()


def load_model(path, multi_label=None, **kwargs):
    """Builds the kbert model that `path` holds, with its head, and loads every weight.

    Args:
        path: str. Anything `read_checkpoint` reads.
        multi_label: bool or None. The classifier head is multi-label. Defaults to what the
            format records (False for Google's, which cannot).
        **kwargs: passed to `BertEncoder` (e.g. `dtype`).

    Returns:
        `BertEncoder`, `BertPretrainer`, `BertClassifier`, `BertSpanLabeler` or
        `BertTokenClassifier`, as the head says.

    Example:
    ```python
    classifier = kbert.load_model("mrpc_output")  # or a Hugging Face / keras-hub directory
    ```
    """
    return opening.open_model(path).load(multi_label, **kwargs)


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
    write_checkpoint(checkpoint, output_dir, format, label_names,
                     getattr(model, "multi_label", False))


def write_checkpoint(checkpoint, output_dir, format, label_names=None, multi_label=False):
    """Writes a `GoogleCheckpoint` in `format` (see `save_model`); `multi_label`: the
    classifier head is multi-label."""
    _check_format(format)
    _check_label_names(checkpoint, format, label_names)
    if format == "google":
        if multi_label:
            logging.warning("%s: Google's checkpoint format does not record multi_label; "
                            "load it back with multi_label=True", output_dir)
        prefix = os.path.join(output_dir, tf1.RELEASE_PREFIX)
        tensors = {name: checkpoint.tensor(name) for name in checkpoint.shapes()
                   if not tf1.is_training_state(name)}
        tf1.write_google_release(prefix, tensors, checkpoint.config, checkpoint.vocab_file)
    elif format == "huggingface":
        huggingface.write_huggingface(checkpoint, output_dir, label_names, multi_label)
    else:
        keras_hub_preset.write_keras_hub_preset(checkpoint, output_dir,
                                                multi_label=multi_label)


def convert(path, output_dir, format="google", label_names=None, exact_gelu=False,
            overwrite_output_dir=False, multi_label=None):
    """Converts the model at `path` (anything `read_checkpoint` reads) to `format`.

    Before anything is written, the tensors are checked against the config as loading them
    into a model checks them (`tf1.check_checkpoint`), and the vocab beside them against
    `vocab_size`. The output dir is guarded (`kbert.artifacts`): one writer at a time; it may
    not be or hold the input; a directory holding other files, or a finished conversion, is
    refused unless `overwrite_output_dir` (which removes the files of the conversion recorded
    there).

    Args:
        path: str. See `read_checkpoint`.
        output_dir: str. The directory to write.
        format: str. One of "google", "huggingface", "keras_hub". Defaults to "google".
        label_names: list of str. Hugging Face `id2label` of a classifier or tagger head,
            one per output; only with format "huggingface".
        exact_gelu: bool. See `read_checkpoint`. Defaults to False.
        overwrite_output_dir: bool. Replace what is in `output_dir`. Defaults to False.
        multi_label: bool or None. The classifier head is multi-label. Defaults to what the
            input records (a recipe's model.keras, Hugging Face's `problem_type`, ...).

    Example:
    ```python
    kbert.convert("mrpc_output", "mrpc_hf", format="huggingface")
    ```
    """
    _check_format(format)
    source = opening.open_model(path, exact_gelu=exact_gelu)
    checkpoint = source.google_checkpoint()
    # A foreign format's reader lets a head lack what its class may lack.
    tf1.check_checkpoint(checkpoint, () if source.kind == opening.GOOGLE
                         else huggingface.OPTIONAL_HEADS)
    _check_vocab(checkpoint, source.path)
    _check_label_names(checkpoint, format, label_names)
    multi_label = source.multi_label if multi_label is None else multi_label
    manifest = {"settings": {"format": format, "label_names": label_names,
                             "exact_gelu": exact_gelu, "multi_label": multi_label},
                "input": artifacts.fingerprint(checkpoint.prefix)}
    with artifacts.locked(output_dir):
        claim = artifacts.claim(output_dir, manifest, overwrite_output_dir=overwrite_output_dir,
                                inputs=[("input", path), ("input", checkpoint.prefix),
                                        ("vocabulary", checkpoint.vocab_file)])
        write_checkpoint(checkpoint, output_dir, format, label_names, multi_label)
        claim.finish()


def _check_format(format):
    if format not in FORMATS:
        raise ValueError(f"format {format!r}: expected one of {', '.join(FORMATS)}")


def _check_vocab(checkpoint, source):
    """The vocab beside the model (if any): well-formed, one token per embedding row."""
    if checkpoint.vocab_file is None:
        return
    vocab = vocab_lib.load_vocab(checkpoint.vocab_file)  # names a bad line
    if len(vocab) != checkpoint.config.vocab_size:
        raise ValueError(f"{checkpoint.vocab_file}: {len(vocab)} tokens, but {source} has "
                         f"vocab_size={checkpoint.config.vocab_size}; a model's vocab.txt "
                         "holds one token per row of its word-embedding table")


# The head whose outputs label names name -> its output weights [labels, hidden].
_LABELLED_HEADS = {"kbert>BertClassifier": "output_weights",
                   "kbert>BertTokenClassifier": "cls/ner/output_weights"}


def _check_label_names(checkpoint, format, label_names):
    """Label names only for a classifier's or tagger's outputs, one each, in Hugging Face's
    format (the only one that records them)."""
    if label_names is None:
        return
    shapes = checkpoint.shapes()
    head = tf1.find_head(shapes)
    if head not in _LABELLED_HEADS:
        has = f"a {head.split('>')[-1]} head" if head else "no head"
        raise ValueError(f"label_names (--label_names) name the outputs of a classifier or "
                         f"tagger head; {checkpoint.prefix} has {has}")
    if format != opening.HUGGINGFACE:
        raise ValueError(f"label_names (--label_names): the {format} format does not record "
                         "label names; only huggingface (--to=huggingface) does")
    outputs = shapes[_LABELLED_HEADS[head]][0]
    if len(label_names) != outputs:
        raise ValueError(f"label_names (--label_names): {len(label_names)} names for a head "
                         f"with {outputs} outputs")
