"""Multi-label metrics against scikit-learn, and hand-made edge cases."""

import numpy as np
import pytest
from sklearn import metrics as sk

from kbert.tasks import multi_label_metrics as mlm


def random_data(seed, examples=40, labels=5):
    rng = np.random.default_rng(seed)
    y = (rng.random((examples, labels)) < 0.3).astype(np.float32)
    y[:, -1] = 0  # a label with no positive example
    # Probabilities that lean toward the truth, so that F1 is neither 0 nor 1.
    p = np.clip(0.35 * y + rng.random((examples, labels)) * 0.7, 0, 1)
    return y, p


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("thresholds", [0.5, "per_label"])
def test_scores_equal_scikit_learn(seed, thresholds):
    y, p = random_data(seed)
    if thresholds == "per_label":
        thresholds = np.array([0.3, 0.5, 0.6, 0.45, 0.9])
    got = mlm.scores(y, p, thresholds, label_names=list("abcde"))
    pred = (p >= thresholds).astype(int)
    for average in ("micro", "macro"):
        kwargs = dict(average=average, zero_division=0)
        assert got[f"{average}_f1"] == pytest.approx(sk.f1_score(y, pred, **kwargs), abs=1e-12)
        assert got[f"{average}_precision"] == pytest.approx(
            sk.precision_score(y, pred, **kwargs), abs=1e-12)
        assert got[f"{average}_recall"] == pytest.approx(
            sk.recall_score(y, pred, **kwargs), abs=1e-12)
    assert got["exact_match"] == pytest.approx(sk.accuracy_score(y, pred), abs=1e-12)
    assert got["examples"] == 40
    precision, recall, f1, support = sk.precision_recall_fscore_support(
        y, pred, average=None, zero_division=0)
    assert list(got["per_label"]) == list("abcde")
    for i, name in enumerate("abcde"):
        row = got["per_label"][name]
        assert row["precision"] == pytest.approx(precision[i], abs=1e-12)
        assert row["recall"] == pytest.approx(recall[i], abs=1e-12)
        assert row["f1"] == pytest.approx(f1[i], abs=1e-12)
        assert row["support"] == support[i]
        assert row["threshold"] == pytest.approx(np.broadcast_to(thresholds, 5)[i])


def test_scores_edge_cases():
    y = np.array([[1, 0], [0, 0], [1, 0]])
    # Nothing predicted: every score 0, but rows with no label at all match exactly.
    none = mlm.scores(y, np.zeros((3, 2)))
    assert none["micro_f1"] == none["micro_precision"] == none["micro_recall"] == 0.0
    assert none["exact_match"] == pytest.approx(1 / 3)
    assert none["per_label"]["1"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                      "support": 0, "threshold": 0.5}
    # Everything predicted: recall 1, precision = positives / examples.
    every = mlm.scores(y, np.ones((3, 2)))
    assert every["per_label"]["0"]["recall"] == 1.0
    assert every["per_label"]["0"]["precision"] == pytest.approx(2 / 3)
    assert every["micro_precision"] == pytest.approx(2 / 6)
    assert every["macro_f1"] == pytest.approx((0.8 + 0.0) / 2)
    assert every["exact_match"] == 0.0
    # One label; a probability equal to the threshold is predicted.
    one = mlm.scores([[1], [0]], [[0.5], [0.49]], label_names=["toxic"])
    assert one["micro_f1"] == one["macro_f1"] == one["exact_match"] == 1.0
    assert list(one["per_label"]) == ["toxic"]


def test_scores_reject_bad_shapes():
    with pytest.raises(ValueError, match=r"both be \[examples, labels\], got \[2, 2\] and \[2\]"):
        mlm.scores(np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match=r"one per label \(2\)"):
        mlm.scores(np.zeros((2, 2)), np.zeros((2, 2)), thresholds=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="1 label_names for 2 labels"):
        mlm.scores(np.zeros((2, 2)), np.zeros((2, 2)), label_names=["a"])
    with pytest.raises(ValueError, match="labels must be 0/1"):
        mlm.scores(np.full((2, 2), 2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no examples"):
        mlm.scores(np.zeros((0, 2)), np.zeros((0, 2)))


@pytest.mark.parametrize("seed", [0, 1])
def test_tuned_thresholds_maximise_each_label_f1(seed):
    y, p = random_data(seed)
    tuned = mlm.tune_thresholds(y, p)
    grid = np.round(np.arange(1, 20) * 0.05, 2)
    assert tuned.shape == (5,) and tuned[-1] == 0.5  # no positive: kept at 0.5
    for j in range(4):
        f1 = np.array([sk.f1_score(y[:, j], p[:, j] >= t, zero_division=0) for t in grid])
        best = grid[f1 == f1.max()]
        # The best F1, and of the best thresholds the one closest to 0.5 (lower on a tie).
        assert tuned[j] == best[np.argsort(np.abs(best - 0.5), kind="stable")][0]
    # The tuned thresholds score at least as well as 0.5 on the data tuned on.
    assert mlm.scores(y, p, tuned)["macro_f1"] >= mlm.scores(y, p)["macro_f1"]


def test_tune_thresholds_ties_and_grid():
    y = np.array([[1], [0], [1], [0]])
    # Any threshold in (0.2, 0.8] separates the classes: the one closest to 0.5 wins.
    p = np.array([[0.8], [0.2], [0.9], [0.1]])
    assert mlm.tune_thresholds(y, p).tolist() == [0.5]
    # Only thresholds up to 0.3 catch the positive at 0.3 without the negative at 0.1 ...
    p = np.array([[0.3], [0.1], [0.35], [0.05]])
    assert mlm.tune_thresholds(y, p).tolist() == [0.3]
    # ... and of 0.4 and 0.6 (equally close to 0.5, equal F1) the lower wins.
    p = np.array([[0.9], [0.2], [0.9], [0.3]])
    assert mlm.tune_thresholds(y, p, grid=[0.6, 0.4]).tolist() == [0.4]
    with pytest.raises(ValueError, match=r"grid must be .* in \[0, 1\]"):
        mlm.tune_thresholds(y, p, grid=[0.5, 1.5])
