"""Entity scores equal seqeval 1.2.2's default (CoNLL) mode, the oracle, on varied sequences."""

import random
import warnings

import pytest
from seqeval import metrics as seqeval
from seqeval.metrics.sequence_labeling import get_entities as seqeval_entities
from seqeval.metrics.sequence_labeling import precision_recall_fscore_support

from kbert.tasks import ner_metrics

HAND_MADE = [
    # (gold, predicted)
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "O", "O", "I-LOC"]),  # I- after O starts
    (["I-ORG", "I-ORG", "B-ORG", "O"], ["B-ORG", "I-ORG", "I-ORG", "O"]),  # IOB1 input
    (["B-PER", "I-LOC", "I-LOC"], ["B-PER", "I-PER", "I-LOC"]),  # type changes mid-chunk
    (["S-PER", "B-LOC", "E-LOC", "E-LOC"], ["B-PER", "B-LOC", "I-LOC", "E-LOC"]),  # IOBES
    (["O", "O"], ["I-MISC", "E-MISC"]),
    ([], []),
    (["B-A-B", "I-A-B", "O"], ["B-A-B", "I-A", "O"]),  # types containing "-"
]


def seqeval_scores(gold, predicted):
    """seqeval's micro P/R/F1, per-type P/R/F1/support and macro/weighted F1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its zero-division warnings
        overall = [f(gold, predicted) for f in (seqeval.precision_score, seqeval.recall_score,
                                                seqeval.f1_score)]
        per_type = precision_recall_fscore_support(gold, predicted, average=None)
        macro = seqeval.f1_score(gold, predicted, average="macro")
        weighted = seqeval.f1_score(gold, predicted, average="weighted")
    return overall, per_type, macro, weighted


def assert_equal_to_seqeval(gold, predicted):
    ours = ner_metrics.entity_scores(gold, predicted)
    overall, (p, r, f, support), macro, weighted = seqeval_scores(gold, predicted)
    # Identical floats, not just close: same counts, same arithmetic.
    assert [ours["precision"], ours["recall"], ours["f1"]] == overall
    types = list(ours["per_type"])
    assert [ours["per_type"][t]["precision"] for t in types] == list(p)
    assert [ours["per_type"][t]["recall"] for t in types] == list(r)
    assert [ours["per_type"][t]["f1"] for t in types] == list(f)
    assert [ours["per_type"][t]["support"] for t in types] == list(support)
    assert ours["gold"] == sum(support)
    if types:
        assert ours["macro_f1"] == pytest.approx(macro, rel=1e-12, abs=1e-15)
        assert ours["weighted_f1"] == pytest.approx(weighted, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("gold, predicted", HAND_MADE)
def test_hand_made_sentences(gold, predicted):
    assert ner_metrics.get_entities(gold) == seqeval_entities(gold)
    assert ner_metrics.get_entities(predicted) == seqeval_entities(predicted)
    assert_equal_to_seqeval([gold], [predicted])


def test_hand_made_corpus_and_known_values():
    gold = [g for g, _ in HAND_MADE]
    predicted = [p for _, p in HAND_MADE]
    assert_equal_to_seqeval(gold, predicted)
    scores = ner_metrics.entity_scores([["B-PER", "I-PER", "O", "B-LOC"]],
                                       [["B-PER", "I-PER", "O", "B-ORG"]])
    assert (scores["correct"], scores["predicted"], scores["gold"]) == (1, 2, 2)
    assert scores["f1"] == 0.5 and scores["per_type"]["ORG"]["precision"] == 0.0
    assert ner_metrics.entity_scores([], [])["f1"] == 0.0


@pytest.mark.parametrize("prefixes", ["BIO", "BIOES"])
@pytest.mark.parametrize("seed", range(3))
def test_random_sequences(prefixes, seed):
    rng = random.Random(seed)
    types = ["PER", "LOC", "ORG"]

    def sentence(length):
        return [rng.choice(["O"] + [f"{p}-{t}" for p in prefixes if p != "O" for t in types])
                for _ in range(length)]

    gold, predicted = [], []
    for _ in range(200):
        length = rng.randint(0, 12)
        g = sentence(length)
        # Mostly-right predictions, so there are true positives as well as errors.
        p = [label if rng.random() < 0.8 else sentence(1)[0] for label in g]
        gold.append(g)
        predicted.append(p)
    for g in gold[:50]:
        assert ner_metrics.get_entities(g) == seqeval_entities(g)
    assert_equal_to_seqeval(gold, predicted)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"sentence 1: label 'PER' at word 0"):
        ner_metrics.entity_scores([["O"], ["PER"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="sentence 0: 2 gold labels but 1 predicted"):
        ner_metrics.entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        ner_metrics.entity_scores([[], []], [[]])


def test_flat_scores():
    scores = ner_metrics.entity_scores([["B-PER", "O"]], [["B-PER", "B-LOC"]])
    flat = ner_metrics.flat_scores(scores, "dev_")
    assert flat["dev_f1"] == scores["f1"] and flat["dev_f1_PER"] == 1.0
    assert flat["dev_support_LOC"] == 0 and "dev_per_type" not in flat
