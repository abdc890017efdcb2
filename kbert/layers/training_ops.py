"""LayerNorm and dropout for a training step on the CPU, with their gradients written out.

A short batch's training step on the CPU is paid per op as much as per element: TensorFlow
runs each op of the graph on its own, and tracing and Grappler's passes at the start of `fit`
take time in proportion to the op count. Keras' `LayerNormalization` (moments and a
broadcasting affine map) and its automatic gradient take ~94 ops, and `Dropout`
(`tf.nn.experimental.stateless_dropout`) ~28 with its gradient; MiniLM's step has 13
LayerNorms and 19 dropouts, ~36% of its 4,847 ops. Written out, the step has 3,842. By hand
because TensorFlow has no LayerNorm op with a gradient on the CPU (oneDNN's is an inference
rewrite) and Keras' dropout has no cheaper gradient.

Both compute what the Keras layer computes, with its own weights, epsilon, rate and seed
generator: the dropout mask is Keras' bit for bit, the LayerNorm equal to float32 round-off.
Outside training, on a GPU or TPU, or for a configuration the written-out form does not cover,
they call the layer itself (inference keeps the graph oneDNN's rewriter fuses).
"""

import tensorflow as tf

from kbert import cpu_features


def layer_norm(layer, x, training):
    """`layer(x)` for a Keras `LayerNormalization` over the last axis, with gamma and beta."""
    if not (training and layer.axis in (-1, [-1], [len(x.shape) - 1]) and layer.center
            and layer.scale and not layer.rms_scaling and cpu_features.runs_on_cpu()):
        return layer(x)
    # As Keras: at least float32 inside, the layer's compute dtype out.
    inside = tf.float32 if x.dtype in (tf.float16, tf.bfloat16) else x.dtype
    y = _layer_norm(tf.cast(x, inside), tf.cast(layer.gamma.value, inside),
                    tf.cast(layer.beta.value, inside), layer.epsilon)
    return tf.cast(y, layer.compute_dtype)


def _layer_norm(x, gamma, beta, epsilon):
    rows = list(range(len(x.shape) - 1))  # every axis but the normalised one

    @tf.custom_gradient
    def forward(x, gamma, beta):
        centered = x - tf.reduce_mean(x, -1, keepdims=True)
        inverse_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), -1, keepdims=True)
                                    + epsilon)
        normalized = centered * inverse_std

        def gradient(upstream):
            scaled = upstream * gamma
            # d/dx of (x - mean) / std, applied to `scaled`: the two means project out the
            # directions the normalisation removes.
            dx = inverse_std * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                                - normalized * tf.reduce_mean(scaled * normalized, -1,
                                                              keepdims=True))
            return (dx, tf.reduce_sum(upstream * normalized, rows),
                    tf.reduce_sum(upstream, rows))

        return normalized * gamma + beta, gradient

    return forward(x, gamma, beta)


def dropout(layer, x, training):
    """`layer(x, training=training)` for a Keras `Dropout` without a noise shape."""
    if not (training and 0 < layer.rate < 1 and layer.noise_shape is None
            and cpu_features.runs_on_cpu()):
        return layer(x, training=training)
    # Keras' seed for this call, as its TensorFlow backend draws it (the stateless ops want
    # int32; the generator's state is int64).
    seed = layer.seed_generator.next()
    if seed.dtype != tf.int32:
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    # The mask of `tf.nn.experimental.stateless_dropout`: the same uniform draw and test.
    keep = tf.random.stateless_uniform(tf.shape(x), seed, dtype=x.dtype) >= layer.rate
    scale = tf.constant(1 / (1 - layer.rate), x.dtype)
    return _masked(x, keep, scale)


@tf.custom_gradient
def _masked(x, keep, scale):
    def gradient(upstream):
        return tf.where(keep, upstream * scale, tf.zeros([], upstream.dtype)), None, None

    return tf.where(keep, x * scale, tf.zeros([], x.dtype)), gradient
