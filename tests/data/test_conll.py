"""NER reader, BIO conversion, word-piece alignment, windows and the map back to words."""

import os
import random

import numpy as np
import pytest
from seqeval.metrics.sequence_labeling import get_entities as seqeval_entities

import kbert
from kbert.data import conll
from tests.conftest import TINY_VOCAB

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conll")
TRAIN = os.path.join(FIXTURES, "train.txt")
RESUME = os.path.join(FIXTURES, "resume.char.bmes")
LABELS = {"O": 0, "B-PER": 1, "I-PER": 2, "B-LOC": 3}


@pytest.fixture
def tiny_tokenizer(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    return kbert.FullTokenizer(str(vocab))


@pytest.fixture(scope="module")
def bert_tokenizer(minilm_dir):
    """BERT's real uncased vocabulary (30,522 pieces)."""
    return kbert.FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))


def test_read_conll_converts_iob1_to_bio():
    sentences = conll.read_ner_file(TRAIN)
    assert len(sentences) == 13  # the -DOCSTART- lines are not sentences
    first = sentences[0]
    assert first.words[:4] == ("EU", "rejects", "German", "call")
    assert first.labels[:4] == ("B-ORG", "O", "B-MISC", "O")
    assert first.location(0) == f"{TRAIN}:3" and first.location(2) == f"{TRAIN}:5"
    assert sentences[1].labels == ("B-PER", "I-PER")  # "Peter Blackburn": I-PER I-PER
    # IOB1's B- marks a second entity right after one of the same type.
    english = sentences[-1]
    assert english.words[:3] == ("English", "County", "Championship")
    assert english.labels[:4] == ("B-MISC", "B-MISC", "I-MISC", "O")


def test_read_two_column_bmes():
    sentences = conll.read_ner_file(RESUME, "two_column")
    assert len(sentences) == 3
    assert "".join(sentences[0].words[:4]) == "高勇：男"
    assert sentences[0].labels[:9] == ("B-NAME", "I-NAME", "O", "O", "O", "B-CONT", "I-CONT",
                                       "I-CONT", "I-CONT")
    with pytest.raises(ValueError, match=r"resume.char.bmes:7: label 'M-CONT' is not 'O' or "
                                         r"'<B\|I\|E\|S>-<type>' \(tag_scheme='bioes'\)"):
        conll.read_ner_file(RESUME, "two_column", tag_scheme="bioes")
    assert conll.read_ner_file(RESUME, "two_column", tag_scheme="bmes") == sentences


def test_read_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: 3 columns, but the file's first"):
        conll.read_ner_file(str(path))
    path.write_text("EU NNP I-NP I-ORG\n\nrejects VBZ I-VP PER\n")
    with pytest.raises(ValueError, match=r"bad.txt:3: label 'PER' is not 'O' or"):
        conll.read_ner_file(str(path))
    path.write_text("EU\n")
    with pytest.raises(ValueError, match=r"bad.txt:1: expected a word and a label"):
        conll.read_ner_file(str(path))
    path.write_text("高 B-NAME x\n")
    with pytest.raises(ValueError, match=r"bad.txt:1: expected 2 columns"):
        conll.read_ner_file(str(path), "two_column")
    path.write_text("EU E-ORG\n")
    with pytest.raises(ValueError, match=r"bad.txt:1: label 'E-ORG' .*tag_scheme='iob1'"):
        conll.read_ner_file(str(path), "two_column", tag_scheme="iob1")
    with pytest.raises(ValueError, match="data_format must be one of"):
        conll.read_ner_file(str(path), "tsv")


def test_crlf_bom_and_docstart_in_the_middle(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes("\ufeffA B-X\r\nb O\r\n-DOCSTART- O\r\nC I-X\r\n\r\n\r\n".encode())
    sentences = conll.read_ner_file(str(path), "two_column")
    assert [s.words for s in sentences] == [("A", "b"), ("C",)]
    assert [s.labels for s in sentences] == [("B-X", "O"), ("B-X",)]
    assert sentences[1].lines == (4,)


def test_to_bio_keeps_the_entities_seqeval_finds():
    assert conll.to_bio(["S-A", "B-A", "M-A", "E-A", "O", "E-B"]) == [
        "B-A", "B-A", "I-A", "I-A", "O", "B-B"]
    assert conll.to_bio(["I-A", "I-B", "B-B", "I-B", "O", "I-A"]) == [
        "B-A", "B-B", "B-B", "I-B", "O", "B-A"]
    rng = random.Random(0)
    for _ in range(300):  # any B/I/O sequence: IOB1, IOB2, invalid IOB2
        labels = [rng.choice(["O", "B-A", "I-A", "B-B", "I-B"]) for _ in range(rng.randint(0, 9))]
        bio = conll.to_bio(labels)
        assert seqeval_entities(bio) == seqeval_entities(labels)
        assert conll.to_bio(bio) == bio
    for _ in range(300):  # valid BIOES / BMES sequences
        labels = []
        while len(labels) < 8:
            kind, type_ = rng.choice(["O", "S", "BE", "BME", "BMME"]), rng.choice("AB")
            labels += ["O"] if kind == "O" else [f"{p}-{type_}" for p in kind]
        bioes = [label.replace("M-", "I-") for label in labels]  # seqeval knows BIOES
        assert seqeval_entities(conll.to_bio(labels)) == seqeval_entities(bioes)


def test_label_vocabulary_and_unseen_labels(tmp_path):
    train = conll.read_ner_file(TRAIN)
    assert conll.label_vocabulary(train) == (
        "O", "B-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER")
    path = tmp_path / "dev.txt"
    path.write_text("Rome B-LOC\nFIFA B-EVENT\n\nx I-EVENT\n")
    unseen = conll.unseen_labels(conll.read_ner_file(str(path), "two_column"),
                                 conll.label_vocabulary(train))
    assert unseen == [f"{path}:2: B-EVENT", f"{path}:4: B-EVENT"]


def test_alignment_is_the_docstring_example(bert_tokenizer):
    sentence = conll.Sentence(("Koizumi", "met", "Jagdeep", "in", "Oslo", "."),
                              ("B-PER", "O", "B-PER", "O", "B-LOC", "O"))
    windows = conll.featurize([sentence], bert_tokenizer, max_seq_length=10, label_map=LABELS)
    tokens = [bert_tokenizer.convert_ids_to_tokens(row)
              for row in windows.features["token_ids"].to_list()]
    assert tokens == [["[CLS]", "ko", "##iz", "##umi", "met", "ja", "##g", "##dee", "##p",
                       "[SEP]"],
                      ["[CLS]", "in", "oslo", ".", "[SEP]"]]
    assert windows.label_ids.to_list() == [[0, 1, 0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 3, 0, 0]]
    assert windows.label_weights.to_list() == [[0, 1, 0, 0, 1, 1, 0, 0, 0, 0],
                                               [0, 1, 1, 1, 0]]
    assert windows.first_words.tolist() == [0, 3] and windows.sentence_ids.tolist() == [0, 0]
    assert windows.lengths.tolist() == [10, 5] and len(windows) == 2
    assert windows.features["segment_ids"].to_list() == [[0] * 10, [0] * 5]
    assert windows.features["padding_mask"].to_list() == [[1] * 10, [1] * 5]
    # Unsplit with room to spare; predictions map back to one label per word.
    whole = conll.featurize([sentence], bert_tokenizer, max_seq_length=128, label_map=LABELS)
    assert len(whole) == 1 and whole.lengths.tolist() == [13]
    names = list(LABELS)
    for w in (windows, whole):
        assert conll.word_labels(w, w.label_ids.to_list(), names, [sentence]) == [
            list(sentence.labels)]


def test_unknown_empty_and_overlong_words(tiny_tokenizer):
    # "Zebra" is [UNK] in the 31-piece vocab; U+200B tokenizes to nothing; "saids" is 2
    # pieces; "sssssss" is 7 (s ##s ...), more than a window of max_seq_length 6 holds.
    sentence = conll.Sentence(("the", "Zebra", "\u200b", "saids", "sssssss"),
                              ("O", "B-PER", "I-PER", "O", "B-LOC"), "f.txt", (1, 2, 3, 4, 5))
    assert tiny_tokenizer.tokenize("\u200b") == []
    windows = conll.featurize([sentence], tiny_tokenizer, max_seq_length=6, label_map=LABELS)
    tokens = [tiny_tokenizer.convert_ids_to_tokens(row)
              for row in windows.features["token_ids"].to_list()]
    assert tokens == [["[CLS]", "the", "[UNK]", "[UNK]", "[SEP]"],
                      ["[CLS]", "said", "##s", "[SEP]"],
                      ["[CLS]", "s", "##s", "##s", "##s", "[SEP]"]]
    assert windows.label_ids.to_list() == [[0, 0, 1, 2, 0], [0, 0, 0, 0], [0, 3, 0, 0, 0, 0]]
    assert windows.label_weights.to_list() == [[0, 1, 1, 1, 0], [0, 1, 0, 0],
                                               [0, 1, 0, 0, 0, 0]]
    assert windows.first_words.tolist() == [0, 3, 4]
    predicted = [[0, 3, 3, 1, 0], [0, 2, 3, 3], [0, 1, 0, 0, 0, 0]]
    assert conll.word_labels(windows, predicted, list(LABELS), [sentence]) == [
        ["B-LOC", "B-LOC", "B-PER", "I-PER", "B-PER"]]
    # A word longer than a window keeps its first pieces (max_seq_length 3: one piece).
    cut = conll.featurize([sentence], tiny_tokenizer, max_seq_length=3, label_map=LABELS)
    assert len(cut) == 5 and cut.lengths.tolist() == [3] * 5
    with pytest.raises(ValueError, match="max_seq_length must be >= 3"):
        conll.featurize([sentence], tiny_tokenizer, max_seq_length=2)
    with pytest.raises(ValueError, match=r"f.txt:5: label 'B-LOC' is not in the label vocab"):
        conll.featurize([sentence], tiny_tokenizer, 8, label_map={"O": 0, "B-PER": 1,
                                                                  "I-PER": 2})


def test_fixture_round_trip_and_windows(tiny_tokenizer):
    sentences = conll.read_ner_file(TRAIN)
    label_names = conll.label_vocabulary(sentences)
    label_map = {name: i for i, name in enumerate(label_names)}
    for max_seq_length in (5, 16, 64):
        windows = conll.featurize(sentences, tiny_tokenizer, max_seq_length, label_map)
        assert windows.lengths.max() <= max_seq_length
        assert windows.num_sentences == len(sentences)
        weights = windows.label_weights.to_list()
        assert sum(sum(w) for w in weights) == sum(len(s.words) for s in sentences)
        back = conll.word_labels(windows, windows.label_ids.to_list(), label_names, sentences)
        assert back == [list(s.labels) for s in sentences]
    assert len(conll.featurize(sentences, tiny_tokenizer, 64)) == len(sentences)


def test_datasets(tiny_tokenizer):
    sentences = conll.read_ner_file(TRAIN)
    label_map = {name: i for i, name in enumerate(conll.label_vocabulary(sentences))}
    windows = conll.featurize(sentences, tiny_tokenizer, 24, label_map)
    epochs, steps = conll.training_epochs(windows, batch_size=4, seed=0)
    batches = list(epochs(0).take(steps))  # the first epoch
    assert len(batches) == steps
    assert sum(int(b[0]["token_ids"].shape[0]) for b in batches) == len(windows)
    total_weight = 0.0
    for features, label_ids, weights in batches:
        assert set(features) == {"token_ids", "segment_ids", "padding_mask"}
        assert label_ids.shape == weights.shape == features["token_ids"].shape
        mask = features["padding_mask"].numpy()
        assert np.all(weights.numpy()[mask == 0] == 0)  # padding is never scored
        total_weight += float(weights.numpy().sum())
    assert total_weight == sum(len(s.words) for s in sentences)
    inference, order = conll.inference_dataset(windows, batch_size=5)
    rows = [row for features, _ in inference for row in features["token_ids"].numpy()]
    assert sorted(order.tolist()) == list(range(len(windows)))
    for row, window in zip(rows, order, strict=True):
        expected = windows.features["token_ids"][window].numpy()
        np.testing.assert_array_equal(row[: len(expected)], expected)
    with pytest.raises(ValueError, match="no training sentences"):
        conll.training_epochs(conll.featurize([], tiny_tokenizer, 8, label_map), 4)


def test_write_predictions(tmp_path):
    sentences = [conll.Sentence(("EU", "rejects"), ("B-ORG", "O")),
                 conll.Sentence(("Peter",), ("B-PER",))]
    path = tmp_path / "out" / "predictions.txt"
    conll.write_predictions(str(path), sentences, [["B-ORG", "B-PER"], ["O"]])
    assert path.read_text() == "EU B-ORG B-ORG\nrejects O B-PER\n\nPeter B-PER O\n\n"


def test_overlapping_windows_are_the_docstring_example(bert_tokenizer):
    sentence = conll.Sentence(("Koizumi", "met", "Jagdeep", "in", "Oslo", "."),
                              ("B-PER", "O", "B-PER", "O", "B-LOC", "O"))
    windows = conll.featurize([sentence], bert_tokenizer, max_seq_length=10, label_map=LABELS,
                              window_stride=4)
    tokens = [bert_tokenizer.convert_ids_to_tokens(row)
              for row in windows.features["token_ids"].to_list()]
    assert tokens == [["[CLS]", "ko", "##iz", "##umi", "met", "ja", "##g", "##dee", "##p",
                       "[SEP]"],
                      ["[CLS]", "ja", "##g", "##dee", "##p", "in", "oslo", ".", "[SEP]"]]
    assert windows.first_words.tolist() == [0, 2]
    # Both windows are labelled in full (Jagdeep twice) ...
    assert windows.label_ids.to_list() == [[0, 1, 0, 0, 0, 1, 0, 0, 0, 0],
                                           [0, 1, 0, 0, 0, 0, 3, 0, 0]]
    assert windows.label_weights.to_list() == [[0, 1, 0, 0, 1, 1, 0, 0, 0, 0],
                                               [0, 1, 0, 0, 0, 1, 1, 1, 0]]
    # ... and Jagdeep is predicted from window 0, where it has 3 pieces of context a side.
    assert windows.word_index.to_list() == [[-1, 0, -1, -1, 1, 2, -1, -1, -1, -1],
                                            [-1, -1, -1, -1, -1, 3, 4, 5, -1]]
    predicted = [[0, 1, 0, 0, 0, 2, 0, 0, 0, 0],  # window 0 says I-PER for Jagdeep
                 [0, 1, 0, 0, 0, 0, 3, 0, 0]]  # window 1 says B-PER: not read
    assert conll.word_labels(windows, predicted, list(LABELS), [sentence]) == [
        ["B-PER", "O", "I-PER", "O", "B-LOC", "O"]]


def test_window_bounds_and_max_context():
    # Ten one-piece words, 4 a window, starts 2 pieces apart.
    bounds = conll._window_bounds([1] * 10, 4, 2)
    assert bounds == [(0, 4), (2, 6), (4, 8), (6, 10)]
    # Word 3 has 1 word of context a side in window 1 (pieces 2-5), none right in window 0.
    assert conll._max_context_windows([1] * 10, bounds) == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    # Ties on min(left, right) go to the longer window, then to the first.
    assert conll._max_context_windows([1, 1, 1], [(0, 2), (1, 3)]) == [0, 0, 1]
    assert conll._max_context_windows([2, 1, 1], [(0, 2), (1, 3)]) == [0, 0, 1]
    assert conll._max_context_windows([1, 1, 1, 1], [(0, 3), (1, 4)]) == [0, 0, 1, 1]
    # A stride past a window's end still leaves no word out; consecutive without a stride.
    assert conll._window_bounds([3, 3, 3], 4, 3) == [(0, 1), (1, 2), (2, 3)]
    assert conll._window_bounds([1] * 10, 4, 6) == [(0, 4), (4, 8), (8, 10)]
    assert conll._window_bounds([1] * 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert conll._window_bounds([], 4, 2) == [(0, 0)]


def test_overlapping_windows_round_trip(tiny_tokenizer):
    sentences = conll.read_ner_file(TRAIN)
    label_names = conll.label_vocabulary(sentences)
    label_map = {name: i for i, name in enumerate(label_names)}
    consecutive = conll.featurize(sentences, tiny_tokenizer, 8, label_map)
    windows = conll.featurize(sentences, tiny_tokenizer, 8, label_map, window_stride=3)
    assert len(windows) > len(consecutive) and windows.lengths.max() <= 8
    index = windows.word_index.to_list()
    # Every word is predicted from exactly one window, at a weight-1 position.
    assert sum(i >= 0 for row in index for i in row) == sum(len(s.words) for s in sentences)
    for row, weights in zip(index, windows.label_weights.to_list(), strict=True):
        assert all(w == 1 for i, w in zip(row, weights, strict=True) if i >= 0)
    back = conll.word_labels(windows, windows.label_ids.to_list(), label_names, sentences)
    assert back == [list(s.labels) for s in sentences]


DOCUMENTS = """-DOCSTART- -X- O O

He O
met O
Jagdeep B-PER
. O

Oslo B-LOC
. O

It O
rained O
. O

-DOCSTART- -X- O O

Rome B-LOC
"""


def test_document_context_is_the_docstring_example(bert_tokenizer, tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text(DOCUMENTS)
    sentences = conll.read_ner_file(str(path))
    assert [s.document for s in sentences] == [0, 0, 0, 1]
    windows = conll.featurize(sentences, bert_tokenizer, 10, LABELS, document_context=True)
    tokens = [bert_tokenizer.convert_ids_to_tokens(row)
              for row in windows.features["token_ids"].to_list()]
    # "Oslo ." (window 1): 3 pieces a side; "Jagdeep" does not fit in the left share.
    assert tokens[1] == ["[CLS]", ".", "oslo", ".", "it", "rained", ".", "[SEP]"]
    assert windows.label_ids.to_list()[1] == [0, 0, 3, 0, 0, 0, 0, 0]
    assert windows.label_weights.to_list()[1] == [0, 0, 1, 1, 0, 0, 0, 0]
    assert windows.word_index.to_list()[1] == [-1, -1, 0, 1, -1, -1, -1, -1]
    # The first sentence has no left context: the right side takes the whole budget (1
    # piece); the last of the document has no right context, so the left side takes all 5
    # (whole words: "Jagdeep" does not fit); "Rome" is alone in its document.
    assert tokens[0] == ["[CLS]", "he", "met", "ja", "##g", "##dee", "##p", ".", "oslo",
                         "[SEP]"]
    assert tokens[2] == ["[CLS]", ".", "oslo", ".", "it", "rained", ".", "[SEP]"]
    assert tokens[3] == ["[CLS]", "rome", "[SEP]"]
    predicted = windows.label_ids.to_list()
    assert conll.word_labels(windows, predicted, list(LABELS), sentences) == [
        list(s.labels) for s in sentences]


def test_document_context_is_balanced(tiny_tokenizer):
    # One-piece words: "the" between 6 words before and 6 after, 7 pieces for context.
    words = ("a", "to", "of", "and", "in", "he")
    sentences = [conll.Sentence(words, ("O",) * 6), conll.Sentence(("the",), ("B-PER",)),
                 conll.Sentence(words, ("O",) * 6),
                 conll.Sentence(("said",), ("O",), document=1)]
    windows = conll.featurize(sentences, tiny_tokenizer, 10, LABELS, document_context=True)
    tokens = tiny_tokenizer.convert_ids_to_tokens(windows.features["token_ids"].to_list()[1])
    assert tokens == ["[CLS]", "and", "in", "he", "the", "a", "to", "of", "and", "[SEP]"]
    assert windows.label_weights.to_list()[1] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    assert windows.label_ids.to_list()[1] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    # The next document is no context; a sentence longer than a window gets none either.
    assert tiny_tokenizer.convert_ids_to_tokens(
        windows.features["token_ids"].to_list()[3]) == ["[CLS]", "said", "[SEP]"]
    long = conll.featurize(sentences, tiny_tokenizer, 6, LABELS, document_context=True)
    rows = [tiny_tokenizer.convert_ids_to_tokens(row)
            for row in long.features["token_ids"].to_list()]
    assert rows[:3] == [["[CLS]", "a", "to", "of", "and", "[SEP]"], ["[CLS]", "in", "he", "[SEP]"],
                        ["[CLS]", "he", "the", "a", "to", "[SEP]"]]
