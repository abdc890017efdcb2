"""Every kbert head on the tiny config, with random weights everywhere (biases, CRF included)."""

import keras
import numpy as np

import kbert
from tests.conftest import TINY_CONFIG
from tests.conftest import TINY_VOCAB

BUILDERS = {
    "encoder": lambda encoder: encoder,
    "pretrainer": kbert.BertPretrainer,
    "classifier": lambda encoder: kbert.BertClassifier(encoder, 3),
    "regression": lambda encoder: kbert.BertClassifier(encoder, 1),
    "multi_label": lambda encoder: kbert.BertClassifier(encoder, 4, multi_label=True),
    "span_labeler": kbert.BertSpanLabeler,
    "tagger": lambda encoder: kbert.BertTokenClassifier(encoder, 5),
    "tagger_crf": lambda encoder: kbert.BertTokenClassifier(encoder, 5, use_crf=True),
}


def make_model(kind, seed=0):
    """A kbert model of `kind` whose every variable is random (no zero bias hides a swap)."""
    keras.utils.set_random_seed(seed)
    model = BUILDERS[kind](kbert.BertEncoder(**kbert.BertConfig(**TINY_CONFIG).encoder_kwargs()))
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        noise = rng.normal(scale=0.2, size=variable.shape).astype("float32")
        variable.assign(noise + 1.0 if variable.path.endswith("gamma") else noise)
    return model


def write_vocab(directory):
    path = directory / "vocab.txt"
    path.write_text("".join(token + "\n" for token in TINY_VOCAB), encoding="utf-8")
    return str(path)


def inputs(batch=2, seq=9, seed=1):
    """Two-segment inputs, the second row padded: [CLS] a [SEP] b [SEP] pad."""
    rng = np.random.default_rng(seed)
    x = {"token_ids": rng.integers(5, TINY_CONFIG["vocab_size"], (batch, seq)).astype("int32"),
         "segment_ids": np.zeros((batch, seq), "int32"),
         "padding_mask": np.ones((batch, seq), "int32")}
    x["token_ids"][:, 0] = 2
    x["token_ids"][:, [3, seq - 1]] = 3
    x["segment_ids"][:, 4:] = 1
    x["padding_mask"][1, seq - 2:] = 0
    x["token_ids"][1, seq - 2:] = 0
    x["segment_ids"][1, seq - 2:] = 0
    return x


def outputs(model, x):
    """The model's outputs as a dict of numpy arrays."""
    if isinstance(model, kbert.BertPretrainer):
        x = dict(x, mask_positions=np.array([[1, 2], [5, 6]], "int32"))
    out = model(x)
    if not isinstance(out, dict):
        out = {"output": out}
    return {k: np.asarray(v) for k, v in out.items() if k != "encoder_outputs"}


def weights(model):
    """Dict of variable path -> value (tied variables once)."""
    return {v.path: np.asarray(v.numpy()) for v in model.weights}
