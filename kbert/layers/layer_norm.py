"""LayerNorm for training: forward and gradient each one fused loop.

Written by hand because neither TensorFlow nor Keras has it on the CPU: Keras'
`LayerNormalization` on TensorFlow is a dozen element-wise ops and two reductions, and its
automatic gradient about twice as many, each a pass over [tokens, hidden]; TensorFlow's
oneDNN LayerNorm kernel is fused only in inference graphs. Here the forward and the gradient
(for the input, gamma and beta) are each one XLA-compiled function, which XLA fuses into a
few loops, as PyTorch's native_layer_norm and its backward. Alone, at [1728, 384] (a MiniLM
step at 32 x 54): 4.8 -> 2.6 ms over the identity (BENCHMARKS.md, "LayerNorm fused for
training").

`layer_norm(layer, x, training)` runs a Keras `LayerNormalization` (last axis, centered and
scaled, as BERT's) with this function when training, and as Keras does otherwise.
"""

import tensorflow as tf


def layer_norm(layer, x, training):
    """`layer(x)` for a Keras `LayerNormalization` over the last axis; fused when training."""
    if not training:
        return layer(x)
    out = _layer_norm_for_training(x, tf.convert_to_tensor(layer.gamma),
                                   tf.convert_to_tensor(layer.beta), layer.epsilon)
    return tf.cast(out, layer.compute_dtype)


def _normalized(x, epsilon):
    wide = tf.cast(x, tf.float32)  # computed in float32 also for bfloat16 inputs, as Keras
    centered = wide - tf.reduce_mean(wide, -1, keepdims=True)
    inverse = tf.math.rsqrt(tf.reduce_mean(centered * centered, -1, keepdims=True) + epsilon)
    return centered * inverse, inverse


@tf.function(jit_compile=True, reduce_retracing=True)
def _forward(x, gamma, beta, epsilon):
    normalized, _ = _normalized(x, epsilon)
    return tf.cast(normalized * gamma + beta, x.dtype)


@tf.function(jit_compile=True, reduce_retracing=True)
def _gradient(x, gamma, upstream, epsilon):
    normalized, inverse = _normalized(x, epsilon)
    upstream = tf.cast(upstream, tf.float32)
    scaled = upstream * gamma
    d_x = inverse * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                     - normalized * tf.reduce_mean(scaled * normalized, -1, keepdims=True))
    width = tf.shape(x)[-1]
    d_gamma = tf.reduce_sum(tf.reshape(upstream * normalized, [-1, width]), 0)
    d_beta = tf.reduce_sum(tf.reshape(upstream, [-1, width]), 0)
    return tf.cast(d_x, x.dtype), d_gamma, d_beta


def _layer_norm_for_training(x, gamma, beta, epsilon):
    @tf.custom_gradient
    def fused(x, gamma, beta):
        return _forward(x, gamma, beta, epsilon), lambda upstream: _gradient(
            x, gamma, upstream, epsilon)

    return fused(x, gamma, beta)
