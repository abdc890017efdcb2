"""The fused training GELU against TensorFlow's `tf.nn.gelu(approximate=True)` and its
automatic gradient, and its use in the transformer layer when training."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.layers import gelu
from kbert.layers.transformer import BertTransformerLayer


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-6), ("bfloat16", 1e-2)])
def test_values_and_gradient_are_tf_nn_gelus(dtype, tolerance):
    x = tf.constant(np.linspace(-9, 9, 301).reshape(7, 43), dtype)
    upstream = tf.constant(np.random.default_rng(0).normal(size=(7, 43)), dtype)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        fused = gelu.gelu_approximate_for_training(x)
        reference = tf.nn.gelu(tf.cast(x, tf.float32), approximate=True)
    assert fused.dtype == x.dtype
    np.testing.assert_allclose(tf.cast(fused, tf.float32), reference, atol=tolerance * 10,
                               rtol=tolerance)
    fused_gradient = tape.gradient(fused, x, output_gradients=upstream)
    reference_gradient = tape.gradient(reference, x, output_gradients=tf.cast(upstream,
                                                                              tf.float32))
    assert fused_gradient.dtype == x.dtype
    np.testing.assert_allclose(tf.cast(fused_gradient, tf.float32), reference_gradient,
                               atol=tolerance * 10, rtol=tolerance)


def test_a_training_layer_has_the_inference_layers_outputs_and_gradients():
    """Without dropout a layer computes the same in training (fused GELU) as in inference
    (`tf.nn.gelu`), and its weights get the gradients of the plain activation's."""
    keras.utils.set_random_seed(0)
    layer = BertTransformerLayer(intermediate_dim=24, num_heads=2)
    inputs = tf.random.normal([3, 5, 8]) * 2
    layer(inputs)
    plain = BertTransformerLayer.from_config(layer.get_config())
    plain(inputs)
    plain.set_weights(layer.get_weights())
    plain.activation_name = "gelu_plain"  # not "gelu": the layer keeps Keras' activation

    def outputs_and_gradients(model):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_sum(out * tf.range(8, dtype=tf.float32))
        return out, tape.gradient(loss, model.trainable_weights)

    (fused_out, fused_grads), (plain_out, plain_grads) = (
        outputs_and_gradients(layer), outputs_and_gradients(plain))
    np.testing.assert_allclose(fused_out, plain_out, atol=1e-5)
    np.testing.assert_allclose(layer(inputs, training=False), fused_out, atol=1e-5)
    for a, b in zip(fused_grads, plain_grads, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
