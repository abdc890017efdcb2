"""Masked-LM / next-sentence pretraining instances from tokenized documents, as Google's.

Files in and TFRecords out are `kbert.data.pretraining.writer`; reading them back for `fit` is
`kbert.data.pretraining_dataset`.

The instance logic is that of Google's create_pretraining_data.py, step for step, but over
arrays: a document is a run of sentences in one flat array of token ids, so segment A, the
actual or random segment B and the truncation are token-offset arithmetic (a short Python loop
per document over sentence lengths, not tokens), and masking is numpy over a whole batch.

Google's semantics kept:
- target length `max_seq_length - 3`, shortened to `randint(2, max)` with `short_seq_prob`,
  drawn once per document and pass;
- A = the first 1..n-1 sentences of a chunk; B = the rest, or (50%, and always for a
  one-sentence chunk) a random span of another document, the unused sentences put back;
- `truncate_seq_pair`: the longer side loses one token at a time, from the front or the back
  with probability 1/2 each (drawn here as a binomial count per side, the same distribution);
- `num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`
  positions, never [CLS]/[SEP], chosen uniformly; 80% [MASK] / 10% a uniform vocab id / 10%
  unchanged; with whole-word masking, words (a piece plus its `##` pieces) in random order,
  skipping words that would overflow the budget, each piece drawing its own replacement;
  a word segmenter may join more tokens into one word (`TokenizedDocuments.word_continues`,
  from `kbert.data.word_segmentation` for Chinese), as the Chinese BERT-wwm work did;
- `dupe_factor` passes over the documents with different draws; instances shuffled.

Differences, all deliberate: the caller hands over one chunk of documents at a time
(`kbert.data.pretraining.writer` cuts the corpus into chunks of `chunk_bytes` of text), so the
random next segment and the shuffle draw from that chunk rather than the whole corpus and
memory stays flat however large the corpus; the random stream is numpy's, passed in as `rng`,
so the bytes differ from Google's for the same seed while the statistics agree
(tests/data/test_pretraining_google.py).

Why not `tf_text.mask_language_model` or keras-nlp's `MaskedLMMaskGenerator`: both pick
`ceil(rate * selectable)` items (Google: `round(rate * len(tokens))`, [CLS]/[SEP] counted),
their whole-word mode caps words rather than pieces, and they draw from TF's stateful random
ops rather than a passed-in generator; the numpy version below is as fast here.
"""

import bisect
import dataclasses
import typing

import numpy as np

from kbert import ranges


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """Google's create_pretraining_data.py settings (same names and defaults).

    Args:
        max_seq_length: int. Tokens per instance, [CLS] and two [SEP] included. Defaults to 128.
        max_predictions_per_seq: int. Most masked positions per instance. Defaults to 20.
        masked_lm_prob: float. Fraction of tokens to predict. Defaults to 0.15.
        short_seq_prob: float. Probability of a shorter target length. Defaults to 0.1.
        dupe_factor: int. Passes over the documents, each with new masks. Defaults to 10.
        do_whole_word_mask: bool. Mask all pieces of a word together. Defaults to False.
        chinese_word_segmenter: str or None. With `do_whole_word_mask`, the segmenter
            (`kbert.data.word_segmentation.SEGMENTERS`, e.g. "jieba") whose words group CJK
            characters for masking; None: each CJK character is a word, as Google's.
            Defaults to None.
        mask_token_rate: float. Predicted positions replaced by [MASK]. Defaults to 0.8.
        random_token_rate: float. Predicted positions replaced by a uniform vocab id (the rest
            keep their token). Defaults to 0.1.
    """

    # [CLS] a [SEP] b [SEP]: at least one piece on each side.
    max_seq_length: int = ranges.field(128, ranges.between(5, ranges.MAX_SEQ_LENGTH))
    max_predictions_per_seq: int = ranges.field(20, ranges.between(1, ranges.MAX_SEQ_LENGTH))
    masked_lm_prob: float = ranges.field(0.15, ranges.between(0, 1))
    short_seq_prob: float = ranges.field(0.1, ranges.between(0, 1))
    dupe_factor: int = ranges.field(10, ranges.at_least(1))
    do_whole_word_mask: bool = False
    chinese_word_segmenter: str | None = None
    mask_token_rate: float = ranges.field(0.8, ranges.between(0, 1))
    random_token_rate: float = ranges.field(0.1, ranges.between(0, 1))

    def __post_init__(self):
        ranges.check(self)
        check_predictions(self.max_seq_length, self.max_predictions_per_seq)
        if self.mask_token_rate + self.random_token_rate > 1:
            raise ValueError("mask_token_rate + random_token_rate must be at most 1")
        if self.chinese_word_segmenter is not None and not self.do_whole_word_mask:
            raise ValueError("chinese_word_segmenter only groups tokens for whole-word "
                             "masking; set do_whole_word_mask too")


def check_predictions(max_seq_length, max_predictions_per_seq):
    """Refuses more masked positions per sequence than it has pieces (None: not set)."""
    if None not in (max_seq_length, max_predictions_per_seq) and (
            max_predictions_per_seq > max_seq_length):
        raise ValueError(f"max_predictions_per_seq ({max_predictions_per_seq}) must be at most "
                         f"max_seq_length ({max_seq_length}): a sequence has no more pieces "
                         "to mask")


class TokenizedDocuments(typing.NamedTuple):
    """Documents of sentences of token ids, as one flat array with two levels of splits.

    Sentence `s` is `ids[sentence_splits[s]:sentence_splits[s + 1]]`; document `d` holds
    sentences `document_splits[d]` to `document_splits[d + 1] - 1`. Empty sentences and
    documents are not allowed (Google drops them). `word_continues`, if set, marks tokens that
    whole-word masking joins to the previous token's word besides `##` pieces.
    """

    ids: np.ndarray  # int32 [tokens]
    sentence_splits: np.ndarray  # int64 [sentences + 1]
    document_splits: np.ndarray  # int64 [documents + 1]
    word_continues: np.ndarray | None = None  # bool [tokens]

    @classmethod
    def from_lists(cls, documents):
        """From a list of documents, each a list of sentences, each a list of ids."""
        sentences = [s for d in documents for s in d if len(s)]
        counts = [sum(1 for s in d if len(s)) for d in documents]
        lengths = [len(s) for s in sentences]
        ids = np.concatenate([np.asarray(s, np.int32) for s in sentences]) if sentences else (
            np.zeros(0, np.int32))
        return cls(ids, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                   np.concatenate([[0], np.cumsum([c for c in counts if c])]).astype(np.int64))

    @property
    def num_documents(self):
        return len(self.document_splits) - 1


class MaskingVocab(typing.NamedTuple):
    """The special ids and `##` pieces that masking needs from a `kbert.tokenization.Vocab`."""

    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_continuation: np.ndarray  # bool [size]: the piece starts with "##"

    @classmethod
    def from_tokens(cls, tokens):
        index = {t: i for i, t in enumerate(tokens)}
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
        if missing:
            raise ValueError(f"vocabulary lacks {', '.join(missing)}")
        return cls(len(tokens), index["[CLS]"], index["[SEP]"], index["[MASK]"],
                   np.array([t.startswith("##") for t in tokens], bool))


# What the second segment teaches: "nsp", Google's next-sentence prediction (B is a random
# span of another document half the time, label 1); "sop", ALBERT's sentence-order prediction
# (B follows A, swapped half the time, label 1); "none", masked LM only (B follows A).
# As ALBERT's create_pretraining_data.py, a one-sentence chunk takes a random B under every
# task, since it has no second sentence to pair with.
PAIR_TASKS = ("nsp", "sop", "none")


def create_instances(documents, config, vocab, rng, batch_size=4096):
    """Yields batches of pretraining instances as numpy arrays with Google's feature names.

    Args:
        documents: `TokenizedDocuments`.
        config: `PretrainingDataConfig`.
        vocab: `MaskingVocab`.
        rng: `np.random.Generator`. The only source of randomness.
        batch_size: int. Instances per yielded batch. Defaults to 4096.

    Yields:
        dict: input_ids int32, input_mask and segment_ids int8 [batch, max_seq_length];
        masked_lm_positions, masked_lm_ids int32 and masked_lm_weights float32
        [batch, max_predictions_per_seq]; next_sentence_labels int32 [batch, 1].
    """
    spans = shuffled_spans(documents, config, rng)
    yield from instance_batches(documents.ids, spans, config, vocab, rng, batch_size,
                                documents.word_continues)


def shuffled_spans(documents, config, rng, pair_task="nsp"):
    """The first half of `create_instances`: every instance's A and B spans, shuffled.

    Args:
        pair_task: str. One of `PAIR_TASKS`. Defaults to "nsp".

    Returns five arrays [instances]: a_start, a_end, b_start, b_end (offsets into
    `documents.ids`) and the label: is_random_next, or for "sop" is_swapped.
    """
    if pair_task not in PAIR_TASKS:
        raise ValueError(f"pair_task must be one of {PAIR_TASKS}, got {pair_task!r}")
    if documents.num_documents == 0:
        return [np.zeros(0, np.int64)] * 4 + [np.zeros(0, bool)]
    spans = _pair_spans(documents, config, rng, pair_task)
    order = rng.permutation(len(spans[0]))  # Google shuffles all instances
    return [s[order] for s in spans]


def instance_batches(ids, spans, config, vocab, rng, batch_size=4096, word_continues=None):
    """The second half of `create_instances`: truncation, packing and masking, by batches.

    `word_continues` (bool [tokens] or None) is `TokenizedDocuments.word_continues`.
    """
    for begin in range(0, len(spans[0]), batch_size):
        yield _make_batch(ids, [s[begin:begin + batch_size] for s in spans], config, vocab, rng,
                          word_continues)


def _uniforms(rng, block=8192):
    """Endless uniform draws in [0, 1) from `rng`, taken in blocks (Python-speed scalars)."""
    while True:
        yield from rng.random(block).tolist()


def _pair_spans(documents, config, rng, pair_task="nsp"):
    """The (A, B) token spans of every instance, as Google's `create_instances_from_document`.

    Google walks a document one sentence at a time until the chunk reaches the target
    length; `bisect` finds the same sentence directly.

    Returns five arrays [instances]: a_start, a_end, b_start, b_end (offsets into
    `documents.ids`) and is_random_next.
    """
    offsets = documents.sentence_splits.tolist()
    bounds = documents.document_splits.tolist()
    num_documents = len(bounds) - 1
    max_num_tokens = config.max_seq_length - 3
    short_seq_prob = config.short_seq_prob
    rand = _uniforms(rng).__next__  # randint(lo, hi) below is lo + int(rand() * (hi - lo + 1))
    random_next, swap = pair_task == "nsp", pair_task == "sop"
    spans, is_random = [], []
    add_span, add_random = spans.append, is_random.append
    for _ in range(config.dupe_factor):
        for d in range(num_documents):
            first, last = bounds[d], bounds[d + 1]
            target = max_num_tokens
            if rand() < short_seq_prob:
                target = 2 + int(rand() * (max_num_tokens - 1))
            chunk = first
            while chunk < last:
                # The chunk is sentences [chunk, i]: up to the first that reaches `target`.
                i = bisect.bisect_left(offsets, offsets[chunk] + target, chunk + 1, last) - 1
                n = i - chunk + 1
                split = chunk + (1 + int(rand() * (n - 1)) if n >= 2 else 1)
                if n == 1 or (random_next and rand() < 0.5):
                    target_b = target - (offsets[split] - offsets[chunk])
                    for _ in range(10):
                        r = int(rand() * num_documents)
                        if r != d:
                            break
                    r_first, r_last = bounds[r], bounds[r + 1]
                    j = r_first + int(rand() * (r_last - r_first))
                    end = bisect.bisect_left(offsets, offsets[j] + target_b, j + 1, r_last)
                    add_span((offsets[chunk], offsets[split], offsets[j], offsets[end]))
                    add_random(True)
                    chunk = split  # put the unused sentences back
                elif swap and rand() < 0.5:  # ALBERT's sentence order: B A, label 1
                    add_span((offsets[split], offsets[i + 1], offsets[chunk], offsets[split]))
                    add_random(True)
                    chunk = i + 1
                else:
                    add_span((offsets[chunk], offsets[split], offsets[split], offsets[i + 1]))
                    add_random(False)
                    chunk = i + 1
    spans = np.asarray(spans, np.int64).reshape(-1, 4)
    return (*spans.T, np.asarray(is_random, bool))


def _truncated_lengths(len_a, len_b, max_num_tokens):
    """Final lengths after Google's `truncate_seq_pair` (which side loses each token is fixed)."""
    excess = np.maximum(len_a + len_b - max_num_tokens, 0)
    a_longer = len_a > len_b
    # Trim the longer side until it is no longer longer (ties trim B), then alternate.
    first = np.minimum(excess, np.where(a_longer, len_a - len_b, len_b - len_a + 1))
    rest = excess - first
    len_a = len_a - np.where(a_longer, first + rest // 2, (rest + 1) // 2)
    len_b = len_b - np.where(a_longer, (rest + 1) // 2, first + rest // 2)
    return len_a, len_b


def _make_batch(ids, spans, config, vocab, rng, word_continues=None):
    packed = pack_pairs(ids, spans, config, vocab, rng, word_continues)
    positions, labels, weights, masked = mask_tokens(
        packed["tokens"], packed["candidates"], packed["lengths"], config, vocab, rng,
        packed["word_continues"])
    return {
        "input_ids": masked,
        "input_mask": packed["input_mask"],
        "segment_ids": packed["segment_ids"],
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": packed["next_sentence_labels"],
    }


def pack_pairs(ids, spans, config, vocab, rng, word_continues=None):
    """Truncates A and B as Google's `truncate_seq_pair` and packs `[CLS] A [SEP] B [SEP]`.

    Args:
        ids: int32 [tokens]. The documents' token ids (`TokenizedDocuments.ids`).
        spans: the five arrays of `shuffled_spans`, [batch] each.
        config: `PretrainingDataConfig`.
        vocab: `MaskingVocab`.
        rng: `np.random.Generator`. Draws which end each truncated token comes off.
        word_continues: bool [tokens] or None. Whether each token continues the word before
            it (Chinese whole-word masking, `TokenizedDocuments.word_continues`).

    Returns:
        dict of numpy arrays: tokens int32, candidates bool (maskable: not [CLS], [SEP], pad),
        input_mask and segment_ids int8 [batch, max_seq_length]; lengths int32 [batch];
        next_sentence_labels int32 [batch, 1]; word_continues bool [batch, max_seq_length]
        (maskable tokens only) or None.
    """
    a_start, a_end, b_start, b_end, is_random = spans
    length = config.max_seq_length
    len_a, len_b = _truncated_lengths(a_end - a_start, b_end - b_start, length - 3)
    # Each removed token came off the front with probability 1/2.
    a_start = a_start + rng.binomial(a_end - a_start - len_a, 0.5)
    b_start = b_start + rng.binomial(b_end - b_start - len_b, 0.5)

    # [CLS] A [SEP] B [SEP] 0...: position p holds A[p - 1] or B[p - len_a - 2].
    pos = np.arange(length, dtype=np.int32)[None, :]
    la = len_a.astype(np.int32)[:, None]
    total = la + len_b.astype(np.int32)[:, None] + 3
    in_a = (pos >= 1) & (pos <= la)
    in_b = (pos >= la + 2) & (pos < total - 1)
    source = np.where(in_a, (a_start - 1).astype(np.int32)[:, None],
                      (b_start - 2).astype(np.int32)[:, None] - la) + pos
    candidates = in_a | in_b
    tokens = ids.take(np.where(candidates, source, 0))
    tokens[~candidates] = 0
    rows = np.arange(len(tokens))
    tokens[:, 0] = vocab.cls_id
    tokens[rows, la[:, 0] + 1] = vocab.sep_id
    tokens[rows, total[:, 0] - 1] = vocab.sep_id
    continues = None if word_continues is None else (
        word_continues.take(np.where(candidates, source, 0)) & candidates)
    return {
        "tokens": tokens,
        "candidates": candidates,
        "lengths": total[:, 0],
        "input_mask": (pos < total).view(np.int8),
        "segment_ids": (in_b | (pos == total - 1)).view(np.int8),
        "next_sentence_labels": is_random.astype(np.int32)[:, None],
        "word_continues": continues,
    }


def mask_tokens(tokens, candidates, lengths, config, vocab, rng, word_continues=None):
    """Google's `create_masked_lm_predictions` for a batch.

    Args:
        tokens: int32 [batch, seq]. Ids with [CLS]/[SEP]/padding.
        candidates: bool [batch, seq]. Positions that may be predicted (not [CLS], [SEP], pad).
        lengths: int [batch]. Tokens per row, [CLS] and [SEP]s included (sets the count).
        config: `PretrainingDataConfig`.
        vocab: `MaskingVocab`.
        rng: `np.random.Generator`.
        word_continues: bool [batch, seq] or None. With whole-word masking, positions that
            join the previous position's word besides `##` pieces. Defaults to None.

    Returns:
        masked_lm_positions int32 [batch, predictions] (ascending, then 0 padding),
        masked_lm_ids int32 [batch, predictions] (the original ids), masked_lm_weights float32
        [batch, predictions] (1.0 on real predictions), and the masked tokens [batch, seq].
    """
    batch, seq = tokens.shape
    predictions = config.max_predictions_per_seq
    budget = np.minimum(predictions, np.maximum(
        1, np.rint(np.asarray(lengths) * config.masked_lm_prob).astype(np.int64)))
    if config.do_whole_word_mask:
        selected = _select_whole_words(tokens, candidates, budget, vocab, rng, word_continues)
        rows, cols = np.nonzero(selected)  # row-major: ascending positions per row
        counts = selected.sum(axis=1)
        rank = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
        positions = np.zeros((batch, predictions), np.int32)
        positions[rows, rank] = cols
    else:
        # A uniform random subset: the `budget` candidates with the smallest random keys.
        keys = rng.random((batch, seq))
        keys[~candidates] = 2.0
        width = min(predictions, seq)
        first = np.argpartition(keys, width - 1, axis=1)[:, :width]  # the smallest, unordered
        first = np.take_along_axis(
            first, np.argsort(np.take_along_axis(keys, first, axis=1), axis=1), axis=1)
        if width < predictions:
            first = np.pad(first, ((0, 0), (0, predictions - width)))
        counts = np.minimum(budget, candidates.sum(axis=1))
        chosen = np.arange(predictions)[None, :] < counts[:, None]
        positions = np.sort(np.where(chosen, first, seq), axis=1)
        positions[positions == seq] = 0
    valid = np.arange(predictions)[None, :] < counts[:, None]
    labels = np.where(valid, np.take_along_axis(tokens, positions, axis=1), 0).astype(np.int32)

    # 80% [MASK], 10% a uniform vocab id, 10% unchanged (Google draws the same three cases).
    rows, cols = np.nonzero(valid)
    where = rows, positions[rows, cols]
    draw = rng.random(len(rows))
    random_ids = rng.integers(0, vocab.size, len(rows), dtype=np.int32)
    masked = tokens.copy()
    masked[where] = np.where(
        draw < config.mask_token_rate, np.int32(vocab.mask_id),
        np.where(draw < config.mask_token_rate + config.random_token_rate, random_ids,
                 tokens[where]))
    return positions, labels, valid.astype(np.float32), masked


def _select_whole_words(tokens, candidates, budget, vocab, rng, word_continues=None):
    """Whole words in random order, each taken if it still fits the budget (as Google)."""
    batch, seq = tokens.shape
    # A "##" piece joins the previous candidate's word, even across a [SEP] (as Google).
    continuation = vocab.is_continuation[tokens] & candidates
    if word_continues is not None:
        continuation |= word_continues & candidates
    seen = np.cumsum(candidates, axis=1)
    starts = candidates & (~continuation | (seen == 1))
    word = np.cumsum(starts, axis=1) - 1  # word index of each candidate position
    num_words = starts.sum(axis=1)
    width = max(int(num_words.max()), 1)
    flat_word = np.where(candidates, np.arange(batch)[:, None] * width + word, batch * width)
    sizes = np.bincount(flat_word.ravel(), minlength=batch * width + 1)[:-1].reshape(batch, width)

    keys = np.where(np.arange(width)[None, :] < num_words[:, None],
                    rng.random((batch, width)), 2.0)
    order = np.argsort(keys, axis=1)
    sizes_in_order = np.take_along_axis(sizes, order, axis=1)
    taken_in_order = np.zeros((batch, width), bool)
    count = np.zeros(batch, np.int64)
    for k in range(width):
        size = sizes_in_order[:, k]
        take = (size > 0) & (count + size <= budget)
        taken_in_order[:, k] = take
        count += np.where(take, size, 0)
        if np.all((count >= budget) | (k + 1 >= num_words)):
            break
    taken = np.zeros((batch, width), bool)
    np.put_along_axis(taken, order, taken_in_order, axis=1)
    return candidates & np.take_along_axis(taken, np.clip(word, 0, width - 1), axis=1)
