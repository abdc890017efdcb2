"""Convert Hugging Face BERT checkpoints (safetensors) to Google release directories and back."""

import json
import os
import shutil

import numpy as np
from absl import logging
from safetensors import numpy as safetensors_numpy

from kbert import io
from kbert.checkpoints import tf1
from kbert.config import BertConfig

# (Hugging Face name without the "bert." prefix, Google name, transpose?). PyTorch Linear
# weights are [out, in]; Google kernels are [in, out]. `cls.seq_relationship.weight` is [2, H]
# on both sides. `cls.predictions.decoder.weight` is the tied word table and has no row.
_EMBEDDINGS = (
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("pooler.dense.weight", "bert/pooler/dense/kernel", True),
    ("pooler.dense.bias", "bert/pooler/dense/bias", False),
)
_LAYER = (
    ("attention.self.query.weight", "attention/self/query/kernel", True),
    ("attention.self.query.bias", "attention/self/query/bias", False),
    ("attention.self.key.weight", "attention/self/key/kernel", True),
    ("attention.self.key.bias", "attention/self/key/bias", False),
    ("attention.self.value.weight", "attention/self/value/kernel", True),
    ("attention.self.value.bias", "attention/self/value/bias", False),
    ("attention.output.dense.weight", "attention/output/dense/kernel", True),
    ("attention.output.dense.bias", "attention/output/dense/bias", False),
    ("attention.output.LayerNorm.weight", "attention/output/LayerNorm/gamma", False),
    ("attention.output.LayerNorm.bias", "attention/output/LayerNorm/beta", False),
    ("intermediate.dense.weight", "intermediate/dense/kernel", True),
    ("intermediate.dense.bias", "intermediate/dense/bias", False),
    ("output.dense.weight", "output/dense/kernel", True),
    ("output.dense.bias", "output/dense/bias", False),
    ("output.LayerNorm.weight", "output/LayerNorm/gamma", False),
    ("output.LayerNorm.bias", "output/LayerNorm/beta", False),
)
_HEADS = (
    ("cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("cls.predictions.transform.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma",
     False),
    ("cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta",
     False),
    ("cls.predictions.bias", "cls/predictions/output_bias", False),
    ("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", False),
    ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", False),
)
# Buffers and tied copies that carry no weights of their own.
_IGNORED = ("embeddings.position_ids", "cls.predictions.decoder.weight",
            "cls.predictions.decoder.bias")

# Hugging Face "hidden_act" -> Google. HF "gelu" is erf GELU; Google's "gelu" is the tanh
# approximation. "gelu_exact" keeps HF's outputs exactly but only kbert reads it.
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "relu": "relu", "tanh": "tanh", "linear": "linear"}
_TO_HUGGINGFACE_ACTIVATION = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu",
                              "tanh": "tanh", "linear": "linear"}

HF_WEIGHTS = "model.safetensors"
HF_CONFIG = "config.json"


def _table(num_layers):
    rows = list(_EMBEDDINGS)
    for i in range(num_layers):
        rows += [(f"encoder.layer.{i}.{h}", f"bert/encoder/layer_{i}/{g}", t) for h, g, t in _LAYER]
    return rows + list(_HEADS)


def huggingface_config_to_google(hf_config, exact_gelu=False, source=HF_CONFIG):
    """Returns a `BertConfig` for a Hugging Face BERT `config.json` dict."""
    act = hf_config.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ValueError(f"{source}: hidden_act {act!r} has no Google equivalent; "
                         f"expected one of {sorted(_ACTIVATIONS)}")
    values = dict(hf_config, hidden_act="gelu_exact" if exact_gelu and act == "gelu"
                  else _ACTIVATIONS[act])
    if act == "gelu" and not exact_gelu:
        logging.warning("%s: hidden_act 'gelu' (erf) written as Google's 'gelu' (tanh "
                        "approximation), as Google's code defines it; outputs differ from "
                        "PyTorch by ~1e-3. Use exact_gelu to keep erf (kbert-only).", source)
    return BertConfig.from_dict(values, source=source)


def convert_huggingface_to_google(hf_dir, output_dir, exact_gelu=False) -> str:
    """Writes a Google release directory from a Hugging Face BERT directory.

    Args:
        hf_dir: str. Holds `model.safetensors`, `config.json` and `vocab.txt`; weight names
            with or without the "bert." prefix.
        output_dir: str. Receives `bert_model.ckpt.*`, `bert_config.json`, `vocab.txt`.
        exact_gelu: bool. Keep HF's erf GELU as "gelu_exact". Defaults to False.

    Returns:
        The checkpoint prefix.
    """
    config_path = os.path.join(hf_dir, HF_CONFIG)
    weights_path = os.path.join(hf_dir, HF_WEIGHTS)
    vocab_path = os.path.join(hf_dir, tf1.VOCAB_FILE)
    for path in (config_path, weights_path, vocab_path):
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: not found (expected a Hugging Face BERT directory)")
    with open(config_path, encoding="utf-8") as f:
        config = huggingface_config_to_google(json.load(f), exact_gelu, source=config_path)
    weights = {k.removeprefix("bert."): v for k, v in
               safetensors_numpy.load_file(weights_path).items()}
    tensors = {}
    for hf_name, google, transpose in _table(config.num_hidden_layers):
        if hf_name in weights:
            value = weights.pop(hf_name).astype(np.float32)
            tensors[google] = np.ascontiguousarray(value.T) if transpose else value
        elif not hf_name.startswith("cls."):
            raise ValueError(f"{weights_path}: missing tensor {hf_name!r}")
    unknown = sorted(k for k in weights if k not in _IGNORED)
    if unknown:
        raise ValueError(f"{weights_path}: tensors with no Google equivalent: {unknown}")
    prefix = os.path.join(output_dir, tf1.RELEASE_PREFIX)
    tf1.write_tf1_checkpoint(prefix, tensors)
    with io.atomic_write(os.path.join(output_dir, tf1.CONFIG_FILE)) as f:
        f.write(config.to_json_string())
    with io.atomic_write(os.path.join(output_dir, tf1.VOCAB_FILE), "wb") as f, \
            open(vocab_path, "rb") as src:
        shutil.copyfileobj(src, f)
    logging.info("Wrote %d tensors to %s", len(tensors), prefix)
    return prefix


def convert_google_to_huggingface(google_path, output_dir) -> None:
    """Writes `model.safetensors`, `config.json`, `vocab.txt` from a Google checkpoint.

    Args:
        google_path: str. Release directory or checkpoint prefix (config beside it).
        output_dir: str. Receives the Hugging Face files (names with the "bert." prefix).
    """
    source = tf1.GoogleCheckpoint.open(google_path)
    shapes = source.shapes()
    weights = {}
    for hf_name, google, transpose in _table(source.config.num_hidden_layers):
        if google in shapes:
            value = source.tensor(google)
            weights["bert." + hf_name if not hf_name.startswith("cls.") else hf_name] = (
                np.ascontiguousarray(value.T) if transpose else value)
    config = source.config.to_dict()
    config.update(model_type="bert", architectures=["BertForPreTraining"],
                  hidden_act=_TO_HUGGINGFACE_ACTIVATION[config["hidden_act"]],
                  layer_norm_eps=1e-12)
    os.makedirs(output_dir, exist_ok=True)
    with io.atomic_write(os.path.join(output_dir, HF_WEIGHTS), "wb") as f:
        f.write(safetensors_numpy.save(weights, metadata={"format": "pt"}))
    with io.atomic_write(os.path.join(output_dir, HF_CONFIG)) as f:
        json.dump(config, f, indent=2)
    if source.vocab_file:
        with io.atomic_write(os.path.join(output_dir, tf1.VOCAB_FILE), "wb") as f, \
                open(source.vocab_file, "rb") as src:
            shutil.copyfileobj(src, f)
