"""BertPreprocessor: raw strings (one segment or a pair) to the encoder's packed inputs."""

import keras
import tensorflow as tf

from kbert.tokenization.tokenizer import FullTokenizer


def truncated_lengths(length_a, length_b, budget):
    """Lengths after Google's `_truncate_seq_pair` (pop from the longer; on a tie, from b).

    Closed form of the pop loop: when the pair is too long, a keeps
    min(len_a, max(budget - len_b, ceil(budget / 2))) and b the rest of the budget.
    """
    too_long = length_a + length_b > budget
    keep_a = tf.minimum(length_a, tf.maximum(budget - length_b, (budget + 1) // 2))
    return (tf.where(too_long, keep_a, length_a),
            tf.where(too_long, budget - keep_a, length_b))


@keras.saving.register_keras_serializable(package="kbert")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs strings as `[CLS] A [SEP] (B [SEP])` for `kbert.BertEncoder`.

    Keras' own preprocessing layers (keras-nlp's MultiSegmentPacker) truncate pairs
    "waterfall" or "round robin", neither of which is Google's `_truncate_seq_pair`, so the
    packing is written here with ragged ops.

    Args:
        vocab_file: str. `vocab.txt` (an `added_tokens.txt` beside it is read too).
        do_lower_case: bool. Defaults to True.
        max_seq_length: int. Longer inputs are truncated. Defaults to 128.
        pad_to_max_length: bool. Pad to `max_seq_length`, else to the batch's longest.
            Defaults to True.

    Call args:
        inputs: string tensor [batch], or a tuple/list of two for text pairs.

    Returns:
        dict of int32 [batch, seq]: token_ids, segment_ids, padding_mask.
    """

    def __init__(self, vocab_file, do_lower_case=True, max_seq_length=128,
                 pad_to_max_length=True, **kwargs):
        super().__init__(**kwargs)
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.max_seq_length = max_seq_length
        self.pad_to_max_length = pad_to_max_length
        self.tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
        self._cls = self.tokenizer.vocab["[CLS]"]
        self._sep = self.tokenizer.vocab["[SEP]"]

    def call(self, inputs):
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if len(segments) not in (1, 2):
            raise ValueError(f"expected one or two text segments, got {len(segments)}")
        ids = [self.tokenizer.tokenize_ids(tf.convert_to_tensor(s)) for s in segments]
        lengths = [t.row_lengths() for t in ids]
        if len(ids) == 2:
            keep = truncated_lengths(*lengths, self.max_seq_length - 3)
        else:
            keep = [tf.minimum(lengths[0], self.max_seq_length - 2)]
        ids = [_head(t, k) for t, k in zip(ids, keep, strict=True)]
        batch = tf.shape(ids[0].row_lengths())[0]
        cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], self._cls))
        sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], self._sep))
        parts = [cls, ids[0], sep] + ([ids[1], sep] if len(ids) == 2 else [])
        segment_parts = [tf.zeros_like(p) for p in parts[:3]] + [tf.ones_like(p) for p in parts[3:]]
        token_ids = tf.concat(parts, axis=1)
        segment_ids = tf.concat(segment_parts, axis=1)
        width = self.max_seq_length if self.pad_to_max_length else None
        shape = [None, width]
        return {
            "token_ids": token_ids.to_tensor(0, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
            "padding_mask": tf.ones_like(token_ids).to_tensor(0, shape=shape),
        }

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_file": self.vocab_file,
            "do_lower_case": self.do_lower_case,
            "max_seq_length": self.max_seq_length,
            "pad_to_max_length": self.pad_to_max_length,
        })
        return config


def _head(ragged, lengths):
    """The first `lengths[i]` items of each row of a 2-D RaggedTensor."""
    positions = tf.ragged.range(ragged.row_lengths())
    return tf.ragged.boolean_mask(ragged, positions < lengths[:, None])
