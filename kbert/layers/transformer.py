"""BERT's post-LayerNorm transformer block: keras-nlp's TransformerEncoder, configured as BERT."""

import keras
import keras_nlp

from kbert.layers.embeddings import LAYER_NORM_EPSILON


@keras.saving.register_keras_serializable(package="kbert")
def gelu_approximate(x):
    """GELU, tanh approximation: what Google's modeling.py calls "gelu"."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="kbert")
def gelu_exact(x):
    """GELU with erf: what Hugging Face's BERT calls "gelu"."""
    return keras.activations.gelu(x, approximate=False)


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


@keras.saving.register_keras_serializable(package="kbert")
class BertTransformerLayer(keras_nlp.layers.TransformerEncoder):
    """One BERT layer: self-attention, add & LayerNorm, feed-forward, add & LayerNorm.

    keras-nlp's `TransformerEncoder` with `normalize_first=False` computes exactly modeling.py
    `transformer_model`'s layer. Two things are added here: `activation` is a `hidden_act` name
    (so a config round-trips as JSON), and attention-probability dropout gets its own rate,
    because BERT configs carry `attention_probs_dropout_prob` separately from
    `hidden_dropout_prob` while keras-nlp uses one `dropout` for both.

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
        first_token_only: bool. Return only the first ([CLS]) position, [batch, 1, hidden],
            equal to the full output's `[:, :1]` at a fraction of the cost. Defaults to False.
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

    def build(self, inputs_shape):
        super().build(inputs_shape)
        # keras-nlp builds the attention layer with `dropout`; give it BERT's own rate.
        attention = self._self_attention_layer
        attention._dropout = self.attention_dropout
        attention._dropout_layer.rate = self.attention_dropout

    def call(self, inputs, padding_mask=None, attention_mask=None, training=None,
             first_token_only=False, **kwargs):
        if not first_token_only:
            return super().call(inputs, padding_mask=padding_mask,
                                attention_mask=attention_mask, training=training, **kwargs)
        # keras-nlp's TransformerEncoder attends from every position. A head that reads only
        # [CLS] (the classifier's pooler) needs the last layer there alone: keys and values from
        # every position, but the query, attention output, feed-forward and LayerNorms of one
        # position (about 1/6 of the layer's work), so fine-tuning a 6-layer encoder does ~14%
        # less. The same sublayers and order as TransformerEncoder.call (post-LayerNorm).
        # [batch, 1, seq]: what the first position may attend to (the first row of keras-nlp's
        # private merge_padding_and_attention_mask).
        mask = None
        if padding_mask is not None:
            mask = keras.ops.cast(padding_mask[:, None, :], "int32")
        if attention_mask is not None:
            first_row = keras.ops.cast(attention_mask[:, :1, :], "int32")
            mask = first_row if mask is None else keras.ops.minimum(mask, first_row)
        first = inputs[:, :1, :]
        x = self._self_attention_layer(query=first, value=inputs, key=inputs,
                                       attention_mask=mask, training=training)
        x = self._self_attention_layer_norm(
            first + self._self_attention_dropout(x, training=training))
        y = self._feedforward_output_dense(self._feedforward_intermediate_dense(x))
        return self._feedforward_layer_norm(x + self._feedforward_dropout(y, training=training))

    def compute_output_spec(self, inputs, *args, first_token_only=False, **kwargs):
        if not first_token_only:
            return super().compute_output_spec(inputs, *args, **kwargs)
        return keras.KerasTensor((inputs.shape[0], 1, inputs.shape[2]), dtype=self.compute_dtype)

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
