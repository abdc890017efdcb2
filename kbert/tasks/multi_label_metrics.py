"""Multi-label metrics as numpy functions: F1, precision and recall per label, micro and macro.

A label is predicted when its probability is at least its threshold. The definitions are
scikit-learn's `precision_recall_fscore_support` and `f1_score` with `zero_division=0` (which
the tests compare against): micro averages pool the counts of every label, macro averages are
the unweighted means of the per-label scores, and a score whose denominator is 0 is 0.
`exact_match` is scikit-learn's `accuracy_score` on indicator arrays (subset accuracy).

scikit-learn is a test dependency of kbert, not a runtime one (setup.cfg), and no runtime
dependency tunes per-label thresholds on given probabilities (scikit-learn's own
`TunedThresholdClassifierCV` refits a binary estimator), so both are written here.
"""

import numpy as np

DEFAULT_THRESHOLD = 0.5
# 0.05, 0.10, ..., 0.95: the candidates of `tune_thresholds`.
DEFAULT_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))


def scores(labels, probabilities, thresholds=DEFAULT_THRESHOLD, label_names=None) -> dict:
    """Micro and macro F1, precision, recall, subset accuracy, and the scores of each label.

    Args:
        labels: array [examples, labels] of 0/1 (or bool).
        probabilities: float array [examples, labels], e.g. the sigmoid of the logits.
        thresholds: float, or float array [labels]. A label is predicted when its
            probability is >= its threshold. Defaults to 0.5.
        label_names: sequence of str [labels]. Keys of "per_label". Defaults to "0", "1", ...

    Returns:
        dict: "micro_f1", "macro_f1", "micro_precision", "micro_recall", "macro_precision",
        "macro_recall", "exact_match" (floats), "examples" (int), and "per_label": label name
        -> {"precision", "recall", "f1", "support" (int: examples with the label),
        "threshold"}.
    """
    labels, probabilities = _checked(labels, probabilities)
    num_labels = labels.shape[1]
    thresholds = np.asarray(thresholds, np.float64)
    if thresholds.ndim == 0:
        thresholds = np.full(num_labels, thresholds)
    if thresholds.shape != (num_labels,):
        raise ValueError(f"thresholds must be a float or one per label ({num_labels}), got "
                         f"shape {list(thresholds.shape)}")
    names = [str(i) for i in range(num_labels)] if label_names is None else list(label_names)
    if len(names) != num_labels:
        raise ValueError(f"{len(names)} label_names for {num_labels} labels: {names}")
    predicted = probabilities >= thresholds
    true_positives, predicted_count, support = _counts(labels, predicted)
    precision = _divide(true_positives, predicted_count)
    recall = _divide(true_positives, support)
    f1 = _divide(2 * true_positives, predicted_count + support)
    tp, pred, true = true_positives.sum(), predicted_count.sum(), support.sum()
    return {
        "micro_f1": float(_divide(2 * tp, pred + true)),
        "macro_f1": float(f1.mean()),
        "micro_precision": float(_divide(tp, pred)),
        "micro_recall": float(_divide(tp, true)),
        "macro_precision": float(precision.mean()),
        "macro_recall": float(recall.mean()),
        "exact_match": float(np.mean(np.all(predicted == labels, axis=1))),
        "examples": int(labels.shape[0]),
        "per_label": {
            str(name): {"precision": float(precision[i]), "recall": float(recall[i]),
                        "f1": float(f1[i]), "support": int(support[i]),
                        "threshold": float(thresholds[i])}
            for i, name in enumerate(names)},
    }


def tune_thresholds(labels, probabilities, grid=None) -> np.ndarray:
    """Per label, the threshold of `grid` that maximises that label's F1 on these examples.

    Tune on dev data and report test scores with the thresholds found: scores on the data
    tuned on are optimistic. Of thresholds with equal F1 the one closest to 0.5 wins (the
    lower of two equally close), so a flat F1 keeps the usual 0.5; a label with no positive
    example keeps 0.5 (any threshold that predicts it nowhere scores the same 0).

    Args:
        labels: array [examples, labels] of 0/1 (or bool).
        probabilities: float array [examples, labels].
        grid: sequence of float in [0, 1]. Candidate thresholds. Defaults to 0.05, 0.10, ...,
            0.95.

    Returns:
        float64 array [labels].
    """
    labels, probabilities = _checked(labels, probabilities)
    grid = np.unique(np.asarray(DEFAULT_GRID if grid is None else grid, np.float64))
    if grid.ndim != 1 or not grid.size or grid.min() < 0 or grid.max() > 1:
        raise ValueError(f"grid must be a non-empty sequence of thresholds in [0, 1], got "
                         f"{grid.tolist()}")
    # Candidates closest to 0.5 first (stable: the lower of two equally close), so that
    # argmax, which returns the first maximum, breaks ties toward 0.5.
    grid = grid[np.argsort(np.abs(grid - DEFAULT_THRESHOLD), kind="stable")]
    f1 = np.empty((grid.size, labels.shape[1]))
    for i, threshold in enumerate(grid):
        true_positives, predicted_count, support = _counts(labels, probabilities >= threshold)
        f1[i] = _divide(2 * true_positives, predicted_count + support)
    best = grid[np.argmax(f1, axis=0)]
    return np.where(labels.any(axis=0), best, DEFAULT_THRESHOLD)


def _checked(labels, probabilities):
    labels = np.asarray(labels)
    probabilities = np.asarray(probabilities, np.float64)
    if labels.ndim != 2 or labels.shape != probabilities.shape:
        raise ValueError(f"labels and probabilities must both be [examples, labels], got "
                         f"{list(labels.shape)} and {list(probabilities.shape)}")
    if not labels.shape[0]:
        raise ValueError("no examples to score")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be 0/1")
    return labels.astype(bool), probabilities


def _counts(labels, predicted):
    """Per label: true positives, predicted positives and actual positives (support)."""
    return ((labels & predicted).sum(axis=0), predicted.sum(axis=0), labels.sum(axis=0))


def _divide(numerator, denominator):
    """numerator / denominator, 0 where the denominator is 0 (zero_division=0)."""
    numerator = np.asarray(numerator, np.float64)
    denominator = np.asarray(denominator, np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator),
                     where=denominator > 0)
