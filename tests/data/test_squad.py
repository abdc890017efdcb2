"""SQuAD reader and featurizer: hand-made examples, and equality with Google's run_squad.py.

`tests/fixtures/squad_v1.1_dev_excerpt.json` (42,628 bytes, sha256 9abb7a25...6f69): 11
paragraphs (67 questions) of the official SQuAD v1.1 dev set (CC BY-SA 4.0,
../shared/data/squad/v1.1/dev.json), unchanged: the first two paragraphs of Warsaw, Normans
and Nikola_Tesla, the four with the most non-ASCII characters, and the longest context.
"""

import json
import os
import re

import numpy as np
import pytest

from kbert.data import squad
from kbert.data.squad import read_squad_examples
from kbert.tokenization import FullTokenizer
from tests.oracle import google_squad

EXCERPT = os.path.join(os.path.dirname(__file__), "..", "fixtures",
                       "squad_v1.1_dev_excerpt.json")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_tokenizer(tmp_path, words):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(SPECIAL + list(words) + list("()-.,?'!")) + "\n", encoding="utf-8")
    return FullTokenizer(str(path), do_lower_case=True)


def article(context, *qas):
    return {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": list(qas)}]}]}


def qa(qid, question, text=None, start=None, impossible=False, answers=None):
    if answers is None:
        answers = [] if text is None else [{"text": text, "answer_start": start}]
    entry = {"id": qid, "question": question, "answers": answers}
    if impossible:
        entry["is_impossible"] = True
    return entry


TESLA = "The leader was John Smith (1895-1943)."
TESLA_WORDS = ["the", "leader", "was", "john", "smith", "1895", "1943", "born", "when"]


def test_worked_example_of_the_module_docstring(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path, TESLA_WORDS)
    data = article(TESLA, qa("q", "Born when?", "1895", TESLA.index("1895")))
    examples = squad.read_squad_examples(data, is_training=True)
    assert examples[0].doc_tokens == ("The", "leader", "was", "John", "Smith", "(1895-1943).")
    assert (examples[0].start_position, examples[0].end_position) == (5, 5)
    features = squad.convert_examples_to_features(examples, tokenizer, max_seq_length=14,
                                                  doc_stride=2, max_query_length=8,
                                                  is_training=True)
    assert [" ".join(t) for t in features.tokens] == [
        "[CLS] born when ? [SEP] the leader was john smith ( 1895 - [SEP]",
        "[CLS] born when ? [SEP] was john smith ( 1895 - 1943 ) [SEP]",
        "[CLS] born when ? [SEP] smith ( 1895 - 1943 ) . [SEP]",
    ]
    assert features.start_positions.tolist() == features.end_positions.tolist() == [11, 9, 7]
    assert [features.tokens[i][p] for i, p in enumerate([11, 9, 7])] == ["1895"] * 3
    assert features.segment_ids[2].tolist() == [0] * 5 + [1] * 8 + [0]
    assert features.padding_mask[2].tolist() == [1] * 13 + [0]
    assert features.token_ids[2, -1] == 0
    # "1895" (piece 6) is owned by window 1: position 9 there, 11 and 7 elsewhere.
    assert [features.token_is_max_context[i, p] for i, p in enumerate([11, 9, 7])] == [
        False, True, False]
    assert features.token_to_orig[0].tolist() == [-1] * 5 + [0, 1, 2, 3, 4, 5, 5, 5, -1]
    # Every context piece is owned by exactly one window.
    owned = {}
    for i in range(3):
        for p in np.flatnonzero(features.token_is_max_context[i]):
            piece = features.doc_span_index[i] * 2 + p - 5  # window start + offset
            owned[piece] = owned.get(piece, 0) + 1
    assert sorted(owned) == list(range(11)) and set(owned.values()) == {1}


def test_answers_at_window_edges_v1_drops_and_v2_labels_cls(tmp_path):
    words = [f"w{i}" for i in range(12)]
    tokenizer = tiny_tokenizer(tmp_path, words + ["q"])
    context = " ".join(words)
    data = article(context,
                   qa("first", "q", "w0", 0),                           # first piece of window 0
                   qa("edge", "q", "w5", context.index("w5")),          # last piece of window 0
                   qa("straddle", "q", "w5 w6", context.index("w5")),   # crosses windows 0 / 1
                   qa("last", "q", "w11", context.index("w11")))        # last piece of the context
    # 1 question piece: windows of 10 - 1 - 3 = 6 pieces, starting at 0, 4, 8 (stride 4).
    settings = dict(max_seq_length=10, doc_stride=4, max_query_length=4, is_training=True)
    v1 = squad.convert_examples_to_features(
        squad.read_squad_examples(data, True), tokenizer, **settings)
    found = {(int(e), int(w)): (int(s), int(t)) for e, w, s, t in zip(  # noqa: B905
        v1.example_index, v1.doc_span_index, v1.start_positions, v1.end_positions)}
    assert found == {
        (0, 0): (3, 3),                         # "w0" right after [CLS] q [SEP]
        (1, 0): (8, 8), (1, 1): (4, 4),         # "w5": last of window 0, in window 1 too
        (2, 1): (4, 5),                         # "w5 w6" is only whole in window 1
        (3, 2): (6, 6),                         # "w11" ends the last window
    }
    v2 = squad.convert_examples_to_features(
        squad.read_squad_examples(data, True, True), tokenizer, version_2_with_negative=True,
        **settings)
    assert len(v2) == 12  # every window of the 4 examples is kept
    labels = {(int(e), int(w)): (int(s), int(t)) for e, w, s, t in zip(  # noqa: B905
        v2.example_index, v2.doc_span_index, v2.start_positions, v2.end_positions)}
    assert {k: v for k, v in labels.items() if v != (0, 0)} == found


def test_unanswerable(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path, TESLA_WORDS)
    data = article(TESLA, qa("no", "Born when?", impossible=True),
                   qa("yes", "Born when?", "1895", TESLA.index("1895")))
    examples = squad.read_squad_examples(data, True, version_2_with_negative=True)
    assert examples[0].is_impossible and examples[0].start_position == -1
    assert examples[0].orig_answer_text == ""
    features = squad.convert_examples_to_features(examples, tokenizer, 14, 2, 8, is_training=True,
                                                  version_2_with_negative=True)
    impossible = features.example_index == 0
    assert impossible.sum() == 3 and features.is_impossible[impossible].all()
    assert not features.start_positions[impossible].any()
    assert not features.end_positions[impossible].any()
    # Read as v1.1, the unanswerable question has no answer to train on: skipped, with a reason.
    kept, skipped = squad.parse_squad(data, is_training=True)
    assert [e.qas_id for e in kept] == ["yes"]
    assert skipped == [("no", "no answer (is_impossible needs version_2_with_negative)")]
    # For prediction it is read (no answers, no positions).
    assert [e.qas_id for e in squad.read_squad_examples(data, False)] == ["no", "yes"]
    # 1 and 0 are true and false; the string "false" is not false, so it is refused.
    flagged = article(TESLA, dict(qa("one", "Born when?"), is_impossible=1),
                      dict(qa("zero", "Born when?", "1895", TESLA.index("1895")),
                           is_impossible=0))
    one, zero = squad.read_squad_examples(flagged, True, version_2_with_negative=True)
    assert one.is_impossible and not zero.is_impossible and zero.orig_answer_text == "1895"
    for value in ("false", 2, None):
        bad = article(TESLA, dict(qa("q", "Born when?", "1895", TESLA.index("1895")),
                                  is_impossible=value))
        with pytest.raises(ValueError, match=r"qas\[0\]\.is_impossible is .*expected true or "
                                             r"false"):
            squad.read_squad_examples(bad, True, version_2_with_negative=True)


def test_odd_whitespace_and_accents(tmp_path):
    # Tab, CR/LF, U+202F and repeated spaces split words; NBSP and U+2009 do not (Google's
    # is_whitespace), the basic tokenizer later splits them; accents are stripped.
    context = "Caf\u00e9\u00a0Noir\t opened\r\nin  1900\u202fin Z\u00fcrich\u2009city."
    words, char_to_word = squad.words_and_char_to_word(context)
    assert words == ("Caf\u00e9\u00a0Noir", "opened", "in", "1900", "in",
                     "Z\u00fcrich\u2009city.")
    assert len(char_to_word) == len(context) and char_to_word[0] == 0
    assert char_to_word[context.index("\t")] == 0 and char_to_word[-1] == 5
    tokenizer = tiny_tokenizer(tmp_path, ["cafe", "noir", "opened", "in", "1900", "zurich",
                                          "city", "where"])
    data = article(context, qa("zurich", "Where?", "Z\u00fcrich", context.index("Z")),
                   qa("cafe", "Where?", "Caf\u00e9", 0))
    examples = squad.read_squad_examples(data, True)
    assert [(e.start_position, e.end_position) for e in examples] == [(5, 5), (0, 0)]
    features = squad.convert_examples_to_features(examples, tokenizer, 32, 8, 8, is_training=True)
    assert features.tokens[0][4:] == ("cafe", "noir", "opened", "in", "1900", "in", "zurich",
                                      "city", ".", "[SEP]")
    # The answer "Zürich" is improved from the word "Zürich\u2009city." to the piece "zurich".
    assert features.tokens[0][features.start_positions[0]:features.end_positions[0] + 1] == (
        "zurich",)
    assert features.tokens[1][features.start_positions[1]:features.end_positions[1] + 1] == (
        "cafe",)


def test_answers_not_at_their_offset_are_counted_and_skipped(tmp_path, caplog):
    data = article(TESLA,
                   qa("ok", "q", "John Smith", TESLA.index("John")),
                   qa("shifted", "q", "John Smith", TESLA.index("John") + 1),
                   qa("past_end", "q", "1943).", len(TESLA) - 3),
                   qa("empty", "q", " ", 3),
                   qa("negative", "q", "The", -1))
    examples, skipped = squad.parse_squad(data, is_training=True)
    assert [e.qas_id for e in examples] == ["ok"]
    assert [q for q, _ in skipped] == ["shifted", "past_end", "empty", "negative"]
    assert "is not at answer_start 16 (found 'ohn Smith ')" in skipped[0][1]
    with caplog.at_level("WARNING"):
        squad.read_squad_examples(data, is_training=True)
    assert "skipped 4 of 5 training question(s)" in caplog.text
    # Google's word-level check: an answer with a NBSP (not whitespace to the reader) does not
    # match its whitespace-normalized text; Google skips it, and so do we.
    context = "go to New\u00a0York now"
    examples, skipped = squad.parse_squad(article(context, qa("nbsp", "q", "New\u00a0York", 6)),
                                          is_training=True)
    assert not examples and "not recovered from its words" in skipped[0][1]
    # Prediction reads every question with all its gold answers, unchecked.
    several = article(TESLA, qa("many", "q", answers=[{"text": "x", "answer_start": 99},
                                                      {"text": "John", "answer_start": 15}]))
    assert squad.read_squad_examples(several, False)[0].answers == ("x", "John")
    with pytest.raises(ValueError, match="SQuAD data: none of the 1 training question"):
        squad.read_squad_examples(several, True)


def test_several_answers_train_on_the_first(tmp_path):
    data = article(TESLA, qa("q", "q", answers=[{"text": "John Smith", "answer_start": 15},
                                                {"text": "Smith", "answer_start": 20}]))
    (example,) = squad.read_squad_examples(data, True)
    assert example.orig_answer_text == "John Smith" and example.answers == ("John Smith",
                                                                            "Smith")
    assert (example.start_position, example.end_position) == (3, 4)


def test_argument_checks(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path, TESLA_WORDS)
    with pytest.raises(ValueError, match="max_query_length"):
        squad.convert_examples_to_features([], tokenizer, max_seq_length=67)
    with pytest.raises(ValueError, match="doc_stride"):
        squad.convert_examples_to_features([], tokenizer, doc_stride=0)
    empty = squad.convert_examples_to_features([], tokenizer, 16, 4, 8)
    assert len(empty) == 0 and empty.token_ids.shape == (0, 16)


# ---------------------------------------------------------------------------------------------
# Equality with Google's run_squad.py on real SQuAD dev paragraphs.
# ---------------------------------------------------------------------------------------------


def _excerpt(mode):
    """The excerpt as Google can read it: v1.1 training needs exactly one answer per question;
    for v2.0 every third question is made unanswerable."""
    with open(EXCERPT, encoding="utf-8") as f:
        data = json.load(f)
    for a in data["data"]:
        for p in a["paragraphs"]:
            for i, q in enumerate(p["qas"]):
                if mode != "predict":
                    q["answers"] = q["answers"][:1]
                if mode == "v2":
                    q["is_impossible"] = i % 3 == 0
                    if q["is_impossible"]:
                        q["answers"] = []
    return data


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    """Google's FullTokenizer: Google's featurizer calls it word by word, which is fast."""
    return google_squad.google_tokenizer(vocab_file, do_lower_case=True)


@pytest.mark.parametrize("mode", ["predict", "v1", "v2"])
def test_equals_google_run_squad(mode, tokenizer, tmp_path):
    is_training, v2 = mode != "predict", mode == "v2"
    google = google_squad.run_squad(version_2_with_negative=v2)
    data = _excerpt(mode)
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    google_examples = google.read_squad_examples(str(path), is_training=is_training)
    examples = squad.read_squad_examples(data, is_training, v2)
    assert len(examples) == len(google_examples) == 67
    for ours, theirs in zip(examples, google_examples, strict=True):
        assert ours.qas_id == theirs.qas_id and ours.question_text == theirs.question_text
        assert list(ours.doc_tokens) == theirs.doc_tokens
        assert ours.start_position == theirs.start_position
        assert ours.end_position == theirs.end_position
        assert ours.orig_answer_text == theirs.orig_answer_text
        assert ours.is_impossible == theirs.is_impossible
    # Short windows and a small stride: many windows, max-context ties and out-of-span answers.
    settings = dict(max_seq_length=96, doc_stride=32, max_query_length=24)
    theirs = []
    google.convert_examples_to_features(google_examples, tokenizer, is_training=is_training,
                                        output_fn=theirs.append, **settings)
    ours = squad.convert_examples_to_features(examples, tokenizer, is_training=is_training,
                                              version_2_with_negative=v2, **settings)
    if mode == "v1":  # v1.1 training drops the windows Google labels [CLS]
        dropped = [f for f in theirs if f.start_position == 0]
        assert len(dropped) > 20
        theirs = [f for f in theirs if f.start_position != 0]
    assert len(ours) == len(theirs) > 100
    assert len(set(ours.example_index.tolist())) == 67
    for row, feature in enumerate(theirs):
        assert ours.example_index[row] == feature.example_index
        assert ours.doc_span_index[row] == feature.doc_span_index
        assert list(ours.tokens[row]) == feature.tokens
        assert ours.token_ids[row].tolist() == feature.input_ids
        assert ours.padding_mask[row].tolist() == feature.input_mask
        assert ours.segment_ids[row].tolist() == feature.segment_ids
        assert {p: int(ours.token_to_orig[row, p])
                for p in np.flatnonzero(ours.token_to_orig[row] >= 0)} == feature.token_to_orig_map
        assert {p: bool(ours.token_is_max_context[row, p])
                for p in feature.token_is_max_context} == feature.token_is_max_context
        assert not ours.token_is_max_context[row, ours.token_to_orig[row] < 0].any()
        if is_training:
            assert ours.start_positions[row] == feature.start_position
            assert ours.end_positions[row] == feature.end_position
        assert ours.is_impossible[row] == feature.is_impossible
    if mode == "v2":
        assert (ours.start_positions == 0).sum() > 50


@pytest.mark.parametrize("is_training", [False, True])
def test_kbert_tokenizer_gives_the_features_of_googles(is_training, tokenizer, vocab_file):
    data = _excerpt("v1" if is_training else "predict")
    examples = squad.read_squad_examples(data, is_training)
    settings = dict(max_seq_length=96, doc_stride=32, max_query_length=24,
                    is_training=is_training)
    want = squad.convert_examples_to_features(examples, tokenizer, **settings)
    got = squad.convert_examples_to_features(examples, FullTokenizer(vocab_file), **settings)
    assert got.tokens == want.tokens
    for field in ("token_ids", "segment_ids", "padding_mask", "token_to_orig",
                  "token_is_max_context", "start_positions", "end_positions"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field), field)


@pytest.mark.parametrize("data, message", [
    ([{"title": "t"}], "data[0] has no 'paragraphs'"),
    ({"data": [{"paragraphs": [{"qas": []}]}]}, "data[0].paragraphs[0] has no 'context'"),
    (article("a b", {"id": "q", "answers": []}), "data[0].paragraphs[0].qas[0] has no 'question'"),
    (article("a b", {"id": "q", "question": "w?", "answers": [{"text": "a"}]}),
     "qas[0].answers[0] has no 'answer_start'"),
    (article("a b", {"id": "q", "question": 3, "answers": []}),
     "qas[0].question is 3, of type int"),
    ({"version": "2.0"}, "not SQuAD: found an object with keys ['version']"),
    ("text", "not SQuAD: found a JSON str"),
])
def test_malformed_squad_is_named(tmp_path, data, message):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape(f"{path}: ") + ".*" + re.escape(message)):
        read_squad_examples(str(path), is_training=True)


def test_not_json_and_no_usable_answer(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text('{"data": [\n  oops\n')
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: not JSON (Expecting value")):
        read_squad_examples(str(path), is_training=False)
    path = tmp_path / "train.json"
    path.write_text(json.dumps(article("a b c", {"id": "q", "question": "w?",
                                                 "answers": [{"text": "c", "answer_start": 0}]})))
    with pytest.raises(ValueError, match="none of the 1 training question.*q: answer 'c' is not "
                                         "at answer_start 0"):
        read_squad_examples(str(path), is_training=True)
    assert len(read_squad_examples(str(path), is_training=False)) == 1
    # A byte-order mark before the JSON (as Windows tools save it) is read past.
    path.write_text("\ufeff" + path.read_text(encoding="utf-8"), encoding="utf-8")
    assert len(read_squad_examples(str(path), is_training=False)) == 1
