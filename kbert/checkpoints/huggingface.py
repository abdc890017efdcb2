"""Hugging Face BERT directories (safetensors) to Google checkpoints and back, heads included."""

import json
import os
import shutil

import numpy as np
from absl import logging
from safetensors import numpy as safetensors_numpy

from kbert import io
from kbert.checkpoints import tf1
from kbert.checkpoints import tf1_names
from kbert.config import BertConfig

# transformers names each Google variable by a rule (`_huggingface_name`), so the rows are
# tf1_names' Google names. PyTorch Linear weights are [out, in]; Google kernels are [in, out].
# `output_weights` is [labels, H] on both sides. `cls.predictions.decoder.weight` is the tied
# word table and has no row.
_LEAVES = {"kernel": "weight", "gamma": "weight", "beta": "bias", "output_weights": "weight",
           "output_bias": "bias", "word_embeddings": "word_embeddings.weight",
           "position_embeddings": "position_embeddings.weight",
           "token_type_embeddings": "token_type_embeddings.weight"}
# Google's task-head scopes -> transformers' module names (the classifier's has no scope).
_HEAD_SCOPES = (("cls/squad/", "qa_outputs/"), ("cls/ner/crf/", "crf/"),
                ("cls/ner/", "classifier/"), ("output_", "classifier/output_"))
# kbert's model (registered name, as `tf1.find_head` gives it) -> transformers class.
_ARCHITECTURES = {
    None: "BertModel",
    "kbert>BertPretrainer": "BertForPreTraining",
    "kbert>BertClassifier": "BertForSequenceClassification",
    "kbert>BertSpanLabeler": "BertForQuestionAnswering",
    "kbert>BertTokenClassifier": "BertForTokenClassification",
}
# The head rows of each transformers class. Those whose tensors are a subset of
# BertForPreTraining's (bert-base-uncased is saved as BertForMaskedLM with both heads) are
# read with its rows, absent heads allowed. transformers has no CRF: BertForTokenClassification
# ignores kbert's (it reports them as unexpected keys) and gives the CRF's unary potentials
# as logits; kbert reads them.
_TASK_HEADS = {architecture: tf1_names.HEADS.get(name, ())
               for name, architecture in _ARCHITECTURES.items()}
for _name in ("BertForMaskedLM", "BertLMHeadModel", "BertForNextSentencePrediction"):
    _TASK_HEADS[_name] = tf1_names.PRETRAINING_HEADS
# Head tensors that may be absent: the pretraining heads (in a subset class), a CRF.
OPTIONAL_HEADS = [google for google, _, _ in tf1_names.PRETRAINING_HEADS + tf1_names.TAGGING_HEAD
                   if not google.startswith("cls/ner/output_")]
# Heads that never read the pooled output: transformers builds them without a pooler.
_NO_POOLER = ("BertForQuestionAnswering", "BertForTokenClassification")
_POOLER = ("pooler.dense.weight", "pooler.dense.bias")
# Buffers and tied copies that carry no weights of their own.
_IGNORED = ("embeddings.position_ids", "cls.predictions.decoder.weight",
            "cls.predictions.decoder.bias")

# Hugging Face "hidden_act" -> Google. HF "gelu" is erf GELU; Google's "gelu" is the tanh
# approximation, which is HF's "gelu_new" (and "gelu_pytorch_tanh"), so a kbert model keeps
# its outputs in transformers. "gelu_exact" keeps HF's erf outputs but only kbert reads it.
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "relu": "relu", "tanh": "tanh", "linear": "linear"}
_TO_HUGGINGFACE_ACTIVATION = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu",
                              "tanh": "tanh", "linear": "linear"}

HF_WEIGHTS = "model.safetensors"
HF_CONFIG = "config.json"
# transformers' `problem_type` of a classifier with independent sigmoid outputs.
MULTI_LABEL_PROBLEM = "multi_label_classification"


def _table(num_layers, architecture):
    """(Hugging Face name without "bert.", Google name, transpose?) of each tensor of
    `architecture` with `num_layers` layers."""
    names = [google for google, _, _ in tf1_names.ENCODER]
    names += [google.format(i=i) for i in range(num_layers)
              for google, _, _ in tf1_names.ENCODER_LAYER]
    names += [google for google, _, _ in _TASK_HEADS[architecture]]
    return [(hf_name, google, transpose) for google in names
            for hf_name, transpose in [_huggingface_name(google)]]


def _huggingface_name(google_name):
    """(transformers' name of the Google variable `google_name`, whether it is transposed):
    `bert/encoder/layer_0/attention/self/query/kernel` ->
    (`encoder.layer.0.attention.self.query.weight`, True)."""
    name = google_name.removeprefix("bert/")
    for google_scope, scope in _HEAD_SCOPES:
        if name.startswith(google_scope):
            name = scope + name.removeprefix(google_scope)
            break
    *path, leaf = name.replace("layer_", "layer/").split("/")
    return ".".join([*path, _LEAVES.get(leaf, leaf)]), leaf == "kernel"


def _hf_name(hf_name):
    """The name in the safetensors file: the encoder's under "bert.", heads at the top."""
    return hf_name if hf_name.startswith(("cls.", "classifier.", "qa_outputs.", "crf.")) \
        else "bert." + hf_name


def huggingface_config_to_google(hf_config, exact_gelu=False, source=HF_CONFIG):
    """Returns a `BertConfig` for a Hugging Face BERT `config.json` dict."""
    act = hf_config.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ValueError(f"{source}: hidden_act {act!r} has no Google equivalent; "
                         f"expected one of {sorted(_ACTIVATIONS)}")
    values = dict(hf_config, hidden_act="gelu_exact" if exact_gelu and act == "gelu"
                  else _ACTIVATIONS[act])
    if act == "gelu" and not exact_gelu:
        # The documented default (every Google-format port does this), so not a warning.
        logging.info("%s: hidden_act 'gelu' (erf) written as Google's 'gelu' (tanh "
                     "approximation), as Google's code defines it; outputs differ from "
                     "PyTorch by ~1e-3. Use exact_gelu to keep erf (kbert-only).", source)
    return BertConfig.from_dict(values, source=source)


def read_huggingface(hf_dir, exact_gelu=False, config=None):
    """Reads a Hugging Face BERT directory as an in-memory Google checkpoint, head included.

    The head comes from `architectures` in `config.json`: BertModel, BertForPreTraining,
    BertForSequenceClassification (-> `output_weights`), BertForQuestionAnswering
    (-> `cls/squad/*`) or BertForTokenClassification (-> `cls/ner/*`). A question-answering
    or token-classification model saved by transformers has no pooler; it gets a zero one
    (those heads never read it).

    Args:
        hf_dir: str. Holds `model.safetensors`, `config.json` and (optionally) `vocab.txt`;
            weight names with or without the "bert." prefix.
        exact_gelu: bool. Keep HF's erf GELU as "gelu_exact". Defaults to False.
        config: `BertConfig` or None. `huggingface_config_to_google`'s of this directory,
            when the caller has it (its note on the GELU is then not logged again).

    Returns:
        `tf1.GoogleCheckpoint` (in memory).
    """
    config_path = os.path.join(hf_dir, HF_CONFIG)
    weights_path = os.path.join(hf_dir, HF_WEIGHTS)
    vocab_path = os.path.join(hf_dir, tf1.VOCAB_FILE)
    for path in (config_path, weights_path):
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found (expected a Hugging Face BERT directory)")
    hf_config = read_config(hf_dir)
    config = config or huggingface_config_to_google(hf_config, exact_gelu, source=config_path)
    architecture = (hf_config.get("architectures") or ["BertForPreTraining"])[0]
    if architecture not in _TASK_HEADS:
        raise ValueError(f"{config_path}: architectures {architecture!r} is not supported; "
                         f"expected one of {sorted(_TASK_HEADS)}")
    weights = {k.removeprefix("bert."): v for k, v in
               safetensors_numpy.load_file(weights_path).items()}
    if architecture in _NO_POOLER and _POOLER[0] not in weights:
        hidden = config.hidden_size
        weights[_POOLER[0]] = np.zeros((hidden, hidden), np.float32)
        weights[_POOLER[1]] = np.zeros((hidden,), np.float32)
        logging.info("%s: no pooler (%s has none); a zero pooler is written", weights_path,
                     architecture)
    tensors = {}
    optional = {_huggingface_name(google)[0] for google in OPTIONAL_HEADS}
    for hf_name, google, transpose in _table(config.num_hidden_layers, architecture):
        if hf_name in weights:
            value = weights.pop(hf_name).astype(np.float32)
            tensors[google] = np.ascontiguousarray(value.T) if transpose else value
        elif hf_name not in optional:
            raise ValueError(f"{weights_path}: missing tensor {hf_name!r} (for {architecture})")
    unknown = sorted(k for k in weights if k not in _IGNORED)
    if unknown:
        raise ValueError(f"{weights_path}: tensors with no Google equivalent in "
                         f"{architecture}: {unknown}")
    return tf1.GoogleCheckpoint.from_tensors(tensors, config, weights_path,
                                             vocab_path if os.path.exists(vocab_path) else None)


def write_huggingface(checkpoint, output_dir, label_names=None, multi_label=False):
    """Writes `model.safetensors`, `config.json`, `vocab.txt` for transformers' BERT classes.

    The architecture follows the checkpoint's head (see `read_huggingface`). A classifier's
    `problem_type` is "multi_label_classification" with `multi_label` (transformers then
    trains it with BCEWithLogitsLoss), else "regression" for one output and
    "single_label_classification" for more.

    Args:
        checkpoint: `tf1.GoogleCheckpoint` (a release, a fine-tuned model, or in memory).
        output_dir: str. Receives the Hugging Face files (encoder names with "bert.").
        label_names: list of str. `id2label` of a classifier or token classifier. Defaults
            to "LABEL_0", "LABEL_1", ...
        multi_label: bool. The classifier head is multi-label (`BertClassifier.multi_label`).
            Defaults to False.
    """
    shapes = checkpoint.shapes()
    architecture = _ARCHITECTURES[tf1.find_head(shapes)]
    if multi_label and architecture != "BertForSequenceClassification":
        raise ValueError(f"{checkpoint.prefix}: multi_label applies to a classifier head, not "
                         f"to {architecture}")
    weights = {}
    for hf_name, google, transpose in _table(checkpoint.config.num_hidden_layers, architecture):
        if google in shapes:
            value = checkpoint.tensor(google)
            weights[_hf_name(hf_name)] = np.ascontiguousarray(value.T) if transpose else value
    config = checkpoint.config.to_dict()
    config.update(model_type="bert", architectures=[architecture],
                  hidden_act=_TO_HUGGINGFACE_ACTIVATION[config["hidden_act"]],
                  layer_norm_eps=1e-12)
    if "classifier.weight" in weights:
        num_labels = weights["classifier.weight"].shape[0]
        names = list(label_names) if label_names else [f"LABEL_{i}" for i in range(num_labels)]
        if len(names) != num_labels:
            raise ValueError(f"{len(names)} label names for a head with {num_labels} outputs")
        config.update(id2label={str(i): name for i, name in enumerate(names)},
                      label2id={name: i for i, name in enumerate(names)})
        if multi_label:
            config["problem_type"] = MULTI_LABEL_PROBLEM
        elif architecture == "BertForSequenceClassification":
            config["problem_type"] = ("regression" if num_labels == 1
                                      else "single_label_classification")
    with io.atomic_files(output_dir) as tmp:
        with open(os.path.join(tmp, HF_WEIGHTS), "wb") as f:
            f.write(safetensors_numpy.save(weights, metadata={"format": "pt"}))
        with open(os.path.join(tmp, HF_CONFIG), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        if checkpoint.vocab_file:
            shutil.copyfile(checkpoint.vocab_file, os.path.join(tmp, tf1.VOCAB_FILE))
    logging.info("Wrote %s (%d tensors) to %s", architecture, len(weights), output_dir)


def convert_huggingface_to_google(hf_dir, output_dir, exact_gelu=False) -> str:
    """Writes a Google release directory from a Hugging Face BERT directory, head included.

    Args:
        hf_dir: str. Holds `model.safetensors`, `config.json` and `vocab.txt`; weight names
            with or without the "bert." prefix.
        output_dir: str. Receives `bert_model.ckpt.*`, `bert_config.json`, `vocab.txt`.
        exact_gelu: bool. Keep HF's erf GELU as "gelu_exact". Defaults to False.

    Returns:
        The checkpoint prefix.
    """
    source = read_huggingface(hf_dir, exact_gelu)
    prefix = os.path.join(output_dir, tf1.RELEASE_PREFIX)
    tf1.write_google_release(prefix, source.reader.tensors, source.config, source.vocab_file)
    logging.info("Wrote %d tensors to %s", len(source.shapes()), prefix)
    return prefix


def convert_google_to_huggingface(google_path, output_dir, label_names=None,
                                  multi_label=False) -> None:
    """Writes `model.safetensors`, `config.json`, `vocab.txt` from a Google checkpoint.

    Args:
        google_path: str. Release directory, release name or checkpoint prefix (config
            beside it); a fine-tuned head becomes the matching transformers class.
        output_dir: str. Receives the Hugging Face files.
        label_names: list of str. `id2label` of a classifier head. Defaults to LABEL_i.
        multi_label: bool. The classifier head is multi-label; Google's format does not
            record it. Defaults to False.
    """
    write_huggingface(tf1.GoogleCheckpoint.open(google_path), output_dir, label_names,
                      multi_label)


def is_multi_label(hf_dir):
    """Whether the `config.json` in `hf_dir` has `problem_type` "multi_label_classification"."""
    return read_config(hf_dir).get("problem_type") == MULTI_LABEL_PROBLEM


def read_config(hf_dir):
    """The `config.json` of a Hugging Face directory as a dict; bad JSON names the file, line
    and column."""
    path = os.path.join(hf_dir, HF_CONFIG)
    with open(path, encoding="utf-8-sig") as f:
        try:
            config = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column "
                             f"{e.colno})") from None
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(config).__name__}")
    return config
