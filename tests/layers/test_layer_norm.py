"""The fused training LayerNorm against Keras' `LayerNormalization`: values and the gradients
for the input, gamma and beta, in float32 and under mixed bfloat16."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.layers import layer_norm


@pytest.mark.parametrize("policy, tolerance", [("float32", 2e-5), ("mixed_bfloat16", 2e-2)])
def test_values_and_gradients_are_keras_layer_normalizations(policy, tolerance):
    keras.utils.set_random_seed(0)
    layer = keras.layers.LayerNormalization(epsilon=1e-12, dtype=policy)
    x = tf.cast(tf.random.normal([3, 5, 16]) * 3 + 1, layer.compute_dtype)
    layer.build(x.shape)
    layer.gamma.assign(np.random.default_rng(0).normal(1, 0.5, 16))
    layer.beta.assign(np.random.default_rng(1).normal(0, 0.5, 16))
    upstream = tf.cast(tf.random.normal([3, 5, 16]), layer.compute_dtype)

    def run(fused):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = layer_norm.layer_norm(layer, x, training=True) if fused else layer(x)
        return out, tape.gradient(out, [x, layer.gamma, layer.beta], output_gradients=upstream)

    (fused_out, fused_grads), (keras_out, keras_grads) = run(True), run(False)
    assert fused_out.dtype == keras_out.dtype
    np.testing.assert_allclose(tf.cast(fused_out, tf.float32), tf.cast(keras_out, tf.float32),
                               atol=tolerance, rtol=tolerance)
    for fused, reference in zip(fused_grads, keras_grads, strict=True):
        assert fused.dtype == reference.dtype
        np.testing.assert_allclose(tf.cast(fused, tf.float32), tf.cast(reference, tf.float32),
                                   atol=tolerance * 10, rtol=tolerance)
    # Inference is Keras' own layer.
    np.testing.assert_array_equal(layer_norm.layer_norm(layer, x, training=False), keras_out)
