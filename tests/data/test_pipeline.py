"""tf.data input: tokenize once, length groups, padding to the longest in a batch, order kept."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.data import glue
from kbert.data import pipeline
from tests.conftest import TINY_VOCAB

MAX = 40


def fake_preprocessor(texts):
    """Stands in for BertPreprocessor: one id per word (id = word length), [CLS] a [SEP] b [SEP]."""
    def ids(text):
        words = tf.strings.split(text)
        return tf.strings.length(words).to_tensor(shape=[None, MAX]), words.row_lengths()
    a, b = (texts, None) if not isinstance(texts, tuple) else texts
    ids_a, len_a = ids(a)
    len_b = tf.zeros_like(len_a) if b is None else ids(b)[1] + 1
    length = tf.cast(tf.minimum(len_a + 2 + len_b, MAX), tf.int32)
    position = tf.range(MAX)[None, :]
    mask = tf.cast(position < length[:, None], tf.int32)
    token_ids = tf.concat([tf.fill([tf.shape(a)[0], 1], 101), ids_a[:, :MAX - 1]], 1)
    token_ids = tf.maximum(token_ids, 1) * mask  # [SEP] and segment b become 1
    segment_ids = tf.cast(position >= tf.cast(len_a, tf.int32)[:, None] + 2, tf.int32) * mask
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": mask}


def examples(lengths, pairs=False):
    text = tuple(" ".join(["w"] * n) for n in lengths)
    return glue.Examples(text_a=text, text_b=text if pairs else None,
                         label=np.arange(len(lengths), dtype=np.int32),
                         index=tuple(map(str, range(len(lengths)))), label_names=None)


def test_tokenize_strips_padding():
    tokenized = pipeline.tokenize(examples([1, 5, 3]), fake_preprocessor, batch_size=2)
    assert tokenized.lengths.tolist() == [3, 7, 5] and len(tokenized) == 3
    assert tokenized.features["token_ids"][1].numpy().tolist() == [101, 1, 1, 1, 1, 1, 1]
    pairs = pipeline.tokenize(examples([2, 3], pairs=True), fake_preprocessor)
    assert pairs.lengths.tolist() == [7, 9]
    assert pairs.features["segment_ids"][0].numpy().tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert all(v.dtype == tf.int32 for v in pairs.features.values())


def _epochs(make_dataset, tokenized, check_batch):
    """Two epochs of example ids from `make_dataset()`; checks each batch's padding, that an
    epoch sees every example, that epochs are reshuffled and that the seed repeats them."""
    dataset, steps = make_dataset()
    assert dataset.cardinality().numpy() == steps
    epochs = []
    for _ in range(2):
        seen, batches = [], 0
        for features, ids in dataset:
            batches += 1
            mask = features["padding_mask"].numpy()
            true_lengths = tokenized.lengths[ids.numpy()]
            np.testing.assert_array_equal(mask.sum(1), true_lengths)
            assert mask.shape[1] == true_lengths.max()  # padded to the longest in the batch
            assert features["token_ids"].shape == features["segment_ids"].shape == mask.shape
            check_batch(true_lengths)
            seen.extend(ids.numpy().tolist())
        assert batches == steps and sorted(seen) == list(range(len(tokenized)))
        epochs.append(seen)
    assert epochs[0] != epochs[1]  # reshuffled every epoch
    again, _ = make_dataset()
    assert [y for _, ys in again for y in ys.numpy().tolist()] == epochs[0]  # seeded
    return steps


@pytest.mark.parametrize("pool_batches", [64, 3])
def test_training_batches_are_length_grouped_shuffled_and_complete(monkeypatch, pool_batches):
    monkeypatch.setattr(pipeline, "POOL_BATCHES", pool_batches)
    lengths = np.random.default_rng(0).integers(1, 37, size=200)
    tokenized = pipeline.tokenize(examples(lengths), fake_preprocessor)
    batches = []
    steps = _epochs(lambda: pipeline.training_dataset(tokenized, np.arange(200), 16, seed=3),
                    tokenized, batches.append)
    assert steps == 13
    if pool_batches == 64:  # one pool: the batches cut its length order into runs
        for low, high in itertools.pairwise(sorted(batches[:steps], key=min)):
            assert max(low) <= min(high)
    # Padded tokens over real ones: 1.69 for unsorted batches of these lengths.
    padded = sum(len(batch) * max(batch) for batch in batches[:steps])
    assert padded < (1.1 if pool_batches == 64 else 1.4) * tokenized.lengths.sum()


def test_training_batches_with_bucket_boundaries():
    lengths = np.random.default_rng(0).integers(1, 37, size=200)
    tokenized = pipeline.tokenize(examples(lengths), fake_preprocessor)
    boundaries = [8, 16, 24]

    def one_bucket(batch):
        assert len(set(np.searchsorted(boundaries, batch, side="right"))) == 1

    _epochs(lambda: pipeline.training_dataset(tokenized, np.arange(200), 16, seed=3,
                                              bucket_boundaries=boundaries),
            tokenized, one_bucket)


def test_training_epochs_are_a_function_of_the_seed_and_the_epoch():
    """What a resumed run needs: the batches from epoch k on, whatever ran before."""
    tokenized = pipeline.tokenize(examples(np.random.default_rng(0).integers(1, 37, size=50)),
                                  fake_preprocessor)

    def batches(seed, first_epoch, epochs):
        dataset_of, steps = pipeline.training_epochs(tokenized, np.arange(50), 8, seed=seed)
        dataset = dataset_of(first_epoch).take(epochs * steps)
        return [ids.numpy().tolist() for _, ids in dataset], steps

    straight, steps = batches(3, 0, 3)
    assert steps == 7 and batches(3, 2, 1)[0] == straight[2 * steps:]
    epochs = [straight[i * steps:(i + 1) * steps] for i in range(3)]
    for epoch in epochs:
        assert sorted(i for batch in epoch for i in batch) == list(range(50))
    assert epochs[0] != epochs[1] != epochs[2] and batches(4, 0, 1)[0] != epochs[0]


def test_length_groups_cut_padding():
    lengths = np.array([5] * 32 + [120] * 32)
    tokenized = pipeline.tokenize(examples(lengths - 2), _long_preprocessor)
    dataset, steps = pipeline.training_dataset(tokenized, np.zeros(64), 32, seed=0)
    assert steps == 2 and sorted(f["token_ids"].shape[1] for f, _ in dataset) == [5, 120]


def _long_preprocessor(texts):
    global MAX
    old, MAX = MAX, 128
    try:
        return fake_preprocessor(texts)
    finally:
        MAX = old


def test_inference_order_is_restored():
    lengths = [9, 2, 30, 2, 14, 5, 7]
    tokenized = pipeline.tokenize(examples(lengths), fake_preprocessor)
    dataset, order = pipeline.inference_dataset(tokenized, 3, labels=np.arange(7))
    widths, rows = [], []
    for features, labels in dataset:
        widths.append(features["token_ids"].shape[1])
        rows.extend(labels.numpy().tolist())
    assert rows == order.tolist() and widths == sorted(widths)
    assert widths == [7, 16, 32]  # lengths 4 4 7 | 9 11 16 | 32: padded to the longest of each
    outputs = np.array(rows)[:, None] * np.ones((1, 2))  # a "model" echoing the example id
    np.testing.assert_array_equal(pipeline.restore_order(outputs, order)[:, 0], np.arange(7))
    unlabelled, _ = pipeline.inference_dataset(tokenized, 3)
    assert isinstance(next(iter(unlabelled)), dict)


def test_datasets_for_keras_run_without_tf_data_autotuning():
    # Keras leaves each epoch's iterator unfinished, and destroying one waits for tf.data's
    # autotuning thread (seconds per epoch boundary, BENCHMARKS.md): every recipe dataset
    # turns that thread off and keeps its elements.
    from kbert.data import packing

    tokenized = pipeline.tokenize(examples([3, 8, 5, 2]), fake_preprocessor)
    labels = np.arange(4)
    datasets = [pipeline.training_dataset(tokenized, labels, 2, seed=0)[0],
                pipeline.training_dataset(tokenized, labels, 2, seed=0,
                                          bucket_boundaries=[6])[0],
                pipeline.training_epochs(tokenized, labels, 2)[0](1),
                pipeline.inference_dataset(tokenized, 2)[0],
                packing.packed_training_dataset(tokenized, labels, 2, 16, seed=0)[0](1)]
    for dataset in datasets:
        assert dataset.options().autotune.enabled is False
    plain = tf.data.Dataset.range(5).batch(2)
    assert [b.tolist() for b in pipeline.prefetched(plain).as_numpy_iterator()] == [
        [0, 1], [2, 3], [4]]


def test_errors():
    tokenized = pipeline.tokenize(examples([1, 2]), fake_preprocessor)
    with pytest.raises(ValueError, match="2 examples but 3 labels"):
        pipeline.training_dataset(tokenized, np.arange(3), 2)
    empty = pipeline.tokenize(examples([]), fake_preprocessor)
    assert len(empty) == 0
    with pytest.raises(ValueError, match="no training examples"):
        pipeline.training_dataset(empty, np.arange(0), 2)


def test_preprocessors_of_one_configuration_share_a_traced_function_and_others_do_not(
        tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    rows = glue.Examples(text_a=("The s , the s , the s", "It was the"), text_b=None,
                         label=np.array([0, 1], np.int32), index=("0", "1"), label_names=None)

    def ids(**options):
        preprocessor = kbert.BertPreprocessor(str(vocab), **options)
        tokenized = pipeline.tokenize(rows, preprocessor)
        return pipeline._compiled(preprocessor, False), tokenized.features["token_ids"].to_list()

    short, short_ids = ids(max_seq_length=5)
    again, again_ids = ids(max_seq_length=5)
    long, long_ids = ids(max_seq_length=16)
    cased, cased_ids = ids(max_seq_length=16, do_lower_case=False)
    assert again is short and again_ids == short_ids  # traced once for both
    assert len({id(short), id(long), id(cased)}) == 3
    the, unk = TINY_VOCAB.index("the"), TINY_VOCAB.index("[UNK]")
    assert short_ids[0] == [2, the, TINY_VOCAB.index("s"), TINY_VOCAB.index(","), 3]
    assert len(long_ids[0]) == 10  # [CLS], 8 pieces, [SEP]: not cut at 5
    assert cased_ids[0][1] == unk and long_ids[0][1] == the  # "The" is not in the vocab


def test_fine_tuning_input_and_update_need_no_autograph(tmp_path, kbert_autograph_conversions):
    """Tokenizing with kbert's preprocessor, the training batches and BERT's AdamW update
    branch on Python values only, so AutoGraph converts none of kbert's functions (converting
    them took ~0.5 s of every fine-tuning run's first step)."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    rows = glue.Examples(text_a=("the s , the", "it was", "a the"),
                         text_b=("he said", "to", "of"), label=np.array([0, 1, 0], np.int32),
                         index=("0", "1", "2"), label_names=None)
    tokenized = pipeline.tokenize(rows, kbert.BertPreprocessor(str(vocab), max_seq_length=8))
    epochs, steps = pipeline.training_epochs(tokenized, rows.label, 2, seed=1)
    assert sum(int(batch["token_ids"].shape[0]) for batch, _ in epochs(0).take(steps)) == 3

    weight = keras.Variable(np.ones([3, 2], np.float32))
    optimizer = kbert.create_optimizer(0.1, num_train_steps=2, num_warmup_steps=0)
    optimizer.build([weight])
    tf.function(lambda: optimizer.apply_gradients([(tf.ones([3, 2]), weight)]))()
    assert not np.array_equal(weight.numpy(), np.ones([3, 2]))  # the update ran
    assert kbert_autograph_conversions == []
