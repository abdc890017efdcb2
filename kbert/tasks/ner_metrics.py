"""Entity-level precision, recall and F1, as `seqeval`'s default (CoNLL, conlleval) scoring.

An entity is a maximal chunk of labels `B-X`/`I-X` (and `E-X`/`S-X`) of one type X; it is
right when the prediction has a chunk of the same type with the same first and last word.
Chunks follow conlleval's rules, which seqeval's default mode keeps: a chunk starts at `B-`
or `S-`, at `I-`/`E-` after `O`, `E-` or `S-`, and wherever the type changes; it ends after
`E-`/`S-`, before `B-`, `S-` or `O`, and where the type changes. So an `I-X` after `O` (IOB1,
or an invalid IOB2 prediction) starts an entity. Chunks never cross sentences.

Precision = correct / predicted, recall = correct / gold, F1 = 2·P·R / (P + R), each 0 when
its denominator is 0, computed in the same order as seqeval so the floats are identical
(`tests/tasks/test_ner_metrics.py` checks against seqeval 1.2.2). Overall scores are micro
averages; `per_type` has each type's scores and support (its number of gold entities).
"""

import collections

_PREFIXES = ("B", "I", "E", "S")


def get_entities(labels):
    """Entities of one sentence.

    Args:
        labels: sequence of str. "O", or "<B|I|E|S>-<type>".

    Returns:
        list of (type, first, last): inclusive word indices, in order.
    """
    entities = []
    previous_tag, previous_type, begin = "O", None, 0
    for i, label in enumerate([*labels, "O"]):
        tag, type_ = _split(label, i)
        if _ends(previous_tag, previous_type, tag, type_):
            entities.append((previous_type, begin, i - 1))
        if _starts(previous_tag, previous_type, tag, type_):
            begin = i
        previous_tag, previous_type = tag, type_
    return entities


def _split(label, position):
    if label == "O":
        return "O", None
    tag, dash, type_ = label.partition("-")
    if tag not in _PREFIXES or not dash or not type_:
        raise ValueError(f"label {label!r} at word {position}: expected 'O' or "
                         f"'<B|I|E|S>-<type>'")
    return tag, type_


def _ends(previous_tag, previous_type, tag, type_):
    """Whether a chunk ends between the previous word and this one (conlleval's endOfChunk)."""
    if previous_tag == "O":
        return False
    return (previous_tag in ("E", "S") or tag in ("B", "S", "O")
            or previous_type != type_)


def _starts(previous_tag, previous_type, tag, type_):
    """Whether a chunk starts at this word (conlleval's startOfChunk)."""
    if tag == "O":
        return False
    return (tag in ("B", "S") or previous_tag in ("O", "E", "S")
            or previous_type != type_)


def entity_scores(gold, predicted):
    """Entity-level scores of predicted label sequences against gold ones.

    Args:
        gold: sequence of sequences of str. Gold labels, one sequence per sentence.
        predicted: sequence of sequences of str. Same lengths as `gold`.

    Returns:
        dict: precision, recall, f1 (micro averages), gold, predicted and correct (entity
        counts), macro_f1 and weighted_f1 (means of the per-type F1, unweighted and weighted
        by support, as seqeval's averages), and per_type: {type: {precision, recall, f1,
        support, predicted, correct}}, types sorted.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    gold_set, predicted_set = collections.defaultdict(set), collections.defaultdict(set)
    for sentence, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {sentence}: {len(g)} gold labels but {len(p)} "
                             f"predicted")
        try:
            for type_, first, last in get_entities(g):
                gold_set[type_].add((sentence, first, last))
            for type_, first, last in get_entities(p):
                predicted_set[type_].add((sentence, first, last))
        except ValueError as e:
            raise ValueError(f"sentence {sentence}: {e}") from None
    per_type = {}
    for type_ in sorted(set(gold_set) | set(predicted_set)):
        per_type[type_] = _scores(len(gold_set[type_] & predicted_set[type_]),
                                  len(predicted_set[type_]), len(gold_set[type_]))
    totals = [sum(s[key] for s in per_type.values())
              for key in ("correct", "predicted", "support")]
    overall = _scores(*totals)
    f1s = [s["f1"] for s in per_type.values()]
    support = overall["support"]
    return {
        "precision": overall["precision"], "recall": overall["recall"], "f1": overall["f1"],
        "gold": support, "predicted": overall["predicted"], "correct": overall["correct"],
        "macro_f1": sum(f1s) / len(f1s) if f1s else 0.0,
        "weighted_f1": (sum(s["f1"] * s["support"] for s in per_type.values()) / support
                        if support else 0.0),
        "per_type": per_type,
    }


def _scores(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    # As seqeval: (1 + beta²) * p * r / (beta² * p + r), with 0 for 0 / 0.
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": gold,
            "predicted": predicted, "correct": correct}


def flat_scores(scores, prefix=""):
    """`entity_scores` as one flat dict: f1, precision, recall, ..., f1_PER, ..."""
    flat = {f"{prefix}{key}": value for key, value in scores.items() if key != "per_type"}
    for type_, values in scores["per_type"].items():
        for key in ("precision", "recall", "f1", "support"):
            flat[f"{prefix}{key}_{type_}"] = values[key]
    return flat
