"""FullTokenizer: Google's BERT tokenization, computed in-graph with tensorflow-text ops.

Stock `tensorflow_text.BertTokenizer` is not Google's tokenizer (it case-folds with NFKC, keeps
words around deleted control characters apart, ignores U+2028 and limits words to 100 bytes),
so the basic tokenizer is written here with tf-text's regex and normalisation ops, following
Google's `tokenization.BasicTokenizer` step by step; WordPiece is tf-text's
`FastWordpieceTokenizer`.
"""

import re

import tensorflow as tf
import tensorflow_text as tf_text

from kbert.tokenization import vocab as vocab_lib

# As tokenization.py `_is_punctuation`: all ASCII non-letter/number symbols, and Unicode P*.
_PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# As `_tokenize_chinese_chars`: the CJK Unified Ideographs blocks Google lists.
_CJK = (r"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
        r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])")
# `_is_whitespace` (space, \t, \n, \r, Zs) becomes a space; `_is_control` (Cc, Cf but not
# \t\n\r), NUL and U+FFFD are deleted, joining their neighbours as Google does.
_WHITESPACE = r"[\t\n\r\p{Zs}]"
_DELETED = r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]"
# Python's str.split() also splits on U+2028/U+2029, which survive `_clean_text`.
_SPLIT = r"[ \x{2028}\x{2029}]+"
_MAX_WORD_CHARS = 200  # WordpieceTokenizer.max_input_chars_per_word


def basic_tokenize(texts, do_lower_case=True):
    """Google's BasicTokenizer on a string tensor [batch]: RaggedTensor of words [batch, (w)]."""
    x = tf.strings.regex_replace(texts, _WHITESPACE, " ")
    x = tf.strings.regex_replace(x, _DELETED, "")
    x = tf.strings.regex_replace(x, _CJK, r" \1 ")
    if do_lower_case:
        x = tf.strings.lower(x, encoding="utf-8")
        x = tf_text.normalize_utf8(x, "NFD")
        x = tf.strings.regex_replace(x, r"\p{Mn}", "")
    return tf_text.regex_split(x, f"{_SPLIT}|{_PUNCTUATION}", _PUNCTUATION)


class FullTokenizer:
    """Drop-in for Google's `tokenization.FullTokenizer`, in-graph.

    Args:
        vocab_file: str. `vocab.txt`, one token per line.
        do_lower_case: bool. Lower-case and strip accents (uncased models). Defaults to True.
        never_split: list of str or None. Vocab tokens emitted whole even with punctuation or
            capitals; defaults to `added_tokens.txt` beside `vocab_file` if present.

    Example:
    ```python
    tokenizer = kbert.FullTokenizer("vocab.txt", do_lower_case=True)
    tokenizer.tokenize("Hello, BERT!")  # ['hello', ',', 'bert', '!']
    ```
    """

    def __init__(self, vocab_file, do_lower_case=True, never_split=None):
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        tokens = vocab_lib.load_vocab(vocab_file)
        self.vocab = {token: i for i, token in enumerate(tokens)}
        self.inv_vocab = dict(enumerate(tokens))
        if never_split is None:
            never_split = vocab_lib.load_added_tokens(vocab_file)
        unknown = [t for t in never_split if t not in self.vocab]
        if unknown:
            raise ValueError(f"never_split tokens not in {vocab_file}: {unknown}")
        self.never_split = list(never_split)
        self._never_split_pattern = re.compile(
            "(" + "|".join(map(re.escape, sorted(self.never_split, key=len, reverse=True)))
            + ")") if self.never_split else None
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator="##", unknown_token="[UNK]",
            max_bytes_per_word=4 * _MAX_WORD_CHARS, no_pretokenization=True,
            token_out_type=tf.int32)

    def tokenize_ids(self, texts):
        """Token ids of a batch of strings: int32 RaggedTensor [batch, (pieces)]."""
        words = basic_tokenize(tf.convert_to_tensor(texts), self.do_lower_case)
        # A word over 200 characters is one [UNK], as Google's WordpieceTokenizer. Real words
        # never equal "[UNK]" (the brackets are split off as punctuation first).
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > _MAX_WORD_CHARS
        words = words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))
        return self._wordpiece.tokenize(words).merge_dims(1, 2)

    def tokenize(self, text):
        """Word pieces of one string, as Google's `FullTokenizer.tokenize`."""
        segments = (self._never_split_pattern.split(text) if self._never_split_pattern
                    else [text])
        pieces = []
        plain = [s for s in segments if s not in self.never_split]
        ids = self.tokenize_ids(plain).to_list() if plain else []
        plain_ids = iter(ids)
        for segment in segments:
            if segment in self.never_split:
                pieces.append(segment)
            else:
                pieces.extend(self.inv_vocab[i] for i in next(plain_ids))
        return pieces

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.inv_vocab[int(i)] for i in ids]
