"""tf-text's WordPiece and normaliser models, built once per vocabulary in a process.

tf-text's tokenizers build their model (a flatbuffer, ~5 MB for a 30,522-token vocab) in the
constructor and copy it into a tensor through a Python list of its bytes: ~0.15-0.25 s for each
`FullTokenizer`, which holds three. A run makes several tokenizers of one vocab (training,
evaluation, export, a `BertPreprocessor` per casing). Written by hand because tf-text keeps no
such cache; its constructors take a built model as a uint8 tensor (`model_buffer`), and its
own model builders make the bytes.
"""

import functools

import numpy as np
import tensorflow as tf
from tensorflow_text.core.pybinds import pywrap_fast_bert_normalizer_model_builder
from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder


@functools.lru_cache(maxsize=4)  # two vocabs (a release's and its expansion), two models each
def wordpiece(tokens, suffix_indicator, unknown_token, max_bytes_per_word, no_pretokenization):
    """The model of `tf_text.FastWordpieceTokenizer(vocab=list(tokens), ...)` with the same
    arguments (no detokenization), as a uint8 tensor.

    Args:
        tokens: tuple of str. The vocabulary, in id order.
        suffix_indicator, unknown_token, max_bytes_per_word, no_pretokenization: as
            `tf_text.FastWordpieceTokenizer`'s.

    Returns:
        tf.Tensor of uint8, eager (shared by every tokenizer of these arguments).
    """
    return _as_tensor(pywrap_fast_wordpiece_tokenizer_model_builder.build_fast_wordpiece_model(
        list(tokens), max_bytes_per_word, suffix_indicator, unknown_token, no_pretokenization,
        False))


@functools.lru_cache(maxsize=2)
def normalizer(lower_case_nfd_strip_accents):
    """The model of `tf_text.FastBertNormalizer(lower_case_nfd_strip_accents)`, a uint8
    tensor."""
    return _as_tensor(pywrap_fast_bert_normalizer_model_builder.build_fast_bert_normalizer_model(
        lower_case_nfd_strip_accents))


def _as_tensor(model):
    with tf.init_scope():  # eager even when a tokenizer is made while tracing: graphs share it
        return tf.constant(np.frombuffer(model, np.uint8))
