"""tf.data input for `model.fit`: tokenize once, then shuffled, length-grouped, padded batches.

`tokenize` runs a `BertPreprocessor` over every example once and keeps each example unpadded.
It calls the preprocessor as one `tf.function` per preprocessor, batch by batch: the tokenizer
graph is large, and a `Dataset.map` would trace and optimise it again for every call (seconds
each), where this traces it once for train, dev and test. Training batches come from
`training_epochs`: a fresh shuffle each epoch, then pools of batches sorted by length, so a
batch holds examples of similar length and is padded only to its longest one; each epoch's
order is a function of the seed and the epoch number, so a resumed run sees the batches the
uninterrupted one saw (`training_dataset`: one such epoch per iteration, of a drawn number).
`inference_dataset` sorts by length instead (no randomness, even less padding) and returns the
order, so `restore_order` puts predictions back in file order. Both feed the same features,
`token_ids`, `segment_ids` and `padding_mask`, followed by a label or per-token targets.

The one batching module of the recipes: GLUE (`kbert.tasks.glue`) and NER
(`kbert.data.conll`) use these datasets; SQuAD's padded NumPy windows use
`resumable_batches` (a data order that is a function of the step, so a resumed run continues
it) and `padded_width`; feature extraction streams `padded_batch`es. Every dataset handed to
Keras ends with `prefetched`.
"""

import collections
import typing

import numpy as np
import tensorflow as tf

from kbert.tokenization.preprocessor import BertPreprocessor

FEATURES = ("token_ids", "segment_ids", "padding_mask")
POOL_BATCHES = 64  # batches per length-sorted pool of the training batches
WIDTH_MULTIPLE = 16  # `resumable_batches` widths are rounded up to this


class Tokenized(typing.NamedTuple):
    """Unpadded model inputs of a set of examples.

    Attributes:
        features: dict of name -> int32 `tf.RaggedTensor` [examples, (seq)], for `FEATURES`.
        lengths: np.ndarray of int [examples]. Tokens per example, `[CLS]` and `[SEP]` included.
    """

    features: dict
    lengths: np.ndarray

    def __len__(self):
        return len(self.lengths)


def tokenize(examples, preprocessor, batch_size=512):
    """Runs `preprocessor` over all examples once and strips the padding.

    Args:
        examples: `kbert.data.glue.Examples` (anything with `text_a` and `text_b` columns).
        preprocessor: a `kbert.BertPreprocessor` (or any callable mapping a string tensor
            [batch], or a pair of them, to a dict with `FEATURES` [batch, seq]).
        batch_size: int. Examples per preprocessor call. Defaults to 512.

    Returns:
        `Tokenized`.
    """
    column = lambda texts: tf.constant(list(texts), dtype=tf.string)  # noqa: E731
    texts = (column(examples.text_a) if examples.text_b is None
             else (column(examples.text_a), column(examples.text_b)))
    if not len(examples):
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
        return Tokenized({name: empty for name in FEATURES}, np.zeros([0], np.int64))
    function = _compiled(preprocessor, examples.text_b is not None)
    texts = texts if isinstance(texts, tuple) else (texts,)
    parts = [function(*(t[start:start + batch_size] for t in texts))
             for start in range(0, len(examples), batch_size)]
    features = {name: tf.concat([part[name] for part in parts], axis=0) for name in FEATURES}
    return Tokenized(features, features["token_ids"].row_lengths().numpy())


def training_dataset(tokenized, labels, batch_size, seed=None, bucket_boundaries=None):
    """Shuffled training batches of examples of similar length, reshuffled every epoch.

    One epoch per iteration, each with an epoch number drawn anew (from `seed`), for `fit`
    without `steps_per_epoch`: a run resumed from a backup sees other orders than the
    uninterrupted one. `training_epochs` gives the same batches as a function of the epoch.

    By default, as `resumable_batches` and Hugging Face's `group_by_length`: each epoch's
    shuffled examples are cut into pools of `POOL_BATCHES` batches, each pool is sorted by
    length and cut into batches, and the batches are shuffled again. A batch is padded to its
    longest example, so padding is a few percent of the tokens, and an epoch has
    ceil(examples / batch_size) steps. With `bucket_boundaries`, tf.data's
    `bucket_by_sequence_length` instead (widths bounded per bucket; each bucket ends its
    epoch with a partial batch, and there is more padding).

    Args:
        tokenized: `Tokenized`.
        labels: np.ndarray [examples] of class ids (int) or scores (float); or a tuple of
            per-example targets (arrays or ragged [examples, (seq)] tensors, padded with 0),
            yielded after the features in that order, e.g. (label_ids, label_weights).
        batch_size: int. Examples per batch (the last batch of an epoch may be smaller).
        seed: int. Shuffle seed; None for a random one. Defaults to None.
        bucket_boundaries: list of int. Length edges of buckets, instead of sorted pools.
            Defaults to None.

    Returns:
        (`tf.data.Dataset` of (features dict of int32 [batch, seq], labels [batch]) or
        (features, *targets), steps per epoch). The dataset's cardinality is set, so Keras
        shows progress.
    """
    epoch, steps = _epoch_batches(tokenized, labels, batch_size, 0, bucket_boundaries)
    # Each iteration (each `fit` epoch) draws another epoch number.
    number = tf.data.Dataset.random(seed, rerandomize_each_iteration=True).take(1)
    dataset = number.flat_map(epoch).apply(tf.data.experimental.assert_cardinality(steps))
    return prefetched(dataset), steps


def training_epochs(tokenized, labels, batch_size, seed=0, bucket_boundaries=None):
    """The batches of `training_dataset`, epoch after epoch, each epoch's order a function of
    (seed, epoch number) only: a run resumed at epoch k sees the batches that the
    uninterrupted run saw from epoch k on (`kbert.tasks.fine_tuning.fit_and_record`).

    Args:
        tokenized, labels, batch_size, bucket_boundaries: as `training_dataset`.
        seed: int. Defaults to 0.

    Returns:
        (function first_epoch (int, 0-based) -> `tf.data.Dataset` of the batches of epochs
        first_epoch, first_epoch + 1, ... without end, for `fit` with `steps_per_epoch`;
        steps per epoch).
    """
    epoch, steps = _epoch_batches(tokenized, labels, batch_size, seed, bucket_boundaries)

    def from_epoch(first_epoch):
        return prefetched(tf.data.Dataset.counter(first_epoch).flat_map(epoch))

    return from_epoch, steps


def _epoch_batches(tokenized, labels, batch_size, seed, bucket_boundaries):
    """(function epoch (int64 scalar tensor) -> `tf.data.Dataset` of that epoch's batches,
    steps per epoch). The order comes from stateless random ops keyed by (seed, epoch):
    nothing carries over from one epoch, or one iteration of a dataset, to the next."""
    targets = _targets(labels)
    for target in targets:
        if int(target.shape[0]) != len(tokenized):
            raise ValueError(f"{len(tokenized)} examples but {int(target.shape[0])} labels")
    if not len(tokenized):
        raise ValueError("no training examples")
    examples = (tokenized.features, *(t if isinstance(t, tf.RaggedTensor)
                                      else tf.convert_to_tensor(t) for t in targets))
    count, pool = len(tokenized), POOL_BATCHES * batch_size
    lengths = tf.constant(tokenized.lengths, tf.int64)
    longest = int(tokenized.lengths.max())
    if bucket_boundaries:
        steps = steps_per_epoch(tokenized.lengths, batch_size, bucket_boundaries)
    else:
        steps = -(-count // batch_size)

    def rows(indices):  # examples (one index) or a batch padded to its longest (indices)
        picked = tf.nest.map_structure(lambda values: tf.gather(values, indices), examples)
        return _dense(*tf.nest.map_structure(
            lambda v: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v, picked))

    @tf.autograph.experimental.do_not_convert  # its branches are on Python values
    def epoch(number):
        keys = tf.random.experimental.stateless_split(
            tf.stack([tf.constant(seed, tf.int64), number]), 2)
        order = tf.random.experimental.stateless_shuffle(tf.range(count, dtype=tf.int64),
                                                         keys[0])
        if bucket_boundaries:
            return tf.data.Dataset.from_tensor_slices(order).map(rows).bucket_by_sequence_length(
                lambda features, *_: tf.shape(features["token_ids"])[0],
                bucket_boundaries=list(bucket_boundaries),
                bucket_batch_sizes=[batch_size] * (len(bucket_boundaries) + 1))
        # Each pool in order of length (stable), cut into batches taken in a shuffled order.
        in_pool = tf.range(count, dtype=tf.int64) // pool
        order = tf.gather(order, tf.argsort(in_pool * (longest + 1) + tf.gather(lengths, order),
                                            stable=True))
        batches = tf.random.experimental.stateless_shuffle(tf.range(steps, dtype=tf.int64),
                                                           keys[1])
        return tf.data.Dataset.from_tensor_slices(batches).map(
            lambda b: rows(order[b * batch_size:(b + 1) * batch_size]))

    return epoch, steps


def prefetched(dataset, buffer_size=2):
    """`dataset` with `buffer_size` batches prefetched and tf.data's autotuning turned off.

    Keras ends an epoch, `fit` and `predict` after the steps it counted, leaving the iterator
    unfinished, and destroying an unfinished iterator waits for the autotuning thread's next
    wake-up, at intervals that double as the iterator ages. With TensorFlow 2.21 that cost
    up to a few seconds at each boundary of 8-second SST-2 epochs and up to ~30 s inside a
    1-minute MRPC epoch or at the end of `fit` (BENCHMARKS.md, "tf.data's autotuning wait").
    A batch of a few hundred examples is cheap next to a training step; with the fixed
    buffer the same SST-2 epochs were as fast or faster.

    Args:
        dataset: `tf.data.Dataset` of batches.
        buffer_size: int. Batches to prefetch. Defaults to 2.

    Returns:
        `tf.data.Dataset`.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(buffer_size).with_options(options)


def steps_per_epoch(lengths, batch_size, bucket_boundaries):
    """Batches `training_dataset` yields per epoch with `bucket_boundaries`: each bucket ends
    with a partial batch."""
    # As bucket_by_sequence_length: bucket i holds edges[i-1] <= length < edges[i].
    bucket = np.searchsorted(np.asarray(bucket_boundaries, dtype=np.int64), lengths,
                             side="right")
    counts = np.bincount(bucket, minlength=len(bucket_boundaries) + 1)
    return int(np.sum(-(-counts // batch_size)))


def inference_dataset(tokenized, batch_size, labels=None):
    """Batches sorted by length, for `model.predict` and `model.evaluate`.

    Args:
        tokenized: `Tokenized`.
        batch_size: int. Examples per batch.
        labels: np.ndarray [examples], a tuple of per-example targets (as in
            `training_dataset`), or None. Added to each batch when given.

    Returns:
        (`tf.data.Dataset` of features dicts [batch, seq], or (features, *labels) tuples,
        and `order`, np.ndarray [examples]: the example index of each row the dataset
        yields). Pass model outputs and `order` to `restore_order`.
    """
    order = np.argsort(tokenized.lengths, kind="stable")
    features = {name: tf.gather(values, order) for name, values in tokenized.features.items()}
    targets = [tf.gather(target, order) for target in _targets(labels)] if labels is not None \
        else []
    if targets:
        dataset = tf.data.Dataset.from_tensor_slices((features, *targets)).map(_dense)
    else:
        dataset = tf.data.Dataset.from_tensor_slices(features).map(_dense)
    return prefetched(dataset.padded_batch(batch_size)), order


def resumable_batches(inputs, targets, lengths, batch_size, seed=0, start_step=0,
                      group_by_length=True):
    """Endless (inputs, targets) batches of NumPy rows from global step `start_step`.

    The data order is a function of (seed, step), so a run resumed at step N sees the batches
    it would have seen. Each epoch is a permutation drawn from `seed` and the epoch number;
    the last partial batch is dropped. With `group_by_length`, pools of 64 batches are sorted
    by length before they are cut into batches, and the batches are shuffled again; each
    batch is cut to its longest row rounded up to 16 (few widths, so little retracing).

    Args:
        inputs: dict of name -> np.ndarray [examples, seq], padded.
        targets: dict of name -> np.ndarray [examples].
        lengths: np.ndarray of int [examples]. Real tokens per row.
        batch_size: int.
        seed: int. Defaults to 0.
        start_step: int. Global step to start from. Defaults to 0.
        group_by_length: bool. Defaults to True.

    Yields:
        (dict of [batch, width] inputs, dict of [batch] targets).
    """
    steps_per_epoch = len(lengths) // batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"{len(lengths)} training rows make no batch of {batch_size}")
    epoch, skip = divmod(start_step, steps_per_epoch)
    while True:
        rng = np.random.default_rng([seed, epoch])
        order = rng.permutation(len(lengths))[:steps_per_epoch * batch_size]
        if group_by_length:
            pool = POOL_BATCHES * batch_size
            for i in range(0, len(order), pool):
                order[i:i + pool] = order[i:i + pool][np.argsort(lengths[order[i:i + pool]],
                                                                 kind="stable")]
        batches = order.reshape(steps_per_epoch, batch_size)
        if group_by_length:
            batches = batches[rng.permutation(steps_per_epoch)]
        for rows in batches[skip:]:
            width = padded_width(int(lengths[rows].max()), next(iter(inputs.values())).shape[1])
            yield ({name: array[rows, :width] for name, array in inputs.items()},
                   {name: array[rows] for name, array in targets.items()})
        epoch, skip = epoch + 1, 0


def padded_batch(token_ids, segment_ids):
    """Model inputs of one batch of unpadded rows, padded to the longest row.

    Args:
        token_ids, segment_ids: sequences of sequences of int, one per example.

    Returns:
        dict of int32 np.ndarray [batch, longest row]: `FEATURES`, padded with 0.
    """
    width = max(len(ids) for ids in token_ids)
    inputs = {name: np.zeros((len(token_ids), width), np.int32) for name in FEATURES}
    for row, (ids, segments) in enumerate(zip(token_ids, segment_ids, strict=True)):
        inputs["token_ids"][row, :len(ids)] = ids
        inputs["segment_ids"][row, :len(ids)] = segments
        inputs["padding_mask"][row, :len(ids)] = 1
    return inputs


def padded_width(length, max_length):
    """`length` rounded up to a multiple of `WIDTH_MULTIPLE`, at most `max_length`."""
    return min(max_length, -(-length // WIDTH_MULTIPLE) * WIDTH_MULTIPLE)


def restore_order(values, order):
    """Puts `inference_dataset` outputs [examples, ...] back in example order."""
    values = np.asarray(values)
    restored = np.empty_like(values)
    restored[order] = values
    return restored


def _targets(labels):
    if isinstance(labels, tuple):
        return labels
    return (np.asarray(labels),)


@tf.autograph.experimental.do_not_convert
def _dense(features, *targets):
    # A slice of a ragged [examples, (seq)] tensor is a ragged_rank-0 "ragged" tensor, which
    # padded_batch refuses; as a dense [seq] tensor it pads.
    features = {name: tf.convert_to_tensor(values) for name, values in features.items()}
    if not targets:
        return features
    return (features, *(tf.convert_to_tensor(target) for target in targets))


# Traced tokenize functions, one per preprocessor configuration: tokenizing train, dev and
# test then builds the tokenizer graph (thousands of ops; tracing it costs seconds) once, and
# so does a new `BertPreprocessor` with the same vocab and options. Other callables: one per
# object. A few are kept, the most recently used.
_COMPILED = collections.OrderedDict()
_COMPILED_KEPT = 8


def _compiled(preprocessor, paired):
    key = (_configuration(preprocessor), paired)
    if key in _COMPILED:
        _COMPILED.move_to_end(key)
        return _COMPILED[key]
    strings = tf.TensorSpec([None], tf.string)
    # kbert's preprocessor branches on Python values only: converting it is wasted time.
    # Another callable may want autograph.
    autograph = not isinstance(preprocessor, BertPreprocessor)
    if paired:
        function = tf.function(lambda a, b: _trimmed(preprocessor((a, b))),
                               input_signature=[strings, strings], autograph=autograph)
    else:
        function = tf.function(lambda a: _trimmed(preprocessor(a)), input_signature=[strings],
                               autograph=autograph)
    _COMPILED[key] = function
    while len(_COMPILED) > _COMPILED_KEPT:
        _COMPILED.popitem(last=False)
    return function


def _configuration(preprocessor):
    """What a preprocessor's output depends on: a `BertPreprocessor`'s tokenizer (shared by
    all with the same vocab and case options) and packing options, else the object itself."""
    if isinstance(preprocessor, BertPreprocessor):
        return (type(preprocessor), id(preprocessor.tokenizer), preprocessor.max_seq_length,
                preprocessor.pad_to_max_length)
    return (id(preprocessor),)


@tf.autograph.experimental.do_not_convert
def _trimmed(features):
    mask = tf.cast(features["padding_mask"], tf.int32)
    lengths = tf.reduce_sum(mask, axis=1)
    return {name: tf.RaggedTensor.from_tensor(tf.cast(features[name], tf.int32), lengths=lengths)
            for name in FEATURES}
