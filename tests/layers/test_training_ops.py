"""kbert.layers.training_ops: Keras' LayerNorm and dropout in a CPU training step, the same
values and gradients in fewer ops; the Keras layer itself everywhere else."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import cpu_features
from kbert.layers import training_ops

HIDDEN = 24


def layer_norm_layer(policy):
    layer = keras.layers.LayerNormalization(epsilon=1e-12, dtype=policy)
    layer.build((None, HIDDEN))
    rng = np.random.default_rng(0)
    layer.gamma.assign(rng.normal(1.0, 0.5, HIDDEN))
    layer.beta.assign(rng.normal(0.0, 0.5, HIDDEN))
    return layer


def value_and_gradients(fn, x, variables, upstream):
    """fn(x), and the gradients of sum(fn(x) * upstream) to x and `variables`."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return [y, *tape.gradient(loss, [x, *variables])]


def count_ops(fn, x, variables):
    """Ops in the graph of fn's value and gradients (to x and `variables`)."""
    upstream = tf.ones(x.shape)
    graph = tf.function(lambda x: value_and_gradients(fn, x, variables, upstream)) \
        .get_concrete_function(tf.TensorSpec(x.shape, x.dtype)).graph
    return len(graph.get_operations())


@pytest.mark.parametrize("policy, atol", [("float32", 2e-5), ("mixed_bfloat16", 1 / 32)])
@pytest.mark.parametrize("shape", [(7, HIDDEN), (2, 5, HIDDEN)])
def test_layer_norm_equals_keras_with_its_gradients(policy, atol, shape):
    layer = layer_norm_layer(policy)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(0.3, 2.0, shape), layer.compute_dtype)
    upstream = tf.constant(rng.normal(size=shape), tf.float32)
    variables = [layer.gamma.value, layer.beta.value]
    ours = value_and_gradients(lambda x: training_ops.layer_norm(layer, x, True), x, variables,
                               upstream)
    keras_ = value_and_gradients(layer, x, variables, upstream)
    assert ours[0].dtype == keras_[0].dtype == layer.compute_dtype
    for a, b in zip(ours, keras_, strict=True):
        np.testing.assert_allclose(np.asarray(tf.cast(a, tf.float32)),
                                   np.asarray(tf.cast(b, tf.float32)), atol=atol, rtol=1e-5)
    # Beta's gradient is the upstream (as the output's dtype holds it) summed over the rows.
    upstream_as_output = tf.cast(tf.cast(upstream, layer.compute_dtype), tf.float32)
    np.testing.assert_allclose(
        ours[3], np.sum(upstream_as_output, axis=tuple(range(len(shape) - 1))), rtol=1e-5)


def test_layer_norm_takes_under_60_percent_of_the_ops():
    layer = layer_norm_layer("float32")
    x = tf.zeros((8, HIDDEN))
    variables = [layer.gamma.value, layer.beta.value]
    ours = count_ops(lambda x: training_ops.layer_norm(layer, x, True), x, variables)
    assert ours < 0.6 * count_ops(layer, x, variables)  # 53 and 95, the loss's ops included


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dropout_is_keras_dropout_bit_for_bit(dtype):
    keras_layer, our_layer = (keras.layers.Dropout(0.3, seed=5, dtype=dtype) for _ in "ab")
    rng = np.random.default_rng(2)
    x = tf.constant(rng.normal(size=(4, 6, 10)), dtype)
    upstream = tf.constant(rng.normal(size=(4, 6, 10)), tf.float32)
    for _ in range(2):  # the seed generator moves on alike
        ours = value_and_gradients(lambda x: training_ops.dropout(our_layer, x, True), x, [],
                                   upstream)
        theirs = value_and_gradients(lambda x: keras_layer(x, training=True), x, [], upstream)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(np.asarray(tf.cast(a, tf.float32)),
                                          np.asarray(tf.cast(b, tf.float32)))
    dropped = np.asarray(tf.cast(ours[0], tf.float32)) == 0
    assert 0.15 < dropped.mean() < 0.45  # a mask was drawn, at about the rate
    assert count_ops(lambda x: training_ops.dropout(our_layer, x, True), x, []) < count_ops(
        lambda x: keras_layer(x, training=True), x, [])


def test_outside_a_cpu_training_step_the_layer_itself_runs(monkeypatch):
    norm = layer_norm_layer("float32")
    drop = keras.layers.Dropout(0.3, seed=5)
    x = tf.constant(np.random.default_rng(3).normal(size=(3, HIDDEN)), tf.float32)
    norm_variables = [norm.gamma.value, norm.beta.value]
    keras_norm_ops = count_ops(norm, x, norm_variables)
    assert training_ops.dropout(drop, x, False) is x
    np.testing.assert_array_equal(training_ops.layer_norm(norm, x, False), norm(x))
    assert count_ops(lambda x: training_ops.layer_norm(norm, x, False), x,
                     norm_variables) == keras_norm_ops
    # A noise shape (one mask for several positions) is Keras' own.
    shared = keras.layers.Dropout(0.5, noise_shape=(3, 1), seed=5)
    dropped = np.asarray(training_ops.dropout(shared, x, True)) == 0
    np.testing.assert_array_equal(dropped.any(axis=1), dropped.all(axis=1))
    monkeypatch.setattr(cpu_features, "runs_on_cpu", lambda: False)  # a GPU or TPU
    assert count_ops(lambda x: training_ops.layer_norm(norm, x, True), x,
                     norm_variables) == keras_norm_ops
