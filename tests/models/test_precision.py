"""with_compute_dtype: a bfloat16-computing copy with the same float32 weights."""

import keras
import numpy as np
import pytest

import kbert
from kbert.models.precision import with_compute_dtype
from tests.conftest import TINY_CONFIG


def _classifier():
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(**kbert.BertConfig(**TINY_CONFIG).encoder_kwargs())
    return kbert.BertClassifier(encoder, num_classes=3)


def _inputs():
    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(0, 31, (4, 7)).astype("int32"),
            "segment_ids": rng.integers(0, 2, (4, 7)).astype("int32"),
            "padding_mask": np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4, [1] * 7],
                                     "int32")}


def test_bfloat16_copy_keeps_float32_weights_and_computes_in_bfloat16():
    model = _classifier()
    copy = with_compute_dtype(model, "bfloat16")
    assert type(copy) is kbert.BertClassifier and copy is not model
    assert [v.dtype for v in copy.weights] == ["float32"] * len(model.weights)
    for a, b in zip(model.get_weights(), copy.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert copy.encoder.get_layer("transformer_layer_0").compute_dtype == "bfloat16"
    assert model.encoder.get_layer("transformer_layer_0").compute_dtype == "float32"
    x = _inputs()
    full = model.predict(x, verbose=0)
    half = copy.predict(x, verbose=0)
    assert half.dtype == np.float32  # logits pinned to float32
    # bfloat16 has an 8-bit mantissa: close to float32, but not equal (it did compute in it).
    np.testing.assert_allclose(half, full, atol=0.05 * np.abs(full).max())
    assert not np.array_equal(half, full)


def test_float32_is_the_model_itself_and_bad_dtype_is_refused():
    model = _classifier()
    assert with_compute_dtype(model, "float32") is model
    with pytest.raises(ValueError, match="compute_dtype must be one of.*'int4'"):
        with_compute_dtype(model, "int4")
