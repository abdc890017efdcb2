import random

import pytest

from kbert.tasks import squad_metrics
from tests.oracle import squad_official_eval as official


def _qa(qid, answers, impossible=False):
    qa = {"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in answers]}
    if impossible:
        qa["is_impossible"] = True
    return qa


# Gold answers and predictions chosen to hit every normalization rule and both scripts' corners.
TRICKY = [
    ("articles", ["the Eiffel Tower"], "Eiffel tower"),
    ("article_inside_word", ["theatre an opera"], "theatre opera"),  # "an" goes, theatre stays
    ("punctuation", ["U.S.A."], "usa"),
    ("punct_inside", ["rock-n-roll"], "rocknroll"),
    ("unicode_dash_kept", ["1914–1918"], "1914-1918"),  # en dash is not string.punctuation
    ("whitespace", ["  New\tYork \n City "], "new york city"),
    ("multi_gold", ["Denver Broncos", "the Broncos", "Broncos"], "broncos"),
    ("partial", ["Carolina Panthers"], "the Panthers of Carolina"),
    ("repeated_tokens", ["a b b c"], "b b b"),
    ("only_article", ["the"], "an"),  # both normalize to "": v1.1 F1 0, v2.0 F1 1
    ("empty_prediction", ["Paris"], ""),
    ("no_overlap", ["Paris"], "London"),
    ("case", ["NASA"], "nasa"),
    ("accents_kept", ["café"], "cafe"),
    ("missing", ["Berlin"], None),  # no prediction
]


def _dataset(rows, impossible=()):
    qas = [_qa(qid, [] if qid in impossible else golds, qid in impossible)
           for qid, golds, _ in rows]
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


def test_v1_equals_official_script():
    dataset = _dataset(TRICKY)
    predictions = {qid: p for qid, _, p in TRICKY if p is not None}
    got = squad_metrics.evaluate_v1(dataset, predictions)
    want = official.evaluate_v1_1(dataset, predictions)
    assert got["exact_match"] == pytest.approx(want["exact_match"], abs=1e-12)
    assert got["f1"] == pytest.approx(want["f1"], abs=1e-12)
    assert got["total"] == len(TRICKY) and got["missing"] == 1
    for _, golds, prediction in TRICKY:
        if prediction is None:
            continue
        assert squad_metrics.f1_v1(prediction, golds[0]) == official.f1_score(prediction, golds[0])
        assert squad_metrics.exact_match_v1(prediction, golds[0]) == float(
            official.exact_match_score(prediction, golds[0]))


def test_v1_hand_computed():
    dataset = _dataset(TRICKY[:4])
    result = squad_metrics.evaluate_v1(dataset, {q: p for q, _, p in TRICKY[:4]})
    # theatre an opera -> "theatre opera": exact; the other three are exact too.
    assert result["exact_match"] == 100.0 and result["f1"] == 100.0
    partial = squad_metrics.evaluate_v1(_dataset([TRICKY[7]]), {"partial": TRICKY[7][2]})
    # gold {carolina, panthers}, prediction {panthers, of, carolina}: P 2/3, R 1 -> F1 0.8
    assert partial["exact_match"] == 0.0 and partial["f1"] == pytest.approx(80.0)
    assert squad_metrics.f1_v1("an", "the") == 0 and squad_metrics.f1_v2("an", "the") == 1


@pytest.mark.parametrize("with_odds", [False, True])
def test_v2_equals_official_script(with_odds):
    rows = [r for r in TRICKY if r[2] is not None]
    impossible = {"no_overlap", "empty_prediction", "case"}
    dataset = _dataset(rows, impossible)
    predictions = {qid: p for qid, _, p in rows}
    predictions["case"] = ""
    rng = random.Random(0)
    odds = {qid: rng.uniform(-3, 3) for qid in predictions} if with_odds else None
    got = squad_metrics.evaluate_v2(dataset, predictions, odds)
    want = official.evaluate_v2_0(dataset, predictions, odds)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-12), key
    assert got["NoAns_total"] == 3 and got["HasAns_total"] == len(rows) - 3


def test_v2_random_predictions_equal_official():
    words = ["the", "a", "cat", "Cat.", "dog", "an", "sat", ",", "mat", "on"]
    rng = random.Random(1)
    text = lambda: " ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))  # noqa: E731
    rows = [(f"q{i}", [text() for _ in range(rng.randint(1, 3))], text()) for i in range(300)]
    predictions = {qid: p for qid, _, p in rows}
    dataset = _dataset(rows)
    for key, want in official.evaluate_v1_1(dataset, predictions).items():
        assert squad_metrics.evaluate_v1(dataset, predictions)[key] == pytest.approx(want)
    dataset = _dataset(rows, impossible={f"q{i}" for i in range(0, 300, 7)})
    odds = {qid: rng.gauss(0, 1) for qid in predictions}
    got = squad_metrics.evaluate_v2(dataset, predictions, odds)
    for key, value in official.evaluate_v2_0(dataset, predictions, odds).items():
        assert got[key] == pytest.approx(value, abs=1e-12), key


def test_dispatch_and_errors():
    dataset = {"data": _dataset(TRICKY[:2])}
    predictions = {q: p for q, _, p in TRICKY[:2]}
    assert squad_metrics.evaluate(dataset, predictions) == squad_metrics.evaluate_v1(
        dataset, predictions)
    assert squad_metrics.evaluate(dataset, predictions, True)["exact"] == 100.0
    with pytest.raises(ValueError, match="no question"):
        squad_metrics.evaluate_v2(dataset, {})
