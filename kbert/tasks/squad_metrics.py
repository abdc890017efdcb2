"""SQuAD's official evaluation: exact match and F1 of the v1.1 and v2.0 scripts, as functions.

Both scripts normalize an answer the same way (lower case; drop ASCII punctuation; drop the
words "a", "an", "the"; collapse whitespace), score each question by its best gold answer, and
report percentages. They differ on purpose in three places, kept here:

* v1.1 counts every question of the data set; a question without a prediction scores 0.
  v2.0 scores only the predicted questions (and its HasAns/NoAns split then needs them all).
* v1.1 F1 of two answers that normalize to nothing is 0; v2.0 gives 1 when both are empty.
* v2.0 drops gold answers that normalize to nothing; a question with no gold answer left is
  unanswerable, and only the empty prediction scores on it.

v2.0 can also take the null odds (`null_odds.json`): a question whose odds exceed
`na_prob_thresh` counts as answered with ""; and it reports the best threshold.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower case, no punctuation, no articles, single spaces (both official scripts)."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_v1(prediction, ground_truth):
    """v1.1 `exact_match_score`: 1.0 when both normalize to the same string, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_v1(prediction, ground_truth):
    """v1.1 `f1_score`: F1 of the normalized word bags; 0 when no word is shared."""
    return _f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def exact_match_v2(prediction, ground_truth):
    """v2.0 `compute_exact` (arguments in the v1.1 order): 1 or 0."""
    return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_v2(prediction, ground_truth):
    """v2.0 `compute_f1`: as v1.1, except that two empty answers score 1."""
    predicted = normalize_answer(prediction).split() if prediction else []
    gold = normalize_answer(ground_truth).split() if ground_truth else []
    if not predicted or not gold:
        return int(predicted == gold)
    return _f1(predicted, gold)


def _f1(predicted, gold):
    same = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if same == 0:
        return 0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    articles = dataset["data"] if isinstance(dataset, dict) else dataset
    for article in articles:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset, predictions):
    """The official SQuAD v1.1 evaluation (evaluate-v1.1.py `evaluate`).

    Args:
        dataset: the parsed SQuAD JSON (dict with "data") or its list of articles.
        predictions: dict of question id -> predicted text (`predictions.json`).

    Returns:
        dict: `exact_match` and `f1` in percent over all questions, and `total`, `missing`.
    """
    exact = f1 = total = missing = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            missing += 1  # scores 0, as the official script
            continue
        golds = [a["text"] for a in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact += max(exact_match_v1(prediction, g) for g in golds)
        f1 += max(f1_v1(prediction, g) for g in golds)
    if not total:
        raise ValueError("the data set has no questions")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total,
            "missing": missing}


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """The official SQuAD v2.0 evaluation (evaluate-v2.0.py `main`).

    Args:
        dataset: the parsed SQuAD JSON (dict with "data") or its list of articles.
        predictions: dict of question id -> predicted text ("" = no answer).
        na_probs: dict of question id -> null odds (`null_odds.json`), or None (all 0).
        na_prob_thresh: float. Odds above this count as predicting "". Defaults to 1.0.

    Returns:
        dict: `exact`, `f1`, `total`; `HasAns_*` and `NoAns_*` when the data has such
        questions; `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh` when
        `na_probs` is given.
    """
    has_answer, exact_raw, f1_raw = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            continue
        exact_raw[qid] = max(exact_match_v2(predictions[qid], g) for g in golds)
        f1_raw[qid] = max(f1_v2(predictions[qid], g) for g in golds)
    if not exact_raw:
        raise ValueError("no question of the data set has a prediction")
    odds = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    exact = _apply_threshold(exact_raw, odds, has_answer, na_prob_thresh)
    f1 = _apply_threshold(f1_raw, odds, has_answer, na_prob_thresh)
    result = _summary(exact, f1)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [qid for qid, has in has_answer.items() if has == wanted]
        if ids:
            part = _summary(exact, f1, ids)
            result.update({f"{prefix}_{key}": value for key, value in part.items()})
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
    return result


def _apply_threshold(scores, odds, has_answer, threshold):
    return {qid: float(not has_answer[qid]) if odds[qid] > threshold else score
            for qid, score in scores.items()}


def _summary(exact, f1, ids=None):
    ids = list(exact) if ids is None else ids
    return {"exact": 100.0 * sum(exact[q] for q in ids) / len(ids),
            "f1": 100.0 * sum(f1[q] for q in ids) / len(ids), "total": len(ids)}


def _best_threshold(predictions, scores, odds, has_answer):
    # evaluate-v2.0.py find_best_thresh: sweep the odds upward, answering "" below each.
    score = best = sum(1 for has in has_answer.values() if not has)
    threshold = 0.0
    for qid in sorted(odds, key=lambda q: odds[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        else:
            score += -1 if predictions[qid] else 0
        if score > best:
            best, threshold = score, odds[qid]
    return 100.0 * best / len(scores), threshold


def evaluate(dataset, predictions, version_2_with_negative=False, na_probs=None):
    """`evaluate_v2` when `version_2_with_negative`, else `evaluate_v1`."""
    if version_2_with_negative:
        return evaluate_v2(dataset, predictions, na_probs)
    return evaluate_v1(dataset, predictions)
