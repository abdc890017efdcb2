"""FullTokenizer: Google's BERT tokenization in-graph, with character offsets.

Stock `tensorflow_text.BertTokenizer` is not Google's tokenizer: it case-folds with NFKC
(`Straße` -> `strasse`, `ﬁ` -> `fi`, full-width -> ASCII), keeps the words around a deleted
control or zero-width character apart (Google deletes it and joins them), does not split at
U+2028, and limits words to 100 bytes (Google: 200 characters). So the basic tokenizer is
written here with TensorFlow ops over code points, following `tokenization.BasicTokenizer`
step by step, and every character class and the uncased normalisation come from one lookup
table computed from Python's own `unicodedata` and `str.lower` (see `char_table`). WordPiece is
tf-text's `FastWordpieceTokenizer`, whose LinMaxMatch is exactly greedy longest-match-first.

Most texts take a shortcut: tf-text's `FastBertTokenizer`, about 3x faster, for the texts on
which it gives exactly Google's ids (printable ASCII, and characters checked at start-up; see
`shortcut`). The two paths agree on all such texts (tested against Google's code and each
other).

Each step keeps, for every output character, the index of the input character it came from,
which gives every word piece its span in the input in characters (Python `str` indices).
"""

import functools
import os
import re
from typing import NamedTuple

import tensorflow as tf
import tensorflow_text as tf_text

from kbert.tokenization import char_table
from kbert.tokenization import shortcut
from kbert.tokenization import vocab as vocab_lib
from kbert.tokenization import wordpiece_models

MAX_CHARS_PER_WORD = 200  # as tokenization.py WordpieceTokenizer.max_input_chars_per_word
_ASCII_WHITESPACE = (ord(" "), ord("\t"), ord("\n"), ord("\r"))
_STRING_BATCH = tf.TensorSpec([None], tf.string)


class WordPieces(NamedTuple):
    """Word pieces of one text with their spans (Python `str` indices) and word indices."""

    tokens: list
    begins: list
    ends: list
    word_ids: list


class FullTokenizer:
    """Drop-in for Google's `tokenization.FullTokenizer`, computed in-graph.

    `tokenize` returns exactly Google's tokens; `tokenize_ids` and `tokenize_ids_with_offsets`
    work on a whole batch of strings at once, in a `tf.function` or `tf.data` pipeline too.

    Offsets are character indices into the input `str` (code points, as Python indexes
    strings; not bytes): `text[begin:end]` is the text a piece came from. A piece's span starts
    at its first character and runs to the next character that produces output or is
    whitespace, so accents, control and zero-width characters after a piece belong to it.
    Pieces of one expanded character (a Hangul syllable decomposes into jamo) share its span.
    `word_ids` number the words of the text split at whitespace as the tokenizer sees it
    (Google's `_is_whitespace` plus U+2028/U+2029; control characters such as \\x0b are
    deleted, not whitespace).

    Args:
        vocab_file: str, os.PathLike or `Vocab`. `vocab.txt`, one token per line.
        do_lower_case: bool. Lower-case and strip accents (uncased models). Defaults to True.
        never_split: list of str or None. Vocab tokens emitted whole, unchanged by
            lower-casing or punctuation splitting, wherever they occur in the text on word
            boundaries (whitespace, punctuation, CJK, start or end). Case-sensitive.
            Defaults to the tokens in `added_tokens.txt` beside `vocab_file`, if present.
            `[CLS]`, `[MASK]` etc. in text are split as Google does unless listed here.

    Example:
    ```python
    tokenizer = kbert.FullTokenizer("vocab.txt", do_lower_case=True)
    tokenizer.tokenize("Unaffable, BERT!")  # ['una', '##ffa', '##ble', ',', 'bert', '!']
    tokenizer.tokenize_ids(["Hello world", "Hi"])  # <tf.RaggedTensor [[7592, 2088], [7632]]>
    ```
    """

    def __init__(self, vocab_file, do_lower_case=True, never_split=None):
        if isinstance(vocab_file, vocab_lib.Vocab):
            vocab = vocab_file
        elif not isinstance(vocab_file, (str, os.PathLike)):
            raise TypeError(f"FullTokenizer needs vocab_file, the path of a vocab.txt (or a "
                            f"kbert Vocab); got {_kind(vocab_file)}")
        else:
            vocab = vocab_lib.load_vocab(vocab_file)
            if never_split is None:
                never_split = vocab_lib.load_added_tokens(vocab_file)
        self.vocab_file = vocab.path
        self.do_lower_case = do_lower_case
        self.never_split = list(never_split or [])
        unknown = [t for t in self.never_split if t not in vocab]
        if unknown:
            raise ValueError(f"never_split tokens not in {vocab.path or 'the vocabulary'}: "
                             f"{unknown}")
        self.vocab = dict(vocab.ids)
        self.inv_vocab = dict(enumerate(vocab.tokens))
        self._graphs = _tokenizer_graphs(vocab.tokens, do_lower_case, tuple(self.never_split))

    def tokenize(self, text):
        """Word pieces of one string (str, or UTF-8 bytes), exactly as Google's `tokenize`."""
        ids = self._graphs.ids_function(_one_text(text)).flat_values.numpy()
        return [self.inv_vocab[i] for i in ids.tolist()]

    def tokenize_with_offsets(self, text):
        """Word pieces of one string with their character spans and word indices.

        Args:
            text: str.

        Returns:
            `WordPieces` of lists: tokens (str), begins and ends (int: `text[begin:end]` is
            the piece's source) and word_ids (int: index in the whitespace-split text).
        """
        out = self._graphs.offsets_function(_one_text(text))
        ids, begins, ends, words = (out[k].flat_values.numpy().tolist()
                                    for k in ("token_ids", "begins", "ends", "word_ids"))
        return WordPieces([self.inv_vocab[i] for i in ids], begins, ends, words)

    def tokenize_ids(self, texts):
        """Token ids of a batch of strings, in-graph.

        Args:
            texts: string tensor (or list of str) [batch].

        Returns:
            int32 RaggedTensor [batch, (pieces)].
        """
        return _call(self._graphs.ids_function, texts)

    def tokenize_ids_with_offsets(self, texts):
        """Token ids of a batch of strings with character spans and word indices, in-graph.

        Args:
            texts: string tensor (or list of str) [batch].

        Returns:
            dict of RaggedTensors [batch, (pieces)]: `token_ids` (int32), `begins` and `ends`
            (int64 character indices into each text; see the class docstring) and
            `word_ids` (int64 index of the whitespace-separated word of each piece).
        """
        return _call(self._graphs.offsets_function, texts)

    def basic_tokenize(self, texts):
        """Google's `BasicTokenizer` (never_split included) on texts [batch]: [batch, (words)].

        Args:
            texts: string tensor (or list of str) [batch].

        Returns:
            string RaggedTensor [batch, (words)], normalised as WordPiece sees them.
        """
        return _call(self._graphs.words_function, texts)

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.inv_vocab[int(i)] for i in ids]


@functools.lru_cache(maxsize=4)
def _tokenizer_graphs(tokens, do_lower_case, never_split):
    """One `_TokenizerGraphs` per vocabulary and options in a process, so a second
    `FullTokenizer` of them traces nothing (its first batch: ~0.3 s for ids and ~1 s with
    offsets, MiniLM's vocab). Built eagerly (`init_scope`), even from inside a trace, so every
    graph and eager call may capture its tensors."""
    with tf.init_scope():
        return _TokenizerGraphs(tokens, do_lower_case, never_split)


class _TokenizerGraphs:
    """The ops of `FullTokenizer` for one vocabulary and options, and their `tf.function`s."""

    def __init__(self, tokens, do_lower_case, never_split):
        self._unk_token = "[UNK]"
        self._basic = _BasicTokenizer(do_lower_case, never_split)
        # A word over MAX_CHARS_PER_WORD characters (at most 4 bytes each) is replaced by
        # [UNK] before WordPiece, so the byte limit below never decides.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            model_buffer=wordpiece_models.wordpiece(
                tokens, "##", self._unk_token, 4 * MAX_CHARS_PER_WORD, True),
            token_out_type=tf.int32)
        self._fast = tf_text.FastBertTokenizer(
            fast_wordpiece_model_buffer=wordpiece_models.wordpiece(
                tokens, "##", self._unk_token, MAX_CHARS_PER_WORD, False),
            fast_bert_normalizer_model_buffer=wordpiece_models.normalizer(do_lower_case),
            token_out_type=tf.int32)
        self._fast_text = shortcut.fast_text_pattern(do_lower_case)
        # A text containing a never_split token (anywhere: cheap to test, rarely true) takes
        # the character-level path, which knows them.
        self._never_split_search = (f"(?s).*(?:{self._basic.never_split_pattern}).*"
                                    if self._basic.never_split_pattern else None)
        self.ids_function = _compile(self.ids)
        self.offsets_function = _compile(self.ids_with_offsets)
        self.words_function = _compile(self.words)

    @tf.autograph.experimental.do_not_convert
    def words(self, texts):
        return self._basic.segment(texts).words_by_row()

    @tf.autograph.experimental.do_not_convert
    def ids(self, texts):
        return self._by_route(texts, self._fast.tokenize, self._exact_ids)

    @tf.autograph.experimental.do_not_convert
    def ids_with_offsets(self, texts):
        return self._by_route(texts, self._fast_ids_with_offsets, self._exact_ids_with_offsets)

    def _by_route(self, texts, fast_function, exact_function):
        """`fast_function` on the texts FastBertTokenizer gets right, `exact_function` on the
        others, and their rows (RaggedTensors, or a dict of them) back in the input order."""
        fast = tf.strings.regex_full_match(texts, self._fast_text)
        if self._never_split_search:
            fast &= ~tf.strings.regex_full_match(texts, self._never_split_search)
        fast_rows = tf.where(fast)[:, 0]
        exact_rows = tf.where(~fast)[:, 0]
        parts = (fast_function(tf.gather(texts, fast_rows)),
                 exact_function(tf.gather(texts, exact_rows)))
        order = tf.math.invert_permutation(tf.concat([fast_rows, exact_rows], 0))
        return tf.nest.map_structure(lambda a, b: tf.gather(tf.concat([a, b], 0), order),
                                     *parts)

    def _fast_ids_with_offsets(self, texts):
        ids, begins, ends = self._fast.tokenize_with_offsets(texts)
        # Its offsets are bytes: count the characters (UTF-8 lead bytes) before them, and the
        # whitespace words (all whitespace is ASCII here) that start at or before a piece.
        spaced = " " + texts  # every text starts after whitespace
        text_bytes = tf.cast(tf.io.decode_raw(tf.strings.reduce_join(spaced), tf.uint8),
                             tf.int32)
        is_space = tf.reduce_any(
            tf.equal(text_bytes[:, None], tf.constant(_ASCII_WHITESPACE)), axis=1)
        is_lead = tf.not_equal(tf.bitwise.bitwise_and(text_bytes, 0xC0), 0x80)
        chars_before = tf.concat([[0], tf.cumsum(tf.cast(is_lead, tf.int64))], 0)
        words_so_far = tf.cumsum(tf.cast(~is_space & _shift(is_space, True), tf.int64))
        text_start = tf.cumsum(tf.cast(tf.strings.length(spaced), tf.int64), exclusive=True)
        piece_start = tf.gather(text_start, ids.value_rowids()) + 1  # the text's first byte
        first_char = tf.gather(chars_before, piece_start)

        def characters(byte_offsets):
            return ids.with_flat_values(
                tf.gather(chars_before, piece_start + byte_offsets.flat_values) - first_char)

        word_ids = (tf.gather(words_so_far, piece_start + begins.flat_values)
                    - tf.gather(words_so_far, piece_start - 1) - 1)
        return {"token_ids": ids, "begins": characters(begins), "ends": characters(ends),
                "word_ids": ids.with_flat_values(word_ids)}

    @tf.autograph.experimental.do_not_convert
    def _exact_ids(self, texts):
        words = self._basic.segment(texts)
        pieces = self._wordpiece.tokenize(self._unk_long_words(words))
        return tf.RaggedTensor.from_row_splits(
            pieces.flat_values, tf.gather(pieces.row_splits, words.row_splits),
            validate=False)

    @tf.autograph.experimental.do_not_convert
    def _exact_ids_with_offsets(self, texts):
        words = self._basic.segment(texts)
        pieces, starts, ends = self._wordpiece.tokenize_with_offsets(
            self._unk_long_words(words))
        piece_word = _repeat_index(pieces.row_lengths())
        # Byte offsets inside each word -> positions in the stream of output characters.
        out = words.out
        byte_length = (1 + tf.cast(out >= 0x80, tf.int64) + tf.cast(out >= 0x800, tf.int64)
                       + tf.cast(out >= 0x10000, tf.int64))
        char_of_byte = _repeat_index(byte_length)
        word_bytes = tf.gather(tf.concat([[0], tf.cumsum(byte_length)], 0), words.word_splits)
        word_start = tf.gather(word_bytes, piece_word)
        end_byte = tf.where(tf.gather(words.too_long, piece_word),
                            tf.gather(word_bytes, piece_word + 1),
                            word_start + ends.flat_values)
        first = tf.gather(char_of_byte, word_start + starts.flat_values)
        last = tf.gather(char_of_byte, end_byte - 1)
        row_splits = tf.gather(pieces.row_splits, words.row_splits)
        begins, ends, word_ids = words.source_spans(first, last, row_splits)

        def ragged(values):
            return tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)

        return {"token_ids": ragged(pieces.flat_values), "begins": ragged(begins),
                "ends": ragged(ends), "word_ids": ragged(word_ids)}

    def _unk_long_words(self, words):
        # As WordpieceTokenizer: a word over 200 characters is one [UNK]. Real words never
        # equal "[UNK]": its brackets are split off as punctuation first.
        return tf.where(words.too_long, self._unk_token, words.words)


def basic_tokenize(texts, do_lower_case=True):
    """Google's `BasicTokenizer` on texts [batch]: string RaggedTensor of words [batch, (w)]."""
    return _call(_basic_words_function(do_lower_case), texts)


@functools.lru_cache(maxsize=2)
def _basic_words_function(do_lower_case):
    with tf.init_scope():  # eager tensors, which every graph may capture
        basic = _BasicTokenizer(do_lower_case)
    return _compile(lambda texts: basic.segment(texts).words_by_row())


def _kind(value):
    """How an error names a value of the wrong type: "None", "int", "an int32 tensor"."""
    if value is None:
        return "None"
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        name = f"{getattr(dtype, 'name', dtype)} {type(value).__name__}"
        return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
    return type(value).__name__


def string_tensor(texts):
    """`texts` (str, bytes, nested lists of them, or a string tensor) as a tf.string tensor.

    Raises:
        TypeError: for anything else (None, numbers, an int tensor), saying what it got.
    """
    if isinstance(texts, (tf.Tensor, tf.RaggedTensor)) and texts.dtype != tf.string:
        raise TypeError(f"expected text (str, or a string tensor), got {_kind(texts)}")
    try:
        return tf.convert_to_tensor(texts, tf.string)
    except (TypeError, ValueError):
        raise TypeError(f"expected text (str, or a list or tensor of strings), got "
                        f"{_kind(texts)}") from None


def _one_text(text):
    """One text as a batch of one; errors say what `tokenize` takes."""
    if isinstance(text, (str, bytes)) or (isinstance(text, tf.Tensor) and text.shape.rank == 0
                                          and text.dtype == tf.string):
        return tf.reshape(tf.convert_to_tensor(text, tf.string), [1])
    raise TypeError(f"tokenize takes one str (or UTF-8 bytes), got {_kind(text)}; "
                    "tokenize_ids takes a batch")


def _as_batch(texts):
    texts = string_tensor(texts)
    if texts.shape.rank != 1:
        raise ValueError(f"expected a batch of strings [batch], got shape {texts.shape}")
    return texts


def _compile(graph_builder):
    """A tf.function over a batch of strings (no autograph: the code has no Python control
    flow on tensors, and converting it would only slow tracing down)."""
    return tf.function(graph_builder, input_signature=[_STRING_BATCH], autograph=False)


def _call(function, texts):
    """`function`, a tokenizer's `tf.function`, on a batch of strings: run eagerly, or called
    from the graph being traced (a SavedModel's signature, a `tf.data` map), so the tokenizer's
    graph is traced once per vocabulary and options in a process, not into every caller."""
    return function(_as_batch(texts))


class _BasicTokenizer:
    """The character-level half of the tokenizer: texts -> normalised words, with sources."""

    def __init__(self, do_lower_case, never_split=()):
        self.do_lower_case = do_lower_case
        block_starts, blocks, expansions = char_table.build_char_table(do_lower_case)
        self._block_starts = tf.constant(block_starts)
        self._blocks = tf.constant(blocks)
        self._expansions = tf.constant(expansions)
        # Longest first: RE2 alternation takes the first alternative that matches.
        self.never_split_pattern = "|".join(
            re.escape(t) for t in sorted(never_split, key=len, reverse=True)) or None

    def _lookup(self, code_points):
        """char_table entries of int32 code points."""
        block_start = tf.gather(self._block_starts,
                                tf.bitwise.right_shift(code_points, char_table.BLOCK_BITS))
        return tf.gather(self._blocks, block_start + tf.bitwise.bitwise_and(
            code_points, char_table.BLOCK_SIZE - 1))

    @tf.autograph.experimental.do_not_convert
    def segment(self, texts):
        """Runs the basic tokenizer on `texts` [batch]; returns `_Words`."""
        # A space after every text makes every text boundary a whitespace boundary too.
        spaced = texts + " "
        if self.never_split_pattern:
            chars, byte_offsets = tf.strings.unicode_decode_with_offsets(
                spaced, "UTF-8", errors="replace")
        else:
            chars = tf.strings.unicode_decode(spaced, "UTF-8", errors="replace")
        code_points = chars.flat_values  # invalid UTF-8 -> U+FFFD, which Google deletes
        row_splits = chars.row_splits
        info = self._lookup(code_points)
        length = _bits(info, char_table.LENGTH_SHIFT, 3)
        kind = tf.bitwise.bitwise_and(info, char_table.KIND_MASK)
        protected = match_start = None
        if self.never_split_pattern:
            protected, match_start = self._protect(spaced, byte_offsets, row_splits, info, kind)
            length = tf.where(protected, 1, length)
            kind = tf.where(protected, char_table.OTHER, kind)

        def plain():
            # No text has a special character (see char_table): every input character is
            # whitespace or outputs exactly one character, so a gap in the sources is
            # whitespace, and punctuation and CJK characters are words by themselves.
            source, out, alone = _one_output_each(code_points, info, length)
            breaks = ((source - _shift(source, tf.constant(-2, tf.int64)) > 1)
                      | alone | _shift(alone, False))
            return source, out, breaks

        def general():
            return self._general_segment(code_points, row_splits, info, length, kind,
                                         protected, match_start)

        if protected is not None:
            source, out, breaks = general()
        else:
            special = tf.reduce_any(tf.not_equal(
                tf.bitwise.bitwise_and(info, char_table.SPECIAL), 0))
            source, out, breaks = tf.cond(special, general, plain)
        word_start = tf.where(breaks)[:, 0]
        num_out = tf.size(out, out_type=tf.int64)
        word_splits = tf.concat([word_start, num_out[None]], 0)
        word_chars = tf.RaggedTensor.from_row_splits(out, word_splits, validate=False)
        return _Words(
            words=tf.strings.unicode_encode(word_chars, "UTF-8"),
            word_splits=word_splits,
            row_splits=tf.searchsorted(tf.gather(source, word_start), row_splits,
                                       out_type=tf.int64),
            too_long=word_chars.row_lengths() > MAX_CHARS_PER_WORD,
            out=out, source=source, kind=kind, length=length, char_row_splits=row_splits)

    def _general_segment(self, code_points, row_splits, info, length, kind, protected,
                         match_start):
        """Output characters, their sources and word breaks, for any text.

        `_clean_text` and, uncased, `token.lower()` + `_run_strip_accents`: every input
        character becomes 0 to 3 output characters; `source` maps outputs to inputs.

        Returns:
            (source, out, breaks): int64, int32 and bool [out].
        """
        def one_each():
            source, out, alone = _one_output_each(code_points, info, length)
            return source, out, alone, tf.ones_like(alone)

        def expanded():  # Hangul, some Indic vowels
            source = _repeat_index(length)
            within = tf.range(tf.size(source, out_type=tf.int64)) - tf.gather(
                tf.cumsum(tf.cast(length, tf.int64), exclusive=True), source)
            value = tf.gather(tf.bitwise.right_shift(info, char_table.VALUE_SHIFT), source)
            expands = tf.gather(length, source) > 1
            expansion = tf.gather(self._expansions,
                                  tf.where(expands, value + tf.cast(within, tf.int32), 0))
            out = tf.where(expands, expansion, tf.gather(code_points, source) + value)
            punctuation = tf.not_equal(
                tf.bitwise.bitwise_and(self._lookup(out), char_table.PUNCTUATION), 0)
            return source, out, punctuation, _differs_from_previous(source)

        source, out, punctuation, new_source = tf.cond(
            tf.reduce_any(length > 1), expanded, one_each)
        if protected is not None:
            out_protected = tf.gather(protected, source)
            out = tf.where(out_protected, tf.gather(code_points, source), out)
            punctuation &= ~out_protected
        if self.do_lower_case:
            out = self._final_sigma(out, code_points, info, protected, length, row_splits)

        # Word boundaries: whitespace between two output characters (a text ends in one), a
        # punctuation character (`_run_split_on_punc`, on the normalised text), a CJK
        # character (`_tokenize_chinese_chars`, on the input text), a never_split match.
        separators = tf.cumsum(tf.cast(tf.equal(kind, char_table.SPACE), tf.int32))
        cjk = tf.equal(tf.gather(kind, source), char_table.CJK)
        breaks = (_differs_from_previous(tf.gather(separators, source))
                  | punctuation | _shift(punctuation, False)
                  | (new_source & (cjk | _shift(cjk, False))))
        if protected is not None:
            breaks |= tf.gather(match_start, source) | (_shift(out_protected, False)
                                                        & ~out_protected)
        return source, out, breaks

    def _final_sigma(self, out, code_points, info, protected, length, row_splits):
        """`str.lower` maps U+03A3 to final sigma after a cased letter, unless one follows.

        Case-ignorable characters in between are skipped, as Python's `handle_capital_sigma`;
        deleted characters count as ignorable, and whitespace and CJK stop the scan (the table
        says so), as Google lower-cases each whitespace token after cleaning the text.
        """
        is_sigma = tf.equal(code_points, char_table.CAPITAL_SIGMA)
        if protected is not None:
            is_sigma &= ~protected

        def apply():
            case = _bits(info, char_table.CASE_SHIFT, 3)
            if protected is not None:
                case = tf.where(protected, char_table.NEITHER, case)
            stops = tf.not_equal(case, char_table.IGNORABLE)
            stop_positions = tf.where(stops)[:, 0]
            num_stops = tf.size(stop_positions, out_type=tf.int64)
            sigma = tf.where(is_sigma)[:, 0]
            rank = tf.gather(tf.cumsum(tf.cast(stops, tf.int64)), sigma) - 1  # Σ is a stop
            sigma_row = tf.searchsorted(row_splits, sigma, side="right", out_type=tf.int64) - 1
            previous = tf.gather(stop_positions, tf.maximum(rank - 1, 0))
            following = tf.gather(stop_positions, tf.minimum(rank + 1, num_stops - 1))
            after_cased = ((rank >= 1) & (previous >= tf.gather(row_splits, sigma_row))
                           & tf.equal(tf.gather(case, previous), char_table.CASED))
            before_cased = ((rank + 1 < num_stops)
                            & (following < tf.gather(row_splits, sigma_row + 1))
                            & tf.equal(tf.gather(case, following), char_table.CASED))
            small = tf.where(after_cased & ~before_cased, char_table.FINAL_SIGMA,
                             char_table.SMALL_SIGMA)
            position = tf.gather(tf.cumsum(tf.cast(length, tf.int64), exclusive=True), sigma)
            return tf.tensor_scatter_nd_update(out, position[:, None], small)

        return tf.cond(tf.reduce_any(is_sigma), apply, lambda: out)

    def _protect(self, texts, byte_offsets, row_splits, info, kind):
        """Characters inside never_split matches that sit on word boundaries.

        Returns:
            (protected, match_start): bool [chars] each.
        """
        pattern = self.never_split_pattern
        parts, part_begin, part_end = tf_text.regex_split_with_offsets(texts, pattern, pattern)
        is_match = tf.strings.regex_full_match(parts.flat_values, pattern)
        text_bytes = tf.cast(tf.concat(
            [[0], tf.cumsum(tf.strings.length(texts, unit="BYTE"))], 0), tf.int64)
        part_base = tf.gather(text_bytes, _repeat_index(parts.row_lengths()))
        num_chars = tf.size(kind, out_type=tf.int64)
        rows = _repeat_index(row_splits[1:] - row_splits[:-1])
        char_bytes = byte_offsets.flat_values + tf.gather(text_bytes, rows)
        begin = tf.searchsorted(
            char_bytes, tf.boolean_mask(part_begin.flat_values + part_base, is_match),
            out_type=tf.int64)
        end = tf.searchsorted(
            char_bytes, tf.boolean_mask(part_end.flat_values + part_base, is_match),
            out_type=tf.int64)
        # A match counts only where Google would end a word anyway on both sides: it starts
        # or ends with punctuation or CJK, or its neighbour (deleted characters skipped) is
        # whitespace, punctuation, CJK or the end of the text.
        ends_word = (tf.not_equal(tf.bitwise.bitwise_and(info, char_table.PUNCTUATION), 0)
                     | tf.equal(kind, char_table.CJK))
        separates = ends_word | tf.equal(kind, char_table.SPACE)
        kept = tf.not_equal(kind, char_table.DELETE)
        kept_positions = tf.concat([tf.where(kept)[:, 0], num_chars[None]], 0)
        kept_before = tf.concat([[0], tf.cumsum(tf.cast(kept, tf.int64))], 0)
        match_row = tf.gather(rows, begin)
        rank = tf.gather(kept_before, begin)  # kept characters before the match
        previous = tf.gather(kept_positions, tf.maximum(rank - 1, 0))
        has_previous = (rank >= 1) & (previous >= tf.gather(row_splits, match_row))
        following = tf.gather(kept_positions, tf.gather(kept_before, end))
        has_following = following < tf.gather(row_splits, match_row + 1)
        last_char = tf.maximum(num_chars - 1, 0)
        valid = ((~has_previous | tf.gather(separates, tf.minimum(previous, last_char))
                  | tf.gather(ends_word, begin))
                 & (~has_following | tf.gather(separates, tf.minimum(following, last_char))
                    | tf.gather(ends_word, end - 1)))
        begin, end = tf.boolean_mask(begin, valid), tf.boolean_mask(end, valid)
        shape = num_chars[None] + 1
        starts = tf.scatter_nd(begin[:, None], tf.ones_like(begin), shape)
        depth = starts - tf.scatter_nd(end[:, None], tf.ones_like(end), shape)
        return tf.cumsum(depth)[:-1] > 0, starts[:-1] > 0


class _Words(NamedTuple):
    """The basic tokenizer's output: words [words] and how to map them back to the input."""

    words: tf.Tensor  # string [words], normalised
    word_splits: tf.Tensor  # int64 [words + 1]: word boundaries in the output characters
    row_splits: tf.Tensor  # int64 [batch + 1]: words of each text
    too_long: tf.Tensor  # bool [words]: over MAX_CHARS_PER_WORD characters
    out: tf.Tensor  # int32 [out]: the output characters (code points), word after word
    source: tf.Tensor  # int64 [out]: input character of each output character
    kind: tf.Tensor  # int32 [chars]: char_table kind of each input character
    length: tf.Tensor  # int32 [chars]: output characters of each input character
    char_row_splits: tf.Tensor  # int64 [batch + 1]: characters of each text, plus a space

    def words_by_row(self):
        return tf.RaggedTensor.from_row_splits(self.words, self.row_splits, validate=False)

    def source_spans(self, first, last, row_splits):
        """Spans and word ids of pieces made of output characters `first..last` (inclusive).

        Args:
            first, last: int64 [pieces].
            row_splits: int64 [batch + 1]: the pieces of each text.

        Returns:
            (begins, ends, word_ids): int64 [pieces], relative to each piece's text.
        """
        num_chars = tf.size(self.kind, out_type=tf.int64)
        begin = tf.gather(self.source, first)
        last_source = tf.gather(self.source, last)
        # The span runs on over characters that output nothing (deleted, stripped accents)
        # up to the next character that outputs something or is whitespace.
        is_space = tf.equal(self.kind, char_table.SPACE)
        visible = (self.length > 0) | is_space
        visible_positions = tf.concat([tf.where(visible)[:, 0], num_chars[None]], 0)
        following = tf.gather(visible_positions,
                              tf.gather(tf.cumsum(tf.cast(visible, tf.int64)), last_source))
        row = _repeat_index(row_splits[1:] - row_splits[:-1])
        row_start = tf.gather(self.char_row_splits, row)
        end = tf.minimum(following, tf.gather(self.char_row_splits, row + 1))
        # Whitespace-separated words: a non-space character after a space or a text start
        # (every text ends in a space).
        word_start = ~is_space & _shift(is_space, True)
        words_before = tf.concat([[0], tf.cumsum(tf.cast(word_start, tf.int64))], 0)
        word_ids = tf.gather(words_before, begin + 1) - tf.gather(words_before, row_start) - 1
        return begin - row_start, end - row_start, word_ids


def _one_output_each(code_points, info, length):
    """Where every character outputs at most one: the sources of the outputs (int64), the
    outputs (int32) and whether each is a word by itself (bool), [out]."""
    source = tf.where(length > 0)[:, 0]
    source_info = tf.gather(info, source)
    out = tf.gather(code_points, source) + tf.bitwise.right_shift(
        source_info, char_table.VALUE_SHIFT)
    return source, out, tf.not_equal(tf.bitwise.bitwise_and(source_info, char_table.ALONE), 0)


def _bits(value, shift, mask):
    return tf.bitwise.bitwise_and(tf.bitwise.right_shift(value, shift), mask)


def _repeat_index(lengths):
    """[0] * lengths[0] + [1] * lengths[1] + ...: int64 [sum(lengths)].

    As `tf.repeat(tf.range(n), lengths)`, in linear time (tf.repeat builds an [n, max] mask).
    """
    lengths = tf.cast(lengths, tf.int64)
    nonzero = tf.where(lengths > 0)[:, 0]
    starts = tf.gather(tf.cumsum(lengths, exclusive=True), nonzero)
    steps = nonzero - _shift(nonzero, tf.constant(0, tf.int64))
    return tf.cumsum(tf.scatter_nd(starts[:, None], steps, tf.reduce_sum(lengths)[None]))


def _shift(values, first):
    """`values` moved one place on: [first, values[0], ..., values[-2]] (empty stays empty)."""
    return tf.concat([tf.fill(tf.shape(values[:1]), first), values[:-1]], 0)


def _differs_from_previous(values):
    """True where an element differs from the one before it, and at the first."""
    first = tf.ones_like(values[:1], tf.bool)
    return tf.concat([first, tf.not_equal(values[1:], values[:-1])], 0)
