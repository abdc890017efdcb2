"""BERT's input embeddings: word + position + segment, LayerNorm, dropout."""

import keras
import keras_nlp
import tensorflow as tf

from kbert.layers import training_ops

# Google's modeling.py normalises with tf.contrib.layers.layer_norm, whose epsilon is 1e-12.
LAYER_NORM_EPSILON = 1e-12


@keras.saving.register_keras_serializable(package="kbert")
class BertEmbeddings(keras.layers.Layer):
    """Sums word, position and segment embeddings, then LayerNorm and dropout.

    As modeling.py `embedding_lookup` + `embedding_postprocessor`. The word table is a
    keras-nlp `ReversibleEmbedding`, so the masked-LM head can reuse it as its output kernel.

    Args:
        vocabulary_size: int. Rows of the word table.
        hidden_dim: int. Embedding width.
        max_sequence_length: int. Rows of the position table.
        num_segments: int. Rows of the segment table.
        dropout: float. Dropout rate after the LayerNorm. Defaults to 0.
        initializer_range: float. Stddev of the truncated-normal initializer. Defaults to 0.02.

    Call args:
        token_ids: int tensor [batch, seq].
        segment_ids: int tensor [batch, seq].
        position_ids: int tensor [batch, seq] or None. Row of the position table for each
            token, for packed rows where every example restarts at 0. Defaults to None
            (0, 1, ..., seq - 1).

    Returns:
        float tensor [batch, seq, hidden].
    """

    def __init__(self, vocabulary_size, hidden_dim, max_sequence_length, num_segments,
                 dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.initializer_range = initializer_range

        def initializer():
            return keras.initializers.TruncatedNormal(stddev=initializer_range)

        self.token_embedding = keras_nlp.layers.ReversibleEmbedding(
            vocabulary_size, hidden_dim, embeddings_initializer=initializer(),
            dtype=self.dtype_policy, name="token_embedding")
        self.position_embedding = keras_nlp.layers.PositionEmbedding(
            max_sequence_length, initializer=initializer(),
            dtype=self.dtype_policy, name="position_embedding")
        self.segment_embedding = keras.layers.Embedding(
            num_segments, hidden_dim, embeddings_initializer=initializer(),
            dtype=self.dtype_policy, name="segment_embedding")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="layer_norm")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, token_ids_shape, segment_ids_shape=None, position_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        embedded_shape = tuple(token_ids_shape) + (self.hidden_dim,)
        self.position_embedding.build(embedded_shape)
        self.segment_embedding.build(token_ids_shape)
        self.layer_norm.build(embedded_shape)
        self.built = True

    def call(self, token_ids, segment_ids, position_ids=None, training=None):
        length = token_ids.shape[-1]
        if isinstance(length, int) and length > self.max_sequence_length:
            raise ValueError(
                f"token_ids has sequence length {length}, longer than max_sequence_length "
                f"(max_position_embeddings) {self.max_sequence_length}; truncate the input")
        words = self._word_embeddings(token_ids)
        positions = self.position_embedding(words, positions=position_ids)
        x = words + positions + self.segment_embedding(segment_ids)
        return training_ops.dropout(
            self.dropout_layer, training_ops.layer_norm(self.layer_norm, x, training), training)

    def _word_embeddings(self, token_ids):
        """`self.token_embedding(token_ids)`, gathered from the table variable itself.

        Keras' `Embedding` reads the whole table, then gathers from what it read. Once sparse
        row updates (`sparse_embedding_updates`) have written the table, TensorFlow keeps it
        in copy-on-read mode, so that read copies the whole table every step (47 MB for
        30,522 x 384 words; ~5% of a short MiniLM fine-tuning step on 2 CPU cores,
        BENCHMARKS.md); under mixed precision Keras' autocast also casts the whole table. A
        resource gather reads only the rows: the same values and the same sparse
        (`IndexedSlices`) gradient.
        """
        table = self.token_embedding.embeddings
        variable = getattr(table, "_value", None)  # the tf.Variable of Keras' TF backend
        if not isinstance(variable, tf.Variable) or self.token_embedding.quantization_mode \
                or getattr(self.token_embedding, "lora_enabled", False):
            return self.token_embedding(token_ids)
        rows = tf.nn.embedding_lookup(variable, keras.ops.cast(token_ids, "int32"))
        return keras.ops.cast(rows, self.compute_dtype)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None,
                             position_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "hidden_dim": self.hidden_dim,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        })
        return config
