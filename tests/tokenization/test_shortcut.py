"""The FastBertTokenizer shortcut: which texts take it, and that both paths agree on them."""

import functools

import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from kbert.tokenization import shortcut
from kbert.tokenization import tokenizer as tokenizer_lib
from tests.tokenization.test_tokenizer import HARD_CASES
from tests.tokenization.test_tokenizer import sample_texts
from tests.tokenization.test_tokenizer_properties import PROPERTY
from tests.tokenization.test_tokenizer_properties import TEXT_BATCHES


def test_characters_tf_text_normalises_its_own_way_are_not_safe():
    uncased, cased = set(shortcut.safe_characters(True)), set(shortcut.safe_characters(False))
    # FastBertTokenizer lower-cases "ß" to "ss" and expands "…" and "½" (NFKC-like); Google
    # keeps them. Accented letters and dashes are the common characters that do agree.
    assert not {ord("ß"), ord("…"), ord("½")} & uncased
    assert {ord("é"), ord("–"), ord("’"), ord("ö")} <= uncased
    assert {ord("ß"), ord("é"), ord("É")} <= cased  # cased: no normalisation at all
    # Never whitespace, deleted or combining characters; uncased, nor characters that
    # expand ("ŉ" -> "ʼn") or depend on context (capital sigma).
    assert not {0xA0, 0x2028, 0xAD, 0x301} & (uncased | cased)
    assert not {0x149, 0x3A3} & uncased


@pytest.mark.parametrize("text, fast", [
    ("plain ASCII, even " + "x" * 300 + " long words", True),
    ("naïve café – fine", True),
    ("a run of " + "é" * 50 + " is fine", True),
    ("a run of " + "é" * 51 + " is not: 200 bytes may be under 200 characters", False),
    ("Straße", False),  # uncased "ß"
    ("no\u00a0break", False),
    ("zero\u200bwidth", False),
    ("tab\tnew\nline\rreturn", True),
    ("vertical\x0btab", False),
    ("", True),
])
def test_route(text, fast):
    pattern = shortcut.fast_text_pattern(True)
    assert bool(tf.strings.regex_full_match(text, pattern)) == fast


@functools.cache
def _exact_path(tokenizer):
    return tokenizer_lib._compile(tokenizer._graphs._exact_ids_with_offsets)


def assert_paths_agree(tokenizer, texts):
    """The routed tokenizer (shortcut where it applies) equals the character-level path."""
    exact = _exact_path(tokenizer)(tf.constant(texts))
    routed = tokenizer.tokenize_ids_with_offsets(texts)
    for key in ("token_ids", "begins", "ends", "word_ids"):
        assert routed[key].to_list() == exact[key].to_list(), key
    assert tokenizer.tokenize_ids(texts).to_list() == exact["token_ids"].to_list()


@pytest.mark.parametrize("lower", [True, False])
def test_both_paths_agree_on_real_text(kbert_tokenizer, lower):
    texts = sample_texts() + HARD_CASES + ["é" * 150 + " x", "a " * 50 + "ü" * 50]
    takes = tf.strings.regex_full_match(texts, shortcut.fast_text_pattern(lower)).numpy()
    assert 1000 < takes.sum() < len(texts)
    assert any(fast and not text.isascii() for text, fast in zip(texts, takes, strict=True))
    assert_paths_agree(kbert_tokenizer(lower), texts)


@pytest.mark.parametrize("lower", [True, False])
def test_both_paths_agree_on_random_text(kbert_tokenizer, lower):
    @PROPERTY
    @given(texts=st.one_of(TEXT_BATCHES["shortcut"], TEXT_BATCHES["hard"]))
    def check(texts):
        assert_paths_agree(kbert_tokenizer(lower), texts)

    check()
