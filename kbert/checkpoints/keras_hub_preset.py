"""keras-hub BERT preset directories to Google checkpoints and back, through keras-hub's API.

A preset is written by building keras-hub's own `BertBackbone` (and `BertTextClassifier` for
a classifier head), assigning the weights and calling its `save_to_preset`, so any keras-hub
version that loads its own presets loads these. keras-hub's BERT (0.32) computes the same
function as Google's: tanh-approximated GELU (`gelu_approximate`, fixed, not configurable),
LayerNorm epsilon 1e-12, post-LN blocks; so a model with `hidden_act` "gelu" keeps its outputs.
What keras-hub cannot hold: another `hidden_act` (refused), a separate attention dropout and
the initializer range (training-only; kept in the preset's `bert_config.json`, which
keras-hub ignores), and heads other than the classifier (span, token classification with or
without CRF, pretraining): those are written under their Google names to `kbert_head.safetensors`,
which kbert reads back and keras-hub ignores. keras-hub's classifier has no multi-label form
(one softmax decision; its default loss is sparse categorical cross-entropy): a multi-label
head is written as the same `BertTextClassifier` of logits, and `kbert_task.json` records
`multi_label` for kbert.
"""

import json
import os

import keras_hub
import numpy as np
from absl import logging
from safetensors import numpy as safetensors_numpy

from kbert import io
from kbert.checkpoints import tf1
from kbert.checkpoints import tf1_names
from kbert.config import BertConfig

# kbert's Keras path prefixes -> keras-hub BertBackbone's; the transformer layers' variables
# have the same paths and layouts in both.
_RENAMES = (
    ("embeddings/token_embedding/", "token_embedding/"),
    ("embeddings/position_embedding/", "position_embedding/"),
    ("embeddings/segment_embedding/", "segment_embedding/"),
    ("embeddings/layer_norm/", "embeddings_layer_norm/"),
    ("pooler/", "pooled_dense/"),
    ("transformer_layer_", "transformer_layer_"),
)
CLASSIFIER_HEAD = (("output_weights", "logits/kernel"), ("output_bias", "logits/bias"))
EXTRA_HEAD_FILE = "kbert_head.safetensors"
KBERT_TASK_FILE = "kbert_task.json"  # {"multi_label": true}; keras-hub ignores it
TASK_FILE = "task.json"
VOCABULARY = os.path.join("assets", "tokenizer", "vocabulary.txt")


def _keras_hub_path(kbert_path):
    for ours, theirs in _RENAMES:
        if kbert_path.startswith(ours):
            return theirs + kbert_path[len(ours):]
    raise ValueError(f"{kbert_path}: no keras-hub BertBackbone variable for it")


def _is_cased(vocab_file):
    # Google's cased vocabularies hold capitalised pieces ("The"); uncased ones none.
    with open(vocab_file, encoding="utf-8") as f:
        return any(token[:1] != "[" and token != token.lower() for token in f.read().split())


def write_keras_hub_preset(checkpoint, output_dir, lowercase=None, multi_label=False):
    """Writes a keras-hub preset directory from a Google checkpoint, its head included.

    `keras_hub.models.BertBackbone.from_preset(output_dir)` loads it; a classifier head
    (`output_weights`) is saved as a `BertTextClassifier` with its preprocessor, which
    `keras_hub.models.BertTextClassifier.from_preset(output_dir)` loads.

    Args:
        checkpoint: `tf1.GoogleCheckpoint` (a release, a fine-tuned model, or in memory).
        output_dir: str. The preset directory to write.
        lowercase: bool. The tokenizer lowercases. Defaults to guessing from the vocabulary
            (a cased Google vocabulary holds capitalised pieces).
        multi_label: bool. The classifier head is multi-label (recorded in `kbert_task.json`).
            Defaults to False.
    """
    config = checkpoint.config
    if config.hidden_act != "gelu":
        raise ValueError(f"{checkpoint.prefix}: hidden_act {config.hidden_act!r} cannot be "
                         "carried to keras-hub, whose BertBackbone always uses tanh GELU "
                         "(Google's 'gelu')")
    shapes = checkpoint.shapes()
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    variables = {v.path: v for v in backbone.weights}
    for google, kbert_path, transform in tf1.encoder_rows(config.num_hidden_layers):
        variable = variables.pop(_keras_hub_path(kbert_path))
        if google not in shapes:
            raise ValueError(f"{checkpoint.prefix}: missing {google}")
        variable.assign(tf1.to_keras(transform, checkpoint.tensor(google),
                                      tuple(variable.shape)))
    if variables:
        raise ValueError(f"keras-hub BertBackbone variables with no Google name: "
                         f"{sorted(variables)}")
    head = tf1.find_head(shapes)
    if multi_label and head != "kbert>BertClassifier":
        raise ValueError(f"{checkpoint.prefix}: multi_label applies to a classifier head, not "
                         f"to {head or 'an encoder'}")
    preprocessor = None
    if checkpoint.vocab_file:
        if lowercase is None:
            lowercase = not _is_cased(checkpoint.vocab_file)
        tokenizer = keras_hub.models.BertTokenizer(vocabulary=checkpoint.vocab_file,
                                                   lowercase=lowercase)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
            tokenizer, sequence_length=config.max_position_embeddings)
    with io.atomic_files(output_dir) as tmp:
        if head == "kbert>BertClassifier":
            model = keras_hub.models.BertTextClassifier(
                backbone, num_classes=shapes["output_weights"][0], preprocessor=preprocessor,
                dropout=config.hidden_dropout_prob)
            model.output_dense.kernel.assign(checkpoint.tensor("output_weights").T)
            model.output_dense.bias.assign(checkpoint.tensor("output_bias"))
            model.save_to_preset(tmp)
            if multi_label:
                with open(os.path.join(tmp, KBERT_TASK_FILE), "w", encoding="utf-8") as f:
                    json.dump({"multi_label": True}, f)
        else:
            backbone.save_to_preset(tmp)
            if preprocessor is not None:
                preprocessor.tokenizer.save_to_preset(tmp)
            if head is not None:
                rows = tf1_names.HEADS[head]
                extra = {g: np.ascontiguousarray(checkpoint.tensor(g))
                         for g, _, _ in rows if g in shapes}
                with open(os.path.join(tmp, EXTRA_HEAD_FILE), "wb") as f:
                    f.write(safetensors_numpy.save(extra, metadata={"kbert_head": head}))
        with open(os.path.join(tmp, tf1.CONFIG_FILE), "w", encoding="utf-8") as f:
            f.write(config.to_json_string())
    logging.info("Wrote a keras-hub preset (%s) to %s", head or "backbone", output_dir)


def read_keras_hub_preset(preset_dir):
    """Reads a local keras-hub BERT preset directory as an in-memory Google checkpoint.

    Args:
        preset_dir: str. A directory that `keras_hub.models.BertBackbone.from_preset` loads
            (keras-hub's own, or one `write_keras_hub_preset` wrote). A `BertTextClassifier`
            preset gives a classifier head; a `kbert_head.safetensors` beside it, its head.

    Returns:
        `tf1.GoogleCheckpoint` (in memory), with the preset's vocabulary if it has one.
    """
    preset_dir = os.fspath(preset_dir)
    config = read_config(preset_dir)
    backbone = keras_hub.models.BertBackbone.from_preset(preset_dir)
    variables = {v.path: v for v in backbone.weights}
    tensors = {}
    for google, kbert_path, transform in tf1.encoder_rows(config.num_hidden_layers):
        value = np.asarray(variables.pop(_keras_hub_path(kbert_path)).numpy(), np.float32)
        tensors[google] = tf1.to_google(transform, value)
    if variables:
        raise ValueError(f"{preset_dir}: backbone variables with no Google name: "
                         f"{sorted(variables)}")
    task_path = os.path.join(preset_dir, TASK_FILE)
    if os.path.exists(task_path):
        with open(task_path, encoding="utf-8") as f:
            task = json.load(f)
        if task.get("class_name") != "BertTextClassifier":
            raise ValueError(f"{task_path}: task {task.get('class_name')!r} is not supported; "
                             "expected BertTextClassifier (or a backbone-only preset)")
        classifier = keras_hub.models.BertTextClassifier.from_preset(preset_dir,
                                                                     load_weights=True)
        tensors["output_weights"] = np.ascontiguousarray(
            np.asarray(classifier.output_dense.kernel.numpy(), np.float32).T)
        tensors["output_bias"] = np.asarray(classifier.output_dense.bias.numpy(), np.float32)
    extra_path = os.path.join(preset_dir, EXTRA_HEAD_FILE)
    if os.path.exists(extra_path):
        tensors.update(safetensors_numpy.load_file(extra_path))
    vocab = os.path.join(preset_dir, VOCABULARY)
    return tf1.GoogleCheckpoint.from_tensors(tensors, config, preset_dir,
                                             vocab if os.path.exists(vocab) else None)



def read_config(preset_dir):
    """The `BertConfig` of the preset at `preset_dir`, read without building the backbone.

    A preset kbert wrote holds it whole (`bert_config.json`); keras-hub's own has one dropout
    rate for both and no initializer range (Google's is taken), in the backbone's config.
    """
    backbone_path = os.path.join(preset_dir, "config.json")
    if not os.path.exists(backbone_path):
        raise FileNotFoundError(f"{backbone_path}: not found (expected a keras-hub preset "
                                "directory)")
    config_path = os.path.join(preset_dir, tf1.CONFIG_FILE)
    if os.path.exists(config_path):
        return BertConfig.from_json_file(config_path)
    with open(backbone_path, encoding="utf-8") as f:
        kwargs = json.load(f)["config"]
    return BertConfig(
        vocab_size=kwargs["vocabulary_size"], hidden_size=kwargs["hidden_dim"],
        num_hidden_layers=kwargs["num_layers"], num_attention_heads=kwargs["num_heads"],
        intermediate_size=kwargs["intermediate_dim"], hidden_act="gelu",
        hidden_dropout_prob=kwargs["dropout"], attention_probs_dropout_prob=kwargs["dropout"],
        max_position_embeddings=kwargs["max_sequence_length"],
        type_vocab_size=kwargs["num_segments"])


def is_multi_label(preset_dir):
    """Whether the preset at `preset_dir` holds a multi-label classifier (`kbert_task.json`)."""
    path = os.path.join(preset_dir, KBERT_TASK_FILE)
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        return bool(json.load(f).get("multi_label"))
