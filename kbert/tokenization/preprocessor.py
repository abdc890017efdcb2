"""BertPreprocessor: raw strings (one segment or a pair) to the encoder's packed inputs."""

import functools

import keras
import keras_nlp
import tensorflow as tf

from kbert.tokenization import text_inputs
from kbert.tokenization import vocab as vocab_lib
from kbert.tokenization.tokenizer import FullTokenizer

_UNPADDED = -1  # the packer's pad value, told apart from every real id, then set to [PAD]


@keras.saving.register_keras_serializable(package="kbert")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs strings as `[CLS] A [SEP] (B [SEP])` for `kbert.BertEncoder`.

    Tokens are exactly Google's `FullTokenizer`'s, and packing is exactly run_classifier's
    `convert_single_example`: pairs are truncated as `_truncate_seq_pair` (pop from the longer
    segment, from B on a tie), which keras-nlp's `MultiSegmentPacker` with
    `truncate="round_robin"` reproduces (it hands the budget out one token at a time, A
    first; the tests check every pair of lengths up to 13). Where B has no tokens, Google packs
    A alone (`[CLS] A [SEP]`, no second `[SEP]`), and so does this layer.
    The vocabulary is part of the layer's config and its graph, so a `.keras` file or a
    SavedModel that holds the layer needs no `vocab.txt`.
    Every token id is a row of the vocabulary, so ids are in [0, len(vocabulary)); a model
    whose embedding table is smaller is caught by `kbert.check_vocab_size` when loading.

    Args:
        vocab_file: str or None. `vocab.txt`; an `added_tokens.txt` beside it gives the
            default `never_split`. Not read when `vocabulary` is given. Defaults to None.
        do_lower_case: bool. Lower-case and strip accents (uncased models). Defaults to True.
        max_seq_length: int. Packed length; longer inputs are truncated. At least 3, and at
            least 5 for pairs (a pair call raises ValueError otherwise, rather than drop both
            texts as Google's `_truncate_seq_pair` would). Defaults to 128.
        pad_to_max_length: bool. Pad to `max_seq_length`, else only to the batch's longest
            sequence. Defaults to True.
        never_split: list of str or None. Vocab tokens the tokenizer emits whole (see
            `FullTokenizer`). Defaults to None (the `added_tokens.txt` ones, if any).
        vocabulary: list of str or None. The vocab tokens in id order, instead of reading
            `vocab_file`. Defaults to None.

    Call args:
        inputs: texts in keras-hub's convention. A list of str (or a [batch] string tensor)
            is a batch; a tuple of two such batches is a batch of pairs (A, B); a str (or a
            scalar string tensor) is one example, and a tuple of two str one pair, both packed
            without a batch axis. A [batch, 1 or 2] string tensor, or a ragged [batch,
            (1 or 2)] one, holds each example's segments in a row. Anything else, such as a
            list of tuples or of lists, raises a ValueError that lists these forms.

    Returns:
        dict of int32 [batch, seq] ([seq] for one example): `token_ids`, `segment_ids` (0 for
        `[CLS] A [SEP]`, 1 for `B [SEP]`) and `padding_mask` (1 for real tokens, 0 for
        padding).

    Example:
    ```python
    preprocessor = kbert.BertPreprocessor("vocab.txt", max_seq_length=16)
    batch = preprocessor(["The cat sat.", "Dogs bark."])  # token_ids: [2, 16]
    pairs = preprocessor((["The cat sat."], ["It was tired."]))  # token_ids: [1, 16]
    one = preprocessor("The cat sat.")  # token_ids: [16]
    outputs = encoder(pairs)  # a kbert.BertEncoder
    ```
    """

    def __init__(self, vocab_file=None, do_lower_case=True, max_seq_length=128,
                 pad_to_max_length=True, never_split=None, vocabulary=None, **kwargs):
        super().__init__(**kwargs)
        if vocabulary is None:
            if vocab_file is None:
                raise ValueError("BertPreprocessor needs vocab_file or vocabulary")
            vocab = vocab_lib.load_vocab(vocab_file)
            if never_split is None:
                never_split = vocab_lib.load_added_tokens(vocab_file)
        else:
            vocab = vocab_lib.Vocab(vocabulary, path=vocab_file)
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 ([CLS] A [SEP] needs room "
                             f"for one token of A), got {max_seq_length}")
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.max_seq_length = max_seq_length
        self.pad_to_max_length = pad_to_max_length
        self.never_split = list(never_split or [])
        self.vocabulary = list(vocab.tokens)
        self._tokenizer = _shared_tokenizer(vocab, do_lower_case, tuple(self.never_split))
        self._pad_id = vocab.pad_id
        self._packer = keras_nlp.layers.MultiSegmentPacker(
            sequence_length=max_seq_length, start_value=vocab.cls_id, end_value=vocab.sep_id,
            pad_value=_UNPADDED, truncate="round_robin", dtype="int32")
        # As keras-nlp's preprocessing layers: string inputs pass through unconverted.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    @property
    def tokenizer(self):
        """The `FullTokenizer` inside (for offsets, or tokens as strings)."""
        return self._tokenizer

    def __call__(self, inputs, *args, **kwargs):
        # Keras refuses a tuple that mixes tensors with Python values, such as (list, tensor).
        if isinstance(inputs, tuple):
            inputs = tuple(text_inputs.python_texts_as_tensor(x) for x in inputs)
        return super().__call__(inputs, *args, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def call(self, inputs):
        texts = text_inputs.to_segments(inputs)
        if len(texts) == 2 and self.max_seq_length < 5:
            raise ValueError(f"max_seq_length={self.max_seq_length} cannot hold a text pair: "
                             "[CLS] A [SEP] B [SEP] needs at least 5 (one piece of each text)")
        unbatched = texts[0].shape.rank == 0
        if unbatched:
            texts = [t[None] for t in texts]
        ids = tuple(self._tokenizer.tokenize_ids(t) for t in texts)
        token_ids, segment_ids = self._pack(ids)
        if len(ids) == 2:
            # convert_single_example adds B and its [SEP] only if B has tokens after
            # truncation; with none to start with, A alone gets the whole budget.
            emptied = tf.equal(tf.reduce_sum(segment_ids, axis=1), 1)[:, None]
            dropped = emptied & tf.equal(segment_ids, 1)
            token_ids = tf.where(dropped, _UNPADDED, token_ids)
            segment_ids = tf.where(dropped, 0, segment_ids)
            single_ids, single_segments = self._pack(ids[:1])
            alone = tf.equal(ids[1].row_lengths(), 0)[:, None]
            token_ids = tf.where(alone, single_ids, token_ids)
            segment_ids = tf.where(alone, single_segments, segment_ids)
        is_token = tf.not_equal(token_ids, _UNPADDED)
        if not self.pad_to_max_length:
            width = tf.reduce_max(tf.reduce_sum(tf.cast(is_token, tf.int32), axis=1))
            token_ids, segment_ids, is_token = (
                t[:, :width] for t in (token_ids, segment_ids, is_token))
        outputs = {
            "token_ids": tf.where(is_token, token_ids, self._pad_id),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "padding_mask": tf.cast(is_token, tf.int32),
        }
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _pack(self, ids):
        # The packer returns shape [0] for an empty batch; keep [0, max_seq_length].
        return (tf.reshape(t, [-1, self.max_seq_length]) for t in self._packer(ids))

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_file": self.vocab_file,
            "do_lower_case": self.do_lower_case,
            "max_seq_length": self.max_seq_length,
            "pad_to_max_length": self.pad_to_max_length,
            "never_split": self.never_split,
            "vocabulary": self.vocabulary,
        })
        return config


@functools.lru_cache(maxsize=4)
def _shared_tokenizer(vocab, do_lower_case, never_split):
    """One FullTokenizer (and one traced graph) for all layers with the same vocab and options."""
    return FullTokenizer(vocab, do_lower_case=do_lower_case, never_split=list(never_split))
