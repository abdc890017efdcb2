"""Corpus words the vocab misses, their ranking, and coverage, against hand counts."""

import pytest

import kbert
from kbert.tokenization import coverage

# 19 tokens: 3 [unused] slots, 好 is the only CJK character known.
VOCAB = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]", "[unused2]",
         "好", "的", "，", "。", "cat", "a", "##b", "b", "x", "##y", "##z")
# Words (basic tokenizer, uncased):
#   1: 好 书 ， 很 好 。        CJK 好 书 很 好; other ， 。 (known, whole)
#   2: cat ab xyz qq 很        other cat (whole), ab (a ##b), xyz (x ##y ##z), qq ([UNK]); CJK 很
#   3: 书 很 好 xyz            CJK 书 很 好; other xyz (split)
CORPUS = ["好书，很好。", "Cat AB xyz qq 很", "书很好 XYZ"]
# CJK: 8 characters, 3 known (好 x3). Other words: 7; known 6 (all but qq); whole 3 (， 。 cat).
BEFORE = coverage.Coverage(cjk_chars=8, cjk_known=3, words=7, words_known=6, words_whole=3)
# Missed, by count; 书 and xyz tie at 2 and 书 is seen first; ab and qq tie at 1, ab first.
MISSED = [("很", 3), ("书", 2), ("xyz", 2), ("ab", 1), ("qq", 1)]


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    return str(path)


def test_counts_rank_and_coverage(vocab_file):
    tokenizer = kbert.FullTokenizer(vocab_file, do_lower_case=True)
    counts = coverage.count_words(CORPUS, tokenizer)
    assert list(counts)[:6] == ["好", "书", "，", "很", "。", "cat"]  # first-occurrence order
    assert counts["好"] == 3 and counts["xyz"] == 2 and counts["cat"] == 1
    measured, missed = coverage.measure(counts, tokenizer)
    assert measured == BEFORE
    assert missed == MISSED  # 好 and cat, in the vocab, are never candidates
    assert measured.cjk_share == 3 / 8 and measured.whole_share == 3 / 7
    assert str(measured).startswith("CJK characters 37.50% known (3 of 8); other words 85.71%")


def test_ties_follow_first_occurrence_not_the_alphabet(vocab_file):
    tokenizer = kbert.FullTokenizer(vocab_file, do_lower_case=True)
    _, missed = coverage.measure(coverage.count_words(["qq ab 书 xyz", "xyz 书"], tokenizer),
                                 tokenizer)
    assert missed == [("书", 2), ("xyz", 2), ("qq", 1), ("ab", 1)]


def test_empty_corpus_counts_as_covered(vocab_file):
    tokenizer = kbert.FullTokenizer(vocab_file, do_lower_case=True)
    measured, missed = coverage.measure(coverage.count_words(["", "  "], tokenizer), tokenizer)
    assert missed == [] and measured.cjk_share == measured.word_share == 1.0
