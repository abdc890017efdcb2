"""SQuAD post-processing: window logits -> n-best answer texts -> predictions.json.

As Google's run_squad.py `write_predictions`, for the same inputs the same files: for each
example, the `n_best_size` best start and end positions of every window are paired; a pair is
kept when both ends are context tokens, the start is in its max-context window, end >= start
and the span has at most `max_answer_length` pieces; pairs are ranked by start + end logit
(stable, so ties keep window, start, end order); each is mapped back to the words of the
context and then, by `get_final_text`, to a substring of them. For SQuAD 2.0 the null answer
scores start + end logit of [CLS] in the window where that sum is lowest, and "" is predicted
when null score - best non-null score > `null_score_diff_threshold`.
"""

import collections
import dataclasses
import json
import math
import os

import numpy as np

from kbert import io

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"


@dataclasses.dataclass(frozen=True)
class SquadPredictions:
    """Post-processed predictions, keyed by question id, in example order.

    Attributes:
        predictions: dict of str -> str. The answer ("" = no answer, SQuAD 2.0).
        nbest: dict of str -> list of dict(text, probability, start_logit, end_logit).
        null_odds: dict of str -> float (null score - best non-null score), or None (v1.1).
    """

    predictions: dict
    nbest: dict
    null_odds: dict | None = None


def postprocess(examples, features, start_logits, end_logits, basic_tokenize, *,
                n_best_size=20, max_answer_length=30, version_2_with_negative=False,
                null_score_diff_threshold=0.0):
    """Answer texts from the logits of every window.

    Args:
        examples: sequence of `kbert.data.squad.SquadExample`.
        features: `kbert.data.squad.SquadFeatures` of those examples.
        start_logits: float array [features, seq].
        end_logits: float array [features, seq].
        basic_tokenize: callable, list of str -> list of list of str: the basic
            (pre-word-piece) tokenizer of the model's FullTokenizer, for `get_final_text`;
            see `basic_tokenizer_for`.
        n_best_size: int. Candidates per window end, and answers kept per question.
            Defaults to 20.
        max_answer_length: int. Longest answer, in word pieces. Defaults to 30.
        version_2_with_negative: bool. Score the null answer. Defaults to False.
        null_score_diff_threshold: float. Predict "" above this null odds. Defaults to 0.

    Returns:
        `SquadPredictions`.
    """
    # Google sums Python floats (float64) of the float32 logits; so do we, for equal ranks.
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    expected = features.token_ids.shape
    if start_logits.shape != expected or end_logits.shape != expected:
        raise ValueError(f"logits must be [features, seq] = {list(expected)}, got "
                         f"{list(start_logits.shape)} and {list(end_logits.shape)}")
    rows_of = collections.defaultdict(list)
    for row, example_index in enumerate(features.example_index):
        rows_of[int(example_index)].append(row)
    lengths = features.padding_mask.sum(axis=1)
    ranked = [_ranked_candidates(rows_of[i], features, lengths, start_logits, end_logits,
                                 n_best_size, max_answer_length, version_2_with_negative)
              for i in range(len(examples))]
    # The basic tokenizer runs once, in one batch, over the spans likely to be needed.
    likely = sorted({_span_texts(examples[i], features, c)[1]
                     for i, (candidates, _) in enumerate(ranked)
                     for c in candidates[:2 * n_best_size] if c[1] > 0})
    words = dict(zip(likely, basic_tokenize(likely), strict=True))
    predictions, all_nbest, null_odds = {}, {}, {}
    for example, (candidates, null) in zip(examples, ranked, strict=True):
        nbest = _nbest(example, features, candidates, basic_tokenize, words, n_best_size)
        if version_2_with_negative and "" not in {text for text, _, _ in nbest}:
            nbest.append(("", null[2], null[3]))
        if not nbest:  # Google's nonce for an example with no valid span
            nbest.append(("empty", 0.0, 0.0))
        probabilities = _softmax([a + b for _, a, b in nbest])
        all_nbest[example.qas_id] = [
            collections.OrderedDict(text=text, probability=p, start_logit=a, end_logit=b)
            for (text, a, b), p in zip(nbest, probabilities, strict=True)]
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0][0]
            continue
        best = next(((a, b, text) for text, a, b in nbest if text), None)
        if best is None:  # only the null answer (Google would fail here)
            null_odds[example.qas_id] = null[0]
            predictions[example.qas_id] = ""
            continue
        null_odds[example.qas_id] = null[0] - best[0] - best[1]
        predictions[example.qas_id] = ("" if null_odds[example.qas_id] > null_score_diff_threshold
                                       else best[2])
    return SquadPredictions(predictions, all_nbest,
                            null_odds if version_2_with_negative else None)


def _ranked_candidates(rows, features, lengths, start_logits, end_logits, n_best_size,
                       max_answer_length, version_2_with_negative):
    """One example's (row, start, end, start_logit, end_logit) spans, best first, and its
    null (score, row, start_logit, end_logit)."""
    candidates, null = [], (1000000.0, rows[0] if rows else None, 0.0, 0.0)
    for row in rows:
        starts, ends = start_logits[row], end_logits[row]
        if version_2_with_negative and starts[0] + ends[0] < null[0]:
            null = (starts[0] + ends[0], row, starts[0], ends[0])
        s, e = (a.ravel() for a in np.meshgrid(_best_indexes(starts, n_best_size),
                                               _best_indexes(ends, n_best_size),
                                               indexing="ij"))
        to_orig = features.token_to_orig[row]
        valid = ((s < lengths[row]) & (e < lengths[row]) & (to_orig[s] >= 0)
                 & (to_orig[e] >= 0) & features.token_is_max_context[row][s] & (e >= s)
                 & (e - s + 1 <= max_answer_length))
        logits = zip(starts[s[valid]].tolist(), ends[e[valid]].tolist(), strict=True)
        candidates.extend((row, int(i), int(j), a, b)
                          for i, j, (a, b) in zip(s[valid], e[valid], logits, strict=True))
    if version_2_with_negative and rows:
        candidates.append((null[1], 0, 0, null[2], null[3]))
    candidates.sort(key=lambda c: c[3] + c[4], reverse=True)  # stable, as Google's sorted
    return candidates, null


def _best_indexes(logits, n_best_size):
    # Google's _get_best_indexes: a stable sort by descending logit, so ties keep index order.
    return np.argsort(-logits, kind="stable")[:n_best_size]


def _span_texts(example, features, candidate):
    """(pieces joined with "##" undone, the original words it covers joined by spaces)."""
    row, start, end = candidate[:3]
    to_orig = features.token_to_orig[row]
    first, last = int(to_orig[start]), int(to_orig[end])
    piece_text = " ".join(features.tokens[row][start:end + 1])
    piece_text = " ".join(piece_text.replace(" ##", "").replace("##", "").split())
    return piece_text, " ".join(example.doc_tokens[first:last + 1])


def _nbest(example, features, candidates, basic_tokenize, words, n_best_size):
    nbest, seen = [], set()
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        if candidate[1] > 0:  # not the null answer
            piece_text, orig_text = _span_texts(example, features, candidate)
            if orig_text not in words:
                words[orig_text] = basic_tokenize([orig_text])[0]
            text = get_final_text(piece_text, orig_text, words[orig_text])
            if text in seen:
                continue
        else:
            text = ""
        seen.add(text)
        nbest.append((text, candidate[3], candidate[4]))
    return nbest


def _softmax(scores):
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [x / total for x in exps]


def get_final_text(pred_text, orig_text, orig_words):
    """Projects a prediction in tokenized text back onto the original words.

    As Google's run_squad.py `get_final_text`: `orig_text` (the whole words the predicted
    pieces came from, e.g. "Steve Smith's") is basic-tokenized ("steve smith ' s"), the
    prediction ("steve smith") is found in that, and, when both texts have the same
    characters once spaces are removed, those characters are mapped back one to one: the
    answer is "Steve Smith". When any step fails, `orig_text` is returned unchanged.

    Args:
        pred_text: str. The predicted pieces joined, "##" removed, single spaces.
        orig_text: str. The original words the span covers, joined by single spaces.
        orig_words: list of str. `orig_text` through the basic tokenizer (with the model's
            lower-casing).

    Returns:
        str.
    """
    tok_text = " ".join(orig_words)
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns_to_s = [i for i, c in enumerate(orig_text) if c != " "]
    tok_ns_to_s = [i for i, c in enumerate(tok_text) if c != " "]
    if len(orig_ns_to_s) != len(tok_ns_to_s):
        return orig_text
    tok_s_to_ns = {s: ns for ns, s in enumerate(tok_ns_to_s)}
    if start not in tok_s_to_ns or end not in tok_s_to_ns:
        return orig_text
    return orig_text[orig_ns_to_s[tok_s_to_ns[start]]:orig_ns_to_s[tok_s_to_ns[end]] + 1]


def basic_tokenizer_for(tokenizer):
    """The basic tokenizer of a FullTokenizer, as `postprocess` wants it (a batch function).

    Google's `tokenization.FullTokenizer` has `.basic_tokenizer`; kbert's runs
    `kbert.tokenization.tokenizer.basic_tokenize` on the whole batch in one call.
    """
    if hasattr(tokenizer, "basic_tokenizer"):
        return lambda texts: [tokenizer.basic_tokenizer.tokenize(t) for t in texts]
    import tensorflow as tf

    from kbert.tokenization.tokenizer import basic_tokenize

    def tokenize(texts):
        if not texts:
            return []
        words = basic_tokenize(tf.constant(list(texts)), tokenizer.do_lower_case)
        return [[w.decode("utf-8") for w in row] for row in words.to_list()]

    return tokenize


def write_predictions(result, output_dir):
    """Writes predictions.json, nbest_predictions.json and (SQuAD 2.0) null_odds.json.

    Each file is written under a temporary name and renamed when complete; the layout is
    Google's (`json.dumps(..., indent=4)` and a newline).

    Args:
        result: `SquadPredictions`.
        output_dir: str. Created if needed.

    Returns:
        dict of file kind ("predictions", "nbest", "null_odds") -> path.
    """
    files = {"predictions": (PREDICTIONS_FILE, result.predictions),
             "nbest": (NBEST_FILE, result.nbest)}
    if result.null_odds is not None:
        files["null_odds"] = (NULL_ODDS_FILE, result.null_odds)
    paths = {}
    for kind, (name, content) in files.items():
        paths[kind] = os.path.join(output_dir, name)
        with io.atomic_write(paths[kind]) as f:
            f.write(json.dumps(content, indent=4) + "\n")
    return paths
