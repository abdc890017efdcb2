import numpy as np
import pytest
import tensorflow as tf

from kbert.data import packing
from kbert.data import pipeline


def test_first_fit_puts_each_example_in_the_first_row_with_room():
    assert packing.first_fit([5, 3, 6, 4, 1, 2], 10) == [[0, 1, 4], [2, 3], [5]]
    assert packing.first_fit([10, 10], 10) == [[0], [1]]
    with pytest.raises(ValueError, match="example 1 has 11 tokens, more than the 10"):
        packing.first_fit([3, 11], 10)


def test_pack_layout_as_the_module_docstring():
    # Given shortest first; placed longest first (first-fit decreasing).
    token_ids = [np.array([2, 12, 3]), np.array([2, 13, 14, 3]), np.array([2, 10, 11, 15, 3])]
    segment_ids = [np.array([0, 0, 0]), np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1, 1])]
    batch = packing.pack(token_ids, segment_ids, np.array([1, 0, 1]), max_seq_length=13,
                         example_index=np.array([7, 8, 9]))
    f = batch.features
    np.testing.assert_array_equal(f["token_ids"], [[2, 10, 11, 15, 3, 2, 13, 14, 3, 2, 12, 3]])
    np.testing.assert_array_equal(f["position_ids"], [[0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2]])
    np.testing.assert_array_equal(f["example_ids"], [[1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3]])
    np.testing.assert_array_equal(f["segment_ids"], [[0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(f["padding_mask"], np.ones((1, 12)))
    np.testing.assert_array_equal(f["cls_positions"], [[0, 5, 9]])
    np.testing.assert_array_equal(batch.labels, [[1, 0, 1]])
    np.testing.assert_array_equal(batch.example_index, [[9, 8, 7]])
    # Two rows of at most 8, padded to the fuller one (7 tokens): the second has an empty slot.
    batch = packing.pack(token_ids, segment_ids, np.array([1, 0, 1]), max_seq_length=8)
    np.testing.assert_array_equal(batch.example_index, [[2, 0], [1, -1]])
    np.testing.assert_array_equal(batch.features["padding_mask"], [[1] * 8, [1] * 4 + [0] * 4])
    np.testing.assert_array_equal(batch.features["example_ids"][1], [1] * 4 + [0] * 4)
    np.testing.assert_array_equal(batch.labels, [[1, 1], [0, packing.PAD_LABEL]])
    np.testing.assert_array_equal(batch.sample_weight, [[1, 1], [1, 0]])


def test_training_dataset_packs_every_example_once_per_epoch_and_reshuffles():
    """Each epoch packs every example once, in its own order, and a stream started at epoch k
    (a resumed run) gives the batches the stream from epoch 0 gave from epoch k on."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 9, 23)
    rows = [rng.integers(4, 30, n).astype("int32") for n in lengths]
    ragged = tf.ragged.constant(rows, dtype=tf.int32)
    tokenized = pipeline.Tokenized({"token_ids": ragged, "segment_ids": ragged * 0,
                                    "padding_mask": ragged * 0 + 1}, lengths)
    labels = np.arange(23) % 2
    from_epoch, steps = packing.packed_training_dataset(tokenized, labels, batch_size=5,
                                                        max_seq_length=16, seed=1)
    assert steps == 5
    batches = list(from_epoch(0).take(3 * steps).as_numpy_iterator())
    epochs = []
    for epoch in range(3):
        seen = []
        for features, batch_labels, weight in batches[epoch * steps:(epoch + 1) * steps]:
            assert features["token_ids"].shape[1] <= 16
            tokens = features["token_ids"]
            for r, s in zip(*np.nonzero(weight), strict=True):
                start = features["cls_positions"][r, s]
                ids = features["example_ids"][r] == s + 1
                example = [i for i in range(23) if np.array_equal(rows[i], tokens[r][ids])]
                assert tokens[r, start] == rows[example[0]][0]
                assert batch_labels[r, s] == labels[example[0]]
                seen.append(example[0])
            assert int(weight.sum()) <= 5
        assert sorted(seen) == list(range(23))
        epochs.append(seen)
    assert epochs[0] != epochs[1] != epochs[2]
    resumed = list(from_epoch(1).take(2 * steps).as_numpy_iterator())
    for straight, again in zip(batches[steps:], resumed, strict=True):
        tf.nest.map_structure(np.testing.assert_array_equal, straight, again)
