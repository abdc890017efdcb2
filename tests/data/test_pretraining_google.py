"""kbert's pretraining records against Google's create_pretraining_data.py and run_pretraining.py.

Both generators read the same real text (the committed WikiExtractor excerpt, converted once to
Google's sentence-per-line format) with the real uncased vocab, dupe_factor 10, Google's other
defaults and seeds. The random streams differ (numpy vs Python's `random`), so the records
differ; their statistics must not. Google's code runs in a subprocess
(tests/oracle/google_pretraining_data.py) while kbert's runs here.
"""

import numpy as np
import pytest
import tensorflow as tf

from kbert.data import features
from kbert.data.pretraining import writer

SEQ, PREDICTIONS = 128, 20
# Slow: Google's generator runs in a subprocess (~10 s), once, on one worker (setup.cfg).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]


@pytest.fixture(scope="module")
def generated(pretraining_record_files):
    """Parsed records {"plain": (google, kbert), "wwm": (google, kbert)}, dupe_factor 10, and
    "parsed_by_google": the first "parsed_count" kbert "plain" records as Google's input_fn
    parses them."""
    files = pretraining_record_files
    result = {name: (read(files["google"][name]), read(files["kbert"][name]))
              for name in ("plain", "wwm")}
    result["parsed_by_google"] = dict(np.load(files["parsed"]))
    result["parsed_count"] = files["parsed_count"]
    return result


def read(path):
    ds = tf.data.TFRecordDataset(path).batch(1 << 20)
    batch = features.parse_pretraining_examples(next(iter(ds)), SEQ, PREDICTIONS)
    return {k: v.numpy() for k, v in batch.items()}


def statistics(records, mask_id):
    valid = records["masked_lm_weights"] > 0
    at = np.take_along_axis(records["input_ids"], records["masked_lm_positions"], axis=1)
    masked = (at == mask_id) & valid
    same = (at == records["masked_lm_ids"]) & valid & ~masked
    lengths = records["input_mask"].sum(axis=1)
    return {
        "instances": len(lengths),
        "random_next": records["next_sentence_labels"].mean(),
        "predictions": valid.sum(axis=1).mean(),
        "mask": masked.sum() / valid.sum(),
        "same": same.sum() / valid.sum(),
        "random": (valid & ~masked & ~same).sum() / valid.sum(),
        "lengths": lengths,
    }


def ks_distance(a, b):
    grid = np.arange(SEQ + 1)
    cdf = lambda x: np.searchsorted(np.sort(x), grid, side="right") / len(x)  # noqa: E731
    return np.abs(cdf(a) - cdf(b)).max()


@pytest.mark.parametrize("name", ["plain", "wwm"])
def test_statistics_match_googles(generated, vocab_file, name):
    mask_id = writer.load_vocab_tokens(vocab_file).index("[MASK]")
    google, kbert = (statistics(r, mask_id) for r in generated[name])
    assert google["instances"] > 4000
    assert abs(kbert["instances"] / google["instances"] - 1) < 0.05
    assert abs(kbert["random_next"] - google["random_next"]) < 0.03
    assert abs(kbert["predictions"] / google["predictions"] - 1) < 0.05
    for key, rate in (("mask", 0.8), ("same", 0.1), ("random", 0.1)):
        assert abs(kbert[key] - rate) < 0.02 and abs(google[key] - rate) < 0.02, key
    assert abs(kbert["lengths"].mean() / google["lengths"].mean() - 1) < 0.03
    assert ks_distance(kbert["lengths"], google["lengths"]) < 0.05


def test_whole_word_masking_matches_googles_rule(generated, vocab_file):
    vocab = writer.load_vocab_tokens(vocab_file)
    is_continuation = np.array([t.startswith("##") for t in vocab])
    special = {vocab.index("[CLS]"), vocab.index("[SEP]")}
    for records in generated["wwm"]:  # Google's own output obeys the rule too
        original = records["input_ids"].copy()
        valid = records["masked_lm_weights"] > 0
        rows = np.nonzero(valid)[0]
        original[rows, records["masked_lm_positions"][valid]] = records["masked_lm_ids"][valid]
        partly_masked = 0
        for row in range(len(original)):
            masked = set(records["masked_lm_positions"][row][valid[row]].tolist())
            word_of, words = {}, 0
            for i in range(1, int(records["input_mask"][row].sum())):
                token = original[row, i]
                if token in special:
                    continue
                if not (word_of and is_continuation[token]):
                    words += 1
                word_of[i] = words
            masked_words = {word_of[i] for i in masked}
            partly_masked += sum(1 for i, w in word_of.items() if w in masked_words
                                 and i not in masked)
        assert partly_masked == 0


def test_googles_input_fn_parses_kbert_records(generated):
    theirs, ours = generated["parsed_by_google"], generated["plain"][1]
    parsed = generated["parsed_count"]
    assert sorted(theirs) == sorted(features.PRETRAINING_FEATURES)
    for name, value in theirs.items():
        assert value.shape[0] == parsed
        np.testing.assert_array_equal(value, ours[name][:parsed], err_msg=name)
        assert value.dtype == (np.float32 if name == "masked_lm_weights" else np.int32)
