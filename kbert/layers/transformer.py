"""BERT's post-LayerNorm transformer block, over keras-nlp's TransformerEncoder sublayers."""

import keras
import keras_nlp
import tensorflow as tf

from kbert import cpu_features
from kbert.layers import training_ops
from kbert.layers.embeddings import LAYER_NORM_EPSILON


@keras.saving.register_keras_serializable(package="kbert")
def gelu_approximate(x):
    """GELU, tanh approximation: what Google's modeling.py calls "gelu"."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="kbert")
def gelu_exact(x):
    """GELU with erf: what Hugging Face's BERT calls "gelu"."""
    return keras.activations.gelu(x, approximate=False)


# 0.5 * (1 + tanh(z)) = sigmoid(2 * z): the tanh form as x * sigmoid(x * (A + B * x^2)).
_GELU_A = 2 * 0.7978845608028654
_GELU_B = _GELU_A * 0.044715


@tf.custom_gradient
def gelu_approximate_for_training(x):
    """`gelu_approximate` for a training step on the CPU, where TensorFlow runs each
    element-wise op as its own pass over [tokens, intermediate]: by hand because
    `tf.nn.gelu`'s tanh form and its automatic gradient take ~19 such passes, this sigmoid
    form and its written-out gradient 12 (the same function to float32 round-off)."""
    squared = x * x
    gate = tf.sigmoid(x * (_GELU_A + _GELU_B * squared))

    def gradient(upstream):
        # d/dx x * sigmoid(u) = sigmoid(u) + x * sigmoid'(u) * du/dx; SigmoidGrad(y, v) is
        # y * (1 - y) * v in one pass.
        inner = tf.raw_ops.SigmoidGrad(y=gate, dy=x * (_GELU_A + 3 * _GELU_B * squared))
        return upstream * (gate + inner)

    return x * gate, gradient


# `bert_config.json` "hidden_act" -> function, as modeling.py `get_activation`.
ACTIVATIONS = {
    "gelu": gelu_approximate,
    "gelu_exact": gelu_exact,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}


def get_activation(name):
    """Returns the function for a `hidden_act` name; raises ValueError naming the choices."""
    if name not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def dense(layer, x):
    """The affine map of `layer` (a Dense or EinsumDense) without its activation, on
    [rows, inputs] -> [rows, outputs], its kernel flattened to [inputs, outputs].

    By hand for speed on CPU: a 2-D MatMul followed by a BiasAdd (Keras adds with AddV2) is
    the pattern TensorFlow's oneDNN rewriter fuses into one kernel, a GELU after it included
    (15% less time for BERT-Base's intermediate projection of 4096 tokens).
    """
    kernel = keras.ops.reshape(layer.kernel, (x.shape[-1], -1))
    return tf.nn.bias_add(tf.matmul(x, kernel), keras.ops.reshape(layer.bias, (-1,)))


def dense_concat(layers, x):
    """`dense` of several layers at once, their outputs side by side: one MatMul over their
    kernels concatenated (the gradient flows back through the concatenation to each)."""
    kernel = tf.concat([keras.ops.reshape(layer.kernel, (x.shape[-1], -1)) for layer in layers],
                       axis=1)
    bias = tf.concat([keras.ops.reshape(layer.bias, (-1,)) for layer in layers], axis=0)
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)


@keras.saving.register_keras_serializable(package="kbert")
class BertTransformerLayer(keras_nlp.layers.TransformerEncoder):
    """One BERT layer: self-attention, add & LayerNorm, feed-forward, add & LayerNorm.

    A keras-nlp `TransformerEncoder` with `normalize_first=False` (modeling.py
    `transformer_model`'s layer): its sublayers, weights and config, its computation in its
    order, but run with 2-D projections (see `call`). Added here: `activation` is a
    `hidden_act` name (so a config round-trips as JSON); attention-probability dropout has its
    own rate, because BERT configs carry `attention_probs_dropout_prob` separately from
    `hidden_dropout_prob` while keras-nlp uses one `dropout` for both; and `first_token_only`.

    Args:
        intermediate_dim: int. Feed-forward width.
        num_heads: int. Attention heads.
        activation: str. A `hidden_act` name. Defaults to "gelu".
        dropout: float. Dropout on the attention and feed-forward outputs. Defaults to 0.
        attention_dropout: float. Dropout on attention probabilities. Defaults to 0.
        initializer_range: float. Stddev of the truncated-normal initializer. Defaults to 0.02.

    Call args:
        inputs: float tensor [batch, seq, hidden].
        padding_mask: int or bool tensor [batch, seq]; 0 marks padding.
        attention_mask: int or bool tensor [batch, seq, seq]; 0 where query i may not see key j.
        training: bool. Apply dropout.
        first_token_only: bool. Return only the first ([CLS]) position, [batch, 1, hidden],
            equal to the full output's `[:, :1]` at a fraction of the cost. Defaults to False.
        query_positions: int tensor [batch, q] or None. Return only these positions, [batch,
            q, hidden], equal to gathering them from the full output (the `[CLS]` of each
            example of a packed row). Defaults to None.
        return_attention_scores: bool. Also return the attention probabilities (before
            dropout), [batch, heads, q, seq]. Defaults to False.
    """

    def __init__(self, intermediate_dim, num_heads, activation="gelu", dropout=0.0,
                 attention_dropout=0.0, initializer_range=0.02, **kwargs):
        for key in ("layer_norm_epsilon", "kernel_initializer", "normalize_first"):
            kwargs.pop(key, None)  # fixed by BERT; present in configs from super().get_config()
        super().__init__(
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            activation=get_activation(activation),
            layer_norm_epsilon=LAYER_NORM_EPSILON,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            normalize_first=False,
            **kwargs,
        )
        self.activation_name = activation
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        # keras-nlp's attention sublayer drops its probabilities at `dropout`; BERT has a rate
        # of its own for them.
        self._attention_probs_dropout = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_probs_dropout")

    def call(self, inputs, padding_mask=None, attention_mask=None, training=None,
             first_token_only=False, return_attention_scores=False, query_positions=None):
        # By hand, over keras-nlp's own sublayers and weights: its TransformerEncoder runs the
        # Dense/EinsumDense sublayers on [batch, seq, hidden], which Keras' TensorFlow backend
        # lowers to a broadcasting BatchMatMulV2 that oneDNN runs at about half the speed of a
        # 2-D MatMul (39% of BERT-Base's forward time at seq 128, batch 32). This is the same
        # post-LayerNorm block, TransformerEncoder.call's sublayers in its order, with every
        # projection on [batch * seq, hidden].
        batch, length, hidden = keras.ops.shape(inputs)
        # A head that reads only [CLS] (the classifier's pooler) needs its last layer there
        # alone: keys and values from every position, but the query, attention output,
        # feed-forward and LayerNorms of one position (about 1/6 of the layer's work).
        if query_positions is not None:
            queries = tf.gather(inputs, query_positions, batch_dims=1)
            query_length = keras.ops.shape(query_positions)[1]
            if attention_mask is not None:  # the queries' rows, first as `_attention_bias` reads
                attention_mask = tf.gather(attention_mask, query_positions, batch_dims=1)
        else:
            query_length = 1 if first_token_only else length
            queries = inputs[:, :query_length, :]
        keys = keras.ops.reshape(inputs, (-1, hidden))
        # The same tensor when every position queries: `_attend` then projects it once.
        full = query_positions is None and not first_token_only
        query = keys if full else keras.ops.reshape(queries, (-1, hidden))
        x, probs = self._attend(
            query, keys, (batch, query_length, length),
            self._attention_bias(padding_mask, attention_mask, query_length), training)
        # LayerNorms and dropouts through training_ops: in a CPU training step, the same
        # values with a written-out gradient, in a fraction of the ops.
        x = training_ops.dropout(self._self_attention_dropout, x, training)
        x = training_ops.layer_norm(self._self_attention_layer_norm, query + x, training)
        y = dense(self._feedforward_output_dense, self._activated(dense(
            self._feedforward_intermediate_dense, x), training))
        x = training_ops.layer_norm(
            self._feedforward_layer_norm,
            x + training_ops.dropout(self._feedforward_dropout, y, training), training)
        x = keras.ops.reshape(x, (batch, query_length, hidden))
        return (x, probs) if return_attention_scores else x

    def _activated(self, x, training):
        """The feed-forward activation of `x`. In training on the CPU, Google's GELU is
        `gelu_approximate_for_training` (fewer passes over the activations), and under mixed
        precision the activation is computed in float32 and cast back. TensorFlow runs the
        CPU's bfloat16 element-wise ops through Eigen, which converts every element to float32
        and back in each op: the GELU's eight forward ops and their gradients were the
        largest share of a mixed_bfloat16 step (BENCHMARKS.md, "Where a bfloat16 step's
        time goes"). Inference keeps the compute dtype and `tf.nn.gelu`, which oneDNN fuses
        into the matmul before it, and so does a GPU, whose reduced-precision element-wise
        ops are native."""
        activation = self._feedforward_intermediate_dense.activation
        if not training or not cpu_features.runs_on_cpu():
            return activation(x)
        if activation is gelu_approximate:
            activation = gelu_approximate_for_training
        elif x.dtype == tf.float32:
            return activation(x)
        return tf.cast(activation(tf.cast(x, tf.float32)), x.dtype)

    def _attention_bias(self, padding_mask, attention_mask, query_length):
        """0 where a query may attend, a large negative number elsewhere, [batch, 1, q|1, seq]
        float32; None without masks. As keras-nlp's (private) merge_padding_and_attention_mask,
        but added to the scores instead of a select over them."""
        mask = None
        if padding_mask is not None:
            mask = keras.ops.cast(padding_mask[:, None, :], "int32")
        if attention_mask is not None:
            rows = keras.ops.cast(attention_mask[:, :query_length, :], "int32")
            mask = rows if mask is None else keras.ops.minimum(mask, rows)
        if mask is None:
            return None
        return (1.0 - keras.ops.cast(mask[:, None], "float32")) * -1e9

    def _attend(self, query, keys, shape, bias, training):
        """Multi-head attention of `query` [batch * q, hidden] over `keys` [batch * seq, hidden]
        with the weights of keras-nlp's attention sublayer; returns the output [batch * q,
        hidden] and the attention probabilities before dropout [batch, heads, q, seq]."""
        if isinstance(shape[0], int) and shape[0] == 1:  # statically one example
            return self._attend_one(query, keys, shape[1:], bias, training)
        attention = self._self_attention_layer
        batch, query_length, length = shape
        heads, head_dim = self.num_heads, attention.key_dim

        def split_heads(x, steps, order):
            return keras.ops.transpose(keras.ops.reshape(x, (batch, steps, heads, head_dim)), order)

        # One [hidden, 3 * hidden] (or, for fewer queries than keys, [hidden, 2 * hidden])
        # projection instead of three: one wider MatMul is cheaper than three narrow ones.
        if query is keys:
            q, k, v = tf.split(dense_concat((attention._query_dense, attention._key_dense,
                                             attention._value_dense), keys), 3, axis=1)
        else:
            q = dense(attention._query_dense, query)
            k, v = tf.split(dense_concat((attention._key_dense, attention._value_dense), keys),
                            2, axis=1)
        q = split_heads(q * (1.0 / head_dim ** 0.5), query_length, (0, 2, 1, 3))  # [b, h, q, d]
        k = split_heads(k, length, (0, 2, 3, 1))                                 # [b, h, d, s]
        v = split_heads(v, length, (0, 2, 1, 3))
        probs = self._probabilities(keras.ops.matmul(q, k), bias)         # [b, heads, q, s]
        context = keras.ops.matmul(
            training_ops.dropout(self._attention_probs_dropout, probs, training), v)
        context = keras.ops.transpose(context, (0, 2, 1, 3))
        context = keras.ops.reshape(context, (-1, heads * head_dim))
        return dense(attention._output_dense, context), probs

    def _attend_one(self, query, keys, shape, bias, training):
        """`_attend` for a batch of one, without the four transposes that split and merge the
        heads (10% of the layer's time at seq 32): projected transposed, [heads * d, steps]
        reshapes to [heads, d, steps] as it is, and the matmuls take the transposes."""
        attention = self._self_attention_layer
        query_length, length = shape
        heads, head_dim = self.num_heads, attention.key_dim

        def project_transposed(layer, x, steps):  # [heads, d, steps]
            kernel = keras.ops.reshape(layer.kernel, (x.shape[-1], -1))
            y = tf.matmul(kernel, x, transpose_a=True, transpose_b=True)
            return keras.ops.reshape(y + keras.ops.reshape(layer.bias, (-1, 1)),
                                     (heads, head_dim, steps))

        q = project_transposed(attention._query_dense, query, query_length) * (
            1.0 / head_dim ** 0.5)
        k = project_transposed(attention._key_dense, keys, length)
        v = project_transposed(attention._value_dense, keys, length)
        probs = self._probabilities(tf.matmul(q, k, transpose_a=True)[None], bias)
        probs_dropped = training_ops.dropout(self._attention_probs_dropout, probs, training)[0]
        context = tf.matmul(v, probs_dropped, transpose_b=True)            # [heads, d, q]
        output = attention._output_dense
        kernel = keras.ops.reshape(output.kernel, (heads * head_dim, -1))
        context = keras.ops.reshape(context, (heads * head_dim, query_length))
        # An add, not a BiasAdd: TensorFlow's oneDNN rewriter fuses MatMul(transpose_a) with a
        # BiasAdd and the residual add after it into a kernel it has not implemented.
        output_bias = keras.ops.reshape(output.bias, (-1,))
        return tf.matmul(context, kernel, transpose_a=True) + output_bias, probs

    def _probabilities(self, scores, bias):
        """Softmax over the keys of `scores` plus `bias`, in float32 also under mixed precision
        (where -1e9 would overflow), cast back to the compute dtype."""
        scores = keras.ops.cast(scores, "float32")
        if bias is not None:
            scores = scores + bias
        return keras.ops.cast(keras.ops.softmax(scores, axis=-1), self.compute_dtype)

    def compute_output_spec(self, inputs, *args, first_token_only=False,
                            return_attention_scores=False, query_positions=None, **kwargs):
        batch, length, hidden = inputs.shape
        query_length = 1 if first_token_only else length
        if query_positions is not None:
            query_length = query_positions.shape[1]
        output = keras.KerasTensor((batch, query_length, hidden), dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        probs = keras.KerasTensor((batch, self.num_heads, query_length, length),
                                  dtype=self.compute_dtype)
        return output, probs

    def get_config(self):
        config = super().get_config()
        for key in ("layer_norm_epsilon", "kernel_initializer", "normalize_first"):
            config.pop(key)
        config.update({
            "activation": self.activation_name,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
        })
        return config
