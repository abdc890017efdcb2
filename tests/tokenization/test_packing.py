"""kbert.tokenization.packing against keras-nlp's `MultiSegmentPacker` (waterfall and single
segments) and Google's pair truncation (tests/tokenization/test_preprocessor.py checks it
through `BertPreprocessor`, here every row is checked in one batch, padded and not)."""

import itertools

import keras_nlp
import numpy as np
import pytest
import tensorflow as tf

from kbert.tokenization import packing

CLS, SEP = 101, 102


def _segments(lengths, first_id):
    """A ragged batch whose row i holds lengths[i] distinct ids from `first_id` on."""
    values = [list(range(first_id + 100 * i, first_id + 100 * i + n))
              for i, n in enumerate(lengths)]
    return tf.ragged.constant(values, dtype=tf.int32, ragged_rank=1, inner_shape=())


def _keras_nlp(segments, max_seq_length, truncate):
    packer = keras_nlp.layers.MultiSegmentPacker(
        sequence_length=max_seq_length, start_value=CLS, end_value=SEP, pad_value=-1,
        truncate=truncate, dtype="int32")
    token_ids, segment_ids = packer(tuple(segments))
    return token_ids.numpy(), segment_ids.numpy()


def _google_pair(a, b, max_seq_length):
    """run_classifier.py's packing of a pair, written out: pop from the longer (B on a tie);
    a B without pieces is left out."""
    a, b = list(a), list(b)
    if not b:
        a = a[:max_seq_length - 2]
        return [CLS, *a, SEP], [0] * (len(a) + 2)
    while len(a) + len(b) > max_seq_length - 3:
        (a if len(a) > len(b) else b).pop()
    return [CLS, *a, SEP, *b, SEP], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def _padded(rows, width, value):
    return np.array([row + [value] * (width - len(row)) for row in rows], np.int32)


@pytest.mark.parametrize("max_seq_length", [3, 5, 8, 12])
def test_waterfall_and_single_segments_equal_keras_nlp(max_seq_length):
    pairs = list(itertools.product(range(11), repeat=2))
    a, b = _segments([n for n, _ in pairs], 1000), _segments([n for _, n in pairs], 5000)
    for segments, truncate in (([a, b], packing.WATERFALL), ([a], packing.LONGEST_FIRST)):
        token_ids, segment_ids, is_token = packing.pack(
            segments, max_seq_length, CLS, SEP, truncate=truncate, width=max_seq_length)
        want_ids, want_segments = _keras_nlp(segments, max_seq_length, "waterfall")
        np.testing.assert_array_equal(token_ids.numpy(), want_ids)
        np.testing.assert_array_equal(segment_ids.numpy(), want_segments)
        np.testing.assert_array_equal(is_token.numpy(), want_ids != -1)


@pytest.mark.parametrize("max_seq_length", [5, 6, 9])
def test_pairs_are_truncated_as_googles_and_padded_to_the_longest(max_seq_length):
    pairs = list(itertools.product(range(9), repeat=2))
    segments = [_segments([n for n, _ in pairs], 1000), _segments([n for _, n in pairs], 5000)]
    token_ids, segment_ids, is_token = packing.pack(segments, max_seq_length, CLS, SEP)
    rows = [_google_pair(a, b, max_seq_length)
            for a, b in zip(segments[0].to_list(), segments[1].to_list(), strict=True)]
    width = max(len(ids) for ids, _ in rows)
    assert width == max_seq_length  # some rows are truncated: the longest fills the budget
    np.testing.assert_array_equal(token_ids.numpy(), _padded([r[0] for r in rows], width, -1))
    np.testing.assert_array_equal(segment_ids.numpy(), _padded([r[1] for r in rows], width, 0))
    np.testing.assert_array_equal(is_token.numpy(), token_ids.numpy() != -1)


def test_short_rows_pad_to_the_longest_and_an_empty_batch_has_no_columns():
    token_ids, _, _ = packing.pack([_segments([1, 0], 1000), _segments([0, 2], 5000)], 16,
                                   CLS, SEP)
    assert token_ids.numpy().tolist() == [[CLS, 1000, SEP, -1, -1], [CLS, SEP, 5100, 5101, SEP]]
    empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    for width, columns in ((None, 0), (16, 16)):
        outputs = packing.pack([empty, empty], 16, CLS, SEP, width=width)
        assert [tuple(t.shape) for t in outputs] == [(0, columns)] * 3
    with pytest.raises(ValueError, match="truncate must be 'longest_first' or 'waterfall'"):
        packing.pack([empty, empty], 16, CLS, SEP, truncate="round_robin")


def test_a_pair_of_unequal_batches_is_an_error_not_a_broadcast():
    a, b = _segments([2, 1], 1000), _segments([1], 5000)
    with pytest.raises(ValueError, match="same number of texts; got 2 and 1"):
        packing.pack([a, b], 8, CLS, SEP)
    spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
    traced = tf.function(lambda a, b: packing.pack([a, b], 8, CLS, SEP),
                         input_signature=[spec, spec])
    with pytest.raises(tf.errors.InvalidArgumentError, match="same number of texts"):
        traced(a, b)
    assert traced(a, _segments([1, 0], 5000))[0].shape == (2, 6)  # [CLS] a a [SEP] b [SEP]
