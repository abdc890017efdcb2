"""Packing short examples: several tokenized examples per row, for `BertEncoder(packed=True)`.

A batch of short sentences (SST-2: 13 word pieces on average) padded to its longest example
is mostly padding; packed, it is a few full rows. Each training batch keeps its examples (the
same examples per step as unpacked batching, so the recipe's hyper-parameters still hold),
placed greedily, longest first, each into the first row with room (first-fit decreasing) in
rows of at most `max_seq_length` tokens. In a row, each example
keeps its `[CLS] ... [SEP]` tokens and segment ids, its positions restart at 0, and its
`example_ids` (1, 2, ... in the row; 0 on padding) restrict attention to its own tokens, so
`BertClassifier` on a packed encoder gives every example the logits it gets alone.

    row:           [CLS] a  b  c [SEP] [CLS] d  e [SEP] [CLS] f [SEP]  pad
    position_ids:    0   1  2  3   4     0   1  2   3     0   1   2     0
    example_ids:     1   1  1  1   1     2   2  2   2     3   3   3     0
    cls_positions: [0, 5, 9]

Train with `SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD_LABEL)`, so the
loss is the mean over the batch's examples, and the per-slot `sample_weight` for metrics.
"""

import itertools
import math
import typing

import numpy as np
import tensorflow as tf

from kbert.data import pipeline

PAD_LABEL = -1  # the label of an empty example slot


class PackedBatch(typing.NamedTuple):
    """One batch of packed rows.

    Attributes:
        features: dict of name -> np.int32 [rows, seq]: token_ids, segment_ids, padding_mask,
            position_ids, example_ids; and cls_positions [rows, slots] (0 in empty slots).
        labels: np.ndarray [rows, slots]. Each slot's label; `PAD_LABEL` in empty slots.
        sample_weight: np.float32 [rows, slots]. 1 for an example, 0 for an empty slot.
        example_index: np.int64 [rows, slots]. Which input example each slot holds; -1 if empty.
    """

    features: dict
    labels: np.ndarray
    sample_weight: np.ndarray
    example_index: np.ndarray


def first_fit(lengths, capacity):
    """Greedy first-fit: each example, in order, goes into the first row with room for it.

    Args:
        lengths: sequence of int. Tokens per example.
        capacity: int. Tokens per row.

    Returns:
        list of rows, each a list of indices into `lengths`.
    """
    rows, room = [], []
    for index, length in enumerate(lengths):
        if length > capacity:
            raise ValueError(f"example {index} has {length} tokens, more than the "
                             f"{capacity} of a row (max_seq_length); truncate it first")
        for row, free in enumerate(room):
            if length <= free:
                rows[row].append(index)
                room[row] -= length
                break
        else:
            rows.append([index])
            room.append(capacity - length)
    return rows


def pack(token_ids, segment_ids, labels, max_seq_length, example_index=None):
    """Packs examples into as few rows as first-fit decreasing finds, padded to the fullest.

    Args:
        token_ids: sequence of 1-D int arrays. Each example's tokens, `[CLS]` first.
        segment_ids: sequence of 1-D int arrays, the same lengths.
        labels: np.ndarray [examples]. Class ids.
        max_seq_length: int. Tokens per row at most.
        example_index: np.ndarray [examples] or None. Ids reported in `example_index`.
            Defaults to 0, 1, ...

    Returns:
        `PackedBatch`.
    """
    lengths = [len(ids) for ids in token_ids]
    if len(segment_ids) != len(lengths) or len(labels) != len(lengths):
        raise ValueError(f"{len(lengths)} token_ids but {len(segment_ids)} segment_ids and "
                         f"{len(labels)} labels")
    example_index = np.arange(len(lengths)) if example_index is None else example_index
    # Longest first (a stable sort): fuller rows than in the given order.
    by_length = np.argsort(-np.asarray(lengths), kind="stable")
    rows = [[int(by_length[i]) for i in row]
            for row in first_fit([lengths[i] for i in by_length], max_seq_length)]
    seq = max(sum(lengths[i] for i in row) for row in rows)
    slots = max(len(row) for row in rows)
    features = {name: np.zeros((len(rows), seq), np.int32) for name in (
        "token_ids", "segment_ids", "padding_mask", "position_ids", "example_ids")}
    features["cls_positions"] = np.zeros((len(rows), slots), np.int32)
    packed_labels = np.full((len(rows), slots), PAD_LABEL, np.asarray(labels).dtype)
    packed_index = np.full((len(rows), slots), -1, np.int64)
    for r, row in enumerate(rows):
        start = 0
        for slot, i in enumerate(row):
            end = start + lengths[i]
            features["token_ids"][r, start:end] = token_ids[i]
            features["segment_ids"][r, start:end] = segment_ids[i]
            features["padding_mask"][r, start:end] = 1
            features["position_ids"][r, start:end] = np.arange(lengths[i])
            features["example_ids"][r, start:end] = slot + 1
            features["cls_positions"][r, slot] = start
            packed_labels[r, slot] = labels[i]
            packed_index[r, slot] = example_index[i]
            start = end
    weight = (packed_index >= 0).astype(np.float32)
    return PackedBatch(features, packed_labels, weight, packed_index)


def packed_batches(token_ids, segment_ids, labels, batch_size, max_seq_length, rng):
    """One epoch of packed batches: shuffled, `batch_size` examples per batch, each packed.

    Args:
        token_ids, segment_ids: sequences of 1-D int arrays, one per example.
        labels: np.ndarray [examples].
        batch_size: int. Examples per batch (the last one may have fewer).
        max_seq_length: int. Tokens per row at most.
        rng: `np.random.Generator`. The shuffle.

    Yields:
        `PackedBatch`.
    """
    labels = np.asarray(labels)
    order = rng.permutation(len(labels))
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        yield pack([token_ids[i] for i in chosen], [segment_ids[i] for i in chosen],
                   labels[chosen], max_seq_length, example_index=chosen)


def packed_training_dataset(tokenized, labels, batch_size, max_seq_length, seed=None):
    """Packed training batches for `fit_resumably`, reshuffled and repacked every epoch.

    Each epoch's shuffle (and so its packing) is a function of (seed, epoch number) only, as
    `kbert.data.pipeline.training_epochs`: a run resumed at epoch k sees the packed batches
    that the uninterrupted run saw from epoch k on.

    Args:
        tokenized: `kbert.data.pipeline.Tokenized` (ragged token_ids and segment_ids).
        labels: np.ndarray [examples]. Class ids.
        batch_size: int. Examples per step, as unpacked batching.
        max_seq_length: int. Tokens per row at most.
        seed: int or None. Shuffle seed; None for a random one (drawn once, so the epochs of
            one run still differ). Defaults to None.

    Returns:
        (function first_epoch (int, 0-based) -> `tf.data.Dataset` of (features, labels
        [rows, slots], sample_weight [rows, slots]) of epochs first_epoch, first_epoch + 1,
        ... without end; steps per epoch).
    """
    token_ids = _rows(tokenized.features["token_ids"])
    segment_ids = _rows(tokenized.features["segment_ids"])
    labels = np.asarray(labels)
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (1 << 63))

    def generate(first_epoch):
        for epoch in itertools.count(int(first_epoch)):
            rng = np.random.default_rng([seed, epoch])
            for batch in packed_batches(token_ids, segment_ids, labels, batch_size,
                                        max_seq_length, rng):
                yield batch.features, batch.labels, batch.sample_weight

    matrix = tf.TensorSpec([None, None], tf.int32)
    signature = ({name: matrix for name in (
        "token_ids", "segment_ids", "padding_mask", "position_ids", "example_ids",
        "cls_positions")}, tf.TensorSpec([None, None], tf.as_dtype(labels.dtype)),
        tf.TensorSpec([None, None], tf.float32))

    def from_epoch(first_epoch):
        return pipeline.prefetched(tf.data.Dataset.from_generator(
            generate, args=(first_epoch,), output_signature=signature))

    return from_epoch, math.ceil(len(labels) / batch_size)


def _rows(ragged):
    """A ragged [examples, (seq)] tensor as a list of 1-D np arrays (views, no copies)."""
    values = ragged.flat_values.numpy()
    splits = ragged.row_splits.numpy()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:], strict=True)]
