import numpy as np
import pytest
import tensorflow as tf

from kbert.data import features
from kbert.data.pretraining import instances
from kbert.data.pretraining import record_input
from kbert.data.pretraining import writer


@pytest.fixture(scope="module")
def shards(wiki_sample, vocab_file, tmp_path_factory):
    """(file pattern, records per file) of 4 pretraining record files."""
    out = tmp_path_factory.mktemp("shards")
    counts = writer.create_pretraining_data(
        wiki_sample, str(out / "t.tfrecord@4"), vocab_file, input_format="wikiextractor",
        progress=False, config=instances.PretrainingDataConfig(
            dupe_factor=2, max_seq_length=64, max_predictions_per_seq=10))
    return str(out / "t.tfrecord-*"), counts


def test_pretraining_dataset_feeds_the_pretrainer(shards):
    pattern, counts = shards
    ds = record_input.pretraining_dataset(pattern, batch_size=8, shuffle=False,
                                               repeat=False)
    inputs, labels, weights = next(iter(ds))
    assert {k: (v.dtype, tuple(v.shape)) for k, v in inputs.items()} == {
        "token_ids": (tf.int32, (8, 64)), "segment_ids": (tf.int32, (8, 64)),
        "padding_mask": (tf.int32, (8, 64)), "mask_positions": (tf.int32, (8, 10))}
    assert labels["nsp_logits"].shape == (8,) and weights["mlm_logits"].dtype == tf.float32
    first = next(iter(tf.data.TFRecordDataset(sorted(counts)[:1]).batch(8)))
    parsed = features.parse_pretraining_examples(first, 64, 10)
    np.testing.assert_array_equal(inputs["token_ids"], parsed["input_ids"])
    np.testing.assert_array_equal(labels["mlm_logits"], parsed["masked_lm_ids"])
    total = sum(1 for _ in record_input.pretraining_dataset(
        pattern, batch_size=1, shuffle=True, repeat=False, seed=0))
    assert total == sum(counts.values())


def test_a_seeded_dataset_reads_the_same_order_every_time(shards):
    pattern, _ = shards

    def order(seed):
        ds = record_input.pretraining_dataset(
            pattern, batch_size=1, repeat=False, seed=seed,
            shuffle_buffer=4)  # a small buffer keeps the interleave order visible
        return [inputs["token_ids"].numpy().tobytes() for inputs, _, _ in ds]

    first = order(seed=3)
    assert all(order(seed=3) == first for _ in range(3))
    assert order(seed=4) != first
