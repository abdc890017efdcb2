"""GLUE metrics against scikit-learn and scipy, on random and edge-case inputs."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from scipy import stats
from sklearn import metrics as sk

from kbert.tasks import glue_metrics

labels_and_predictions = st.integers(1, 60).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n)))


@pytest.mark.filterwarnings("ignore:A single label was found")
@settings(max_examples=100, deadline=None)
@given(labels_and_predictions)
def test_classification_metrics_match_sklearn(pair):
    y, p = (np.array(v) for v in pair)
    assert glue_metrics.accuracy(y, p) == pytest.approx(sk.accuracy_score(y, p))
    assert glue_metrics.matthews_corrcoef(y, p) == pytest.approx(sk.matthews_corrcoef(y, p),
                                                                 abs=1e-12)
    yb, pb = y % 2, p % 2
    assert glue_metrics.f1(yb, pb) == pytest.approx(sk.f1_score(yb, pb, zero_division=0.0))
    assert glue_metrics.matthews_corrcoef(yb, pb) == pytest.approx(sk.matthews_corrcoef(yb, pb),
                                                                   abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(3, 50).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 10), min_size=n, max_size=n),   # many ties, as STS-B's 0-5 scores
    st.lists(st.floats(-5, 5), min_size=n, max_size=n))))
def test_correlations_match_scipy(pair):
    y, p = (np.array(v, dtype=np.float64) / 2 for v in pair)
    if np.ptp(y) == 0 or np.ptp(p) == 0:
        assert glue_metrics.pearson(y, p) == 0.0  # undefined; scipy returns nan
        return
    assert glue_metrics.pearson(y, p) == pytest.approx(stats.pearsonr(y, p)[0], abs=1e-9)
    assert glue_metrics.spearman(y, p) == pytest.approx(stats.spearmanr(y, p)[0], abs=1e-9)


def test_pearson_of_a_tiny_spread_does_not_underflow():
    # Hypothesis found it: a subnormal spread squared is 0, which read as "constant".
    y, p = np.array([0.0, 0.0, 0.5]), np.array([0.0, 0.0, 1.1e-309])
    assert glue_metrics.pearson(y, p) == pytest.approx(stats.pearsonr(y, p)[0], abs=1e-9)


def test_compute_from_model_outputs():
    logits = np.array([[2.0, -1.0], [0.1, 0.3], [-1.0, 1.0], [3.0, 0.0]])
    labels = np.array([0, 1, 0, 0])  # predictions 0, 1, 1, 0
    scores = glue_metrics.compute("f1_accuracy", labels, logits)
    assert scores["accuracy"] == pytest.approx(0.75)
    assert scores["f1"] == pytest.approx(sk.f1_score(labels, [0, 1, 1, 0]))
    assert scores["accuracy_and_f1"] == pytest.approx((0.75 + scores["f1"]) / 2)
    cola = glue_metrics.compute("matthews_corrcoef", labels, logits)
    assert cola["matthews_corrcoef"] == pytest.approx(sk.matthews_corrcoef(labels, [0, 1, 1, 0]))
    scores = np.array([[0.5], [4.0], [2.5], [1.0]])  # regression head [examples, 1]
    sts = glue_metrics.compute("pearson_spearman", np.array([0.0, 5.0, 3.0, 2.0]), scores)
    assert sts["spearman"] == pytest.approx(1.0)
    assert sts["pearson"] == pytest.approx(stats.pearsonr([0, 5, 3, 2], [0.5, 4, 2.5, 1])[0])
    assert sts["correlation"] == pytest.approx((sts["pearson"] + 1.0) / 2)


def test_edge_cases_and_errors():
    assert glue_metrics.f1([0, 0], [0, 0]) == 0.0  # no positives: sklearn's zero_division=0
    assert glue_metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0  # undefined: sklearn returns 0
    with pytest.raises(ValueError, match=r"both be \[examples\], got \[2\] and \[3\]"):
        glue_metrics.accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="Unknown metric 'bleu'"):
        glue_metrics.compute("bleu", [0], [0])
