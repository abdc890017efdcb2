"""`[CLS] A [SEP] (B [SEP])` from token ids, truncated as Google's run_classifier or run_squad.

Written here rather than taken from keras-nlp's `MultiSegmentPacker`: its trimmers and
`combine_segments` build ~500 graph nodes a segment (ragged checks included), ~38% of an
exported pair classifier's serving graph, and it cannot pack a pair whose B has no tokens as
Google does (A alone, with A's budget), which took a second pack of every batch. Here the kept
lengths are computed per row, and each position gathers its id from the ragged pieces: a few
dozen ops, one pass.
"""

import tensorflow as tf

LONGEST_FIRST = "longest_first"
WATERFALL = "waterfall"


def kept_lengths(lengths, max_seq_length, truncate):
    """How many pieces of each segment each row keeps, and whether B gets its `[SEP]`.

    Args:
        lengths: list of one or two int64 tensors [batch]: the pieces of A (and B).
        max_seq_length: int. The packed length, `[CLS]` and the `[SEP]`s included.
        truncate: `LONGEST_FIRST` (run_classifier's `_truncate_seq_pair`: pop from the longer
            segment, from B on a tie; a B without pieces is left out, and A alone gets
            `max_seq_length - 2`) or `WATERFALL` (A first, B the rest; B always ends with a
            `[SEP]`, as keras-nlp's waterfall packer).

    Returns:
        (list of int64 [batch] kept lengths, bool [batch] whether B is packed) — the latter
        None for a single segment.
    """
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], max_seq_length - 2)], None
    a, b = lengths
    budget = tf.constant(max_seq_length - 3, a.dtype)
    if truncate == WATERFALL:
        kept_a = tf.minimum(a, budget)
        return [kept_a, tf.minimum(b, budget - kept_a)], tf.ones_like(b, tf.bool)
    if truncate != LONGEST_FIRST:
        raise ValueError(f"truncate must be {LONGEST_FIRST!r} or {WATERFALL!r}, got {truncate!r}")
    # Popping from the longer segment leaves the shorter whole, unless both exceed half the
    # budget; then B keeps the smaller half (A was popped second on every tie).
    kept_b = tf.minimum(b, tf.maximum(budget - a, budget // 2))
    kept_a = tf.minimum(a, budget - kept_b)
    has_b = b > 0
    return [tf.where(has_b, kept_a, tf.minimum(a, budget + 1)), kept_b], has_b


def pack(segments, max_seq_length, cls_id, sep_id, truncate=LONGEST_FIRST, width=None):
    """Packs one or two segments of token ids as BERT's input rows.

    Args:
        segments: list of one or two int32 RaggedTensors [batch, (pieces)] of equal batch.
        max_seq_length: int. The longest packed row.
        cls_id, sep_id: int. The ids of `[CLS]` and `[SEP]`.
        truncate: see `kept_lengths`.
        width: int or None. Columns of the result: `max_seq_length` to pad every row to it;
            None for the longest packed row of the batch.

    Returns:
        (token_ids, segment_ids, is_token): int32, int32 and bool [batch, width]; padding
        positions have token id -1.
    """
    with tf.control_dependencies(_same_batch(segments)):
        lengths = [tf.cast(s.row_lengths(), tf.int64) for s in segments]
    kept, has_b = kept_lengths(lengths, max_seq_length, truncate)
    # Where each segment starts in the packed row: after [CLS], and after A's [SEP].
    starts = [tf.ones_like(kept[0])] + ([kept[0] + 2] if len(kept) == 2 else [])
    total = kept[0] + 2
    if has_b is not None:
        total += tf.where(has_b, kept[1] + 1, 0)
    if width is None:
        width = tf.reduce_max(tf.concat([total, tf.zeros([1], tf.int64)], axis=0))
    positions = tf.range(tf.cast(width, tf.int64), dtype=tf.int64)[None, :]
    token_ids = tf.where(positions < total[:, None], tf.constant(sep_id, tf.int32), -1)
    token_ids = tf.where(positions == 0, tf.constant(cls_id, tf.int32), token_ids)
    for segment, start, count in zip(segments, starts, kept, strict=True):
        inside, ids = _gathered(segment, start, count, positions)
        token_ids = tf.where(inside, ids, token_ids)
    is_token = positions < total[:, None]
    # Segment 1: B's pieces and its [SEP], from B's start to the end of the row.
    segment_ids = tf.zeros_like(token_ids) if len(starts) == 1 else tf.cast(
        (positions >= starts[1][:, None]) & is_token, tf.int32)
    return token_ids, segment_ids, is_token


def _same_batch(segments):
    """The checks that a pair's segments hold one text each per example ([] for one segment):
    row i of A must never be packed with row i of a broadcast B."""
    if len(segments) == 1:
        return []
    rows = [s.nrows() for s in segments]
    static = [tf.get_static_value(r) for r in rows]
    message = "a pair's segments A and B must hold the same number of texts"
    if None not in static and static[0] != static[1]:
        raise ValueError(f"{message}; got {static[0]} and {static[1]}")
    return [tf.debugging.assert_equal(rows[0], rows[1], message=message)]


def _gathered(segment, start, count, positions):
    """(bool, int32) [batch, width]: whether each position holds one of the first `count`
    pieces of its row's `segment` placed from `start`, and that piece's id."""
    offset = positions - start[:, None]
    inside = (offset >= 0) & (offset < count[:, None])
    flat = tf.cast(segment.row_starts(), tf.int64)[:, None] + offset
    # A position outside reads one padding element appended to the pieces, so the gather is
    # valid even where every row is empty.
    values = tf.concat([segment.values, tf.zeros([1], segment.values.dtype)], axis=0)
    index = tf.where(inside, flat, tf.size(segment.values, out_type=tf.int64))
    return inside, tf.cast(tf.gather(values, index), tf.int32)
