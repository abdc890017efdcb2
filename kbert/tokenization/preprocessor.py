"""BertPreprocessor: raw strings (one segment or a pair) to the encoder's packed inputs."""

import functools

import keras
import tensorflow as tf

from kbert.tokenization import packing
from kbert.tokenization import text_inputs
from kbert.tokenization import vocab as vocab_lib
from kbert.tokenization.tokenizer import FullTokenizer


@keras.saving.register_keras_serializable(package="kbert")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs strings as `[CLS] A [SEP] (B [SEP])` for `kbert.BertEncoder`.

    Tokens are exactly Google's `FullTokenizer`'s, and packing is exactly run_classifier's
    `convert_single_example`: pairs are truncated as `_truncate_seq_pair` (pop from the longer
    segment, from B on a tie; the tests check every pair of lengths up to 13), and where B has
    no tokens, Google packs A alone (`[CLS] A [SEP]`, no second `[SEP]`), and so does this
    layer (`kbert.tokenization.packing`).
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
        self._cls_id, self._sep_id = vocab.cls_id, vocab.sep_id
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
        ids = [self._tokenizer.tokenize_ids(t) for t in texts]
        token_ids, segment_ids, is_token = packing.pack(
            ids, self.max_seq_length, self._cls_id, self._sep_id,
            width=self.max_seq_length if self.pad_to_max_length else None)
        outputs = {
            "token_ids": tf.where(is_token, token_ids, self._pad_id),
            "segment_ids": segment_ids,
            "padding_mask": tf.cast(is_token, tf.int32),
        }
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

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
