"""BertEncoder(check_token_ids=True): ids outside the table stop the model on every path."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.config import BertConfig
from kbert.models.encoder import BertEncoder
from tests.conftest import TINY_CONFIG


def _inputs(token_ids):
    token_ids = np.asarray(token_ids, "int32")
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": np.ones_like(token_ids)}


def test_out_of_range_ids_raise_in_eager_graph_and_jit_compiled_predict():
    kwargs = BertConfig(**TINY_CONFIG).encoder_kwargs()
    keras.utils.set_random_seed(0)
    plain = BertEncoder(**kwargs)
    checked = BertEncoder(**kwargs, check_token_ids=True)
    checked.set_weights(plain.get_weights())
    good = _inputs([[2, 5, 30, 3], [2, 0, 1, 3]])
    np.testing.assert_array_equal(checked(good)["sequence_output"],
                                  plain(good)["sequence_output"])
    np.testing.assert_array_equal(checked.pooled_output(good), plain.pooled_output(good))
    assert checked.get_config()["check_token_ids"] is True
    assert BertEncoder.from_config(checked.get_config()).check_token_ids

    for bad in ([[2, 5, 31, 3]], [[2, -1, 5, 3]]):
        with pytest.raises(tf.errors.InvalidArgumentError, match="token id"):
            checked(_inputs(bad))
        with pytest.raises(tf.errors.InvalidArgumentError, match="token id"):
            tf.function(checked.pooled_output)(_inputs(bad))
        # XLA would clamp the gather and return outputs; the check keeps Keras off XLA.
        checked.compile(jit_compile=True)
        assert not checked.jit_compile
        with pytest.raises(tf.errors.InvalidArgumentError, match="token id"):
            checked.predict(_inputs(bad), verbose=0)
