"""TokenIdCheck: stops a model on token ids outside its embedding table."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="kbert")
class TokenIdCheck(keras.layers.Layer):
    """Passes token ids through, raising InvalidArgumentError on one outside [0, vocabulary_size).

    Without it an id past the table fails only on CPU (a gather error deep in a trace), and
    under XLA not at all: XLA clamps out-of-range gathers and drops assertions, so the model
    returns outputs for the wrong rows. This layer's `supports_jit = False` makes Keras run
    any model holding it without XLA (`compile(jit_compile=True)` falls back, with Keras'
    warning), so the check runs on every path of fit, evaluate and predict. A
    `tf.function(jit_compile=True)` written by hand around the model skips it (XLA drops
    assertions); the recipes' `--jit_compile` goes through Keras and keeps it.

    Args:
        vocabulary_size: int. Rows of the embedding table.

    Call args:
        token_ids: int [batch, seq].

    Returns:
        The same `token_ids`, after the check.
    """

    def __init__(self, vocabulary_size, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.supports_jit = False

    def call(self, token_ids):
        checks = [
            tf.debugging.assert_non_negative(token_ids, message="negative token id"),
            tf.debugging.assert_less(
                token_ids, tf.cast(self.vocabulary_size, token_ids.dtype),
                message=f"token id outside the embedding table of {self.vocabulary_size} rows "
                        "(the vocab.txt does not match the checkpoint's vocab_size?)"),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(token_ids)

    def compute_output_spec(self, token_ids):
        return keras.KerasTensor(token_ids.shape, token_ids.dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary_size": self.vocabulary_size})
        return config
