"""Vocabulary expansion with the tokens chosen from a corpus (tests/tokenization/test_coverage)."""

import pathlib

import keras
import pytest

import kbert
from kbert import vocab_expansion
from kbert.tokenization import coverage
from tests.conftest import TINY_CONFIG
from tests.tokenization.test_coverage import BEFORE
from tests.tokenization.test_coverage import CORPUS
from tests.tokenization.test_coverage import VOCAB
from tests.tools.runner import run_tool


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A tiny random BERT over the 19-token VOCAB (3 [unused] slots), as a Google release."""
    directory = tmp_path_factory.mktemp("corpus_release")
    vocab = directory / "source_vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    keras.utils.set_random_seed(0)
    config = kbert.BertConfig(**dict(TINY_CONFIG, vocab_size=len(VOCAB)))
    kbert.save_google_checkpoint(kbert.BertEncoder(**config.encoder_kwargs()),
                                 str(directory / "bert_model.ckpt"), vocab_file=str(vocab))
    vocab.unlink()
    return str(directory)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n\n", encoding="utf-8")
    return str(path)


def vocab_of(directory):
    return pathlib.Path(directory, "vocab.txt").read_text(encoding="utf-8").splitlines()


def test_more_candidates_than_slots_takes_the_most_frequent(release, corpus, tmp_path):
    out = str(tmp_path / "out")
    result = vocab_expansion.expand_from_corpus(release, corpus, out)
    assert [t for t, _ in result.candidates] == ["很", "书", "xyz", "ab", "qq"]
    assert result.expansion.added == {"很": 5, "书": 6, "xyz": 7}  # the three [unused] slots
    assert vocab_of(out) == list(VOCAB[:5]) + ["很", "书", "xyz"] + list(VOCAB[8:])
    assert result.before == BEFORE
    # Every CJK character known now; xyz (2 occurrences) whole; ab still split, qq still [UNK].
    assert result.after == coverage.Coverage(8, 8, 7, 6, 5)
    # All slots taken: a second round must append.
    with pytest.raises(ValueError, match=r"has no free \[unusedN\] slot; use mode='append'"):
        vocab_expansion.expand_from_corpus(out, corpus, str(tmp_path / "again"))


def test_max_new_tokens(release, corpus, tmp_path):
    result = vocab_expansion.expand_from_corpus(release, corpus, str(tmp_path / "out"),
                                                max_new_tokens=2)
    assert list(result.expansion.added) == ["很", "书"]
    assert result.after == coverage.Coverage(8, 8, 7, 6, 3)


def test_append_and_fallback_add_every_candidate(release, corpus, tmp_path):
    appended = vocab_expansion.expand_from_corpus(release, corpus, str(tmp_path / "a"),
                                                  mode="append")
    assert appended.expansion.added == {"很": 19, "书": 20, "xyz": 21, "ab": 22, "qq": 23}
    assert appended.after == coverage.Coverage(8, 8, 7, 7, 7)
    config = kbert.BertConfig.from_json_file(str(tmp_path / "a" / "bert_config.json"))
    assert config.vocab_size == 24
    fallback = vocab_expansion.expand_from_corpus(release, corpus, str(tmp_path / "f"),
                                                  fallback_to_append=True)
    assert fallback.expansion.added == {"很": 5, "书": 6, "xyz": 7, "ab": 19, "qq": 20}
    assert fallback.after == appended.after


def test_tsv_column(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("label\ttext_a\n" + "".join(f"1\t{t}\n" for t in CORPUS), encoding="utf-8")
    assert list(vocab_expansion.read_corpus(str(tsv), "text_a")) == CORPUS
    with pytest.raises(ValueError, match=r"train.tsv:1: no column 'text' in the header"):
        list(vocab_expansion.read_corpus(str(tsv), "text"))
    tsv.write_text("label\ttext_a\n1\tok\n0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"train.tsv:3: 1 tab-separated fields, expected 2"):
        list(vocab_expansion.read_corpus(str(tsv), "text_a"))
    # As Windows tools save it: a byte-order mark before the header, CRLF, blank lines at
    # the end; the mark is not part of the first column's name.
    tsv.write_bytes("\ufefftext_a\tlabel\r\n很好\t1\r\n\r\nxyz\t0\r\n\r\n".encode())
    assert list(vocab_expansion.read_corpus(str(tsv), "text_a")) == ["很好", "xyz"]
    plain = tmp_path / "corpus.txt"
    plain.write_bytes("\ufeff很好\r\n".encode())
    assert list(vocab_expansion.read_corpus(str(plain))) == ["很好"]
    plain.write_bytes(b"ok\n" + "很".encode("gbk") + b"\n")
    with pytest.raises(ValueError, match=r"corpus.txt:2: not UTF-8"):
        list(vocab_expansion.read_corpus(str(plain)))


def test_nothing_to_add(release, tmp_path):
    covered = tmp_path / "covered.txt"
    covered.write_text("好的 cat\n", encoding="utf-8")
    with pytest.raises(ValueError, match="already keeps every word whole; nothing to add"):
        vocab_expansion.expand_from_corpus(release, str(covered), str(tmp_path / "out"))


def test_tool_reads_a_tsv_column_and_prints_coverage(release, tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("label\ttext_a\n" + "".join(f"1\t{t}\n" for t in CORPUS), encoding="utf-8")
    result = run_tool("expand_vocab.py", f"--input_dir={release}",
                      f"--new_tokens_from_corpus={tsv}", "--corpus_column=text_a",
                      "--max_new_tokens=4", "--mode=append", f"--output_dir={tmp_path / 'out'}")
    assert result.returncode == 0, result.stderr
    assert "5 candidates, 4 added" in result.stdout
    assert "coverage before: CJK characters 37.50% known (3 of 8)" in result.stdout
    assert "coverage after:  CJK characters 100.00% known (8 of 8)" in result.stdout
    new_vocab = vocab_of(tmp_path / "out")
    assert new_vocab[19:] == ["很", "书", "xyz", "ab"]
