"""GLUE's official metrics as numpy functions, applied to labels and `model.predict` outputs.

The definitions are GLUE's (and scikit-learn's / scipy's, which the tests compare against):
binary F1 of the positive class 1, Matthews correlation, Pearson and Spearman correlation
(Spearman with tied values given their average rank).
"""

import numpy as np


def accuracy(labels, predictions):
    """Fraction of `predictions` equal to `labels` (both [examples])."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
    """Binary F1 of class `positive`: 2·TP / (2·TP + FP + FN); 0 when there is no positive."""
    labels, predictions = _pair(labels, predictions)
    predicted, actual = predictions == positive, labels == positive
    true_positive = np.sum(predicted & actual)
    denominator = 2 * true_positive + np.sum(predicted & ~actual) + np.sum(~predicted & actual)
    return float(2 * true_positive / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions):
    """Matthews correlation of binary or multi-class labels (CoLA); 0 when undefined."""
    labels, predictions = _pair(labels, predictions)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    y, p = encoded[: len(labels)], encoded[len(labels):]
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (y, p), 1)
    # The multi-class form (Gorodkin 2004), which scikit-learn uses; binary is a special case.
    t, q, c, s = confusion.sum(1), confusion.sum(0), np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s * s - q @ q) * (s * s - t @ t))
    return float((c * s - t @ q) / denominator) if denominator else 0.0


def pearson(labels, predictions):
    """Pearson correlation of real-valued labels and predictions (STS-B)."""
    labels, predictions = _pair(labels, predictions, np.float64)
    x, y = labels - labels.mean(), predictions - predictions.mean()
    scale_x, scale_y = np.abs(x).max(initial=0.0), np.abs(y).max(initial=0.0)
    if not scale_x or not scale_y:
        return 0.0  # a constant side: undefined (scipy returns nan)
    x, y = x / scale_x, y / scale_y  # so that tiny (even subnormal) spreads do not underflow
    return float(x @ y / np.sqrt((x @ x) * (y @ y)))


def spearman(labels, predictions):
    """Spearman rank correlation: Pearson of the ranks, ties at their average rank."""
    labels, predictions = _pair(labels, predictions, np.float64)
    return pearson(_rank(labels), _rank(predictions))


def _f1_accuracy(labels, predictions):
    result = {"accuracy": accuracy(labels, predictions), "f1": f1(labels, predictions)}
    result["accuracy_and_f1"] = (result["accuracy"] + result["f1"]) / 2
    return result


def _pearson_spearman(labels, predictions):
    result = {"pearson": pearson(labels, predictions),
              "spearman": spearman(labels, predictions)}
    result["correlation"] = (result["pearson"] + result["spearman"]) / 2
    return result


# The `TaskSpec.metric` names: each maps (labels, predictions) to a dict of named scores.
METRICS = {
    "accuracy": lambda y, p: {"accuracy": accuracy(y, p)},
    "f1_accuracy": _f1_accuracy,
    "matthews_corrcoef": lambda y, p: {"matthews_corrcoef": matthews_corrcoef(y, p),
                                       "accuracy": accuracy(y, p)},
    "pearson_spearman": _pearson_spearman,
}


def predictions_from_outputs(outputs):
    """Model outputs to predictions: argmax of logits [examples, classes], or the scores of a
    regression head [examples, 1] (or [examples])."""
    outputs = np.asarray(outputs)
    if outputs.ndim == 2 and outputs.shape[1] > 1:
        return np.argmax(outputs, axis=-1)
    return outputs.reshape(-1)


def compute(metric, labels, outputs):
    """The scores of `metric` for the outputs of `model.predict`.

    Args:
        metric: str. A key of `METRICS` (a `TaskSpec.metric`).
        labels: array [examples]. Class ids, or real scores for regression.
        outputs: array [examples, classes] of logits, or [examples, 1] regression scores; or
            predictions [examples] already.

    Returns:
        dict of str -> float, e.g. `{"accuracy": 0.86, "f1": 0.90, "accuracy_and_f1": 0.88}`.
    """
    if metric not in METRICS:
        raise ValueError(f"Unknown metric {metric!r}; known: {sorted(METRICS)}")
    return METRICS[metric](np.asarray(labels), predictions_from_outputs(outputs))


def _pair(labels, predictions, dtype=None):
    labels, predictions = np.asarray(labels, dtype), np.asarray(predictions, dtype)
    if labels.shape != predictions.shape or labels.ndim != 1:
        raise ValueError(f"labels and predictions must both be [examples], got "
                         f"{list(labels.shape)} and {list(predictions.shape)}")
    if not len(labels):
        raise ValueError("no examples to score")
    return labels, predictions


def _rank(values):
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    # Replace each run of tied values by the mean of its ranks (scipy.stats.rankdata "average").
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]
