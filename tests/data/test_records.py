import os

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kbert.data import features
from kbert.data import records

SCHEMA = features.PRETRAINING_FEATURES


def proto_example(arrays, row):
    """The same example built the slow way, with tf.train protos (Google's writer)."""
    feature = {}
    for name, spec in SCHEMA.items():
        values = np.asarray(arrays[name][row]).reshape(-1).tolist()
        if spec.dtype == "float32":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def random_arrays(rng, batch, seq=7, predictions=3, top=30522):
    return {
        "input_ids": rng.integers(0, top, (batch, seq)),
        "input_mask": rng.integers(0, 2, (batch, seq)),
        "segment_ids": rng.integers(0, 2, (batch, seq)),
        "masked_lm_positions": rng.integers(0, seq, (batch, predictions)),
        "masked_lm_ids": rng.integers(0, top, (batch, predictions)),
        "masked_lm_weights": rng.random((batch, predictions)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)),
    }


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), batch=st.integers(1, 5),
       top=st.sampled_from([1, 127, 128, 16384, 2**21 + 5, 2**40, 2**62]))
def test_encode_examples_matches_protobuf(seed, batch, top):
    arrays = random_arrays(np.random.default_rng(seed), batch, top=top)
    encoded = records.encode_examples(arrays, SCHEMA)
    assert len(encoded) == batch
    for row, data in enumerate(encoded):
        assert tf.train.Example.FromString(data) == proto_example(arrays, row)


def test_encode_examples_single_feature_bytes_equal_protobuf():
    arrays = {"x": np.array([[0, 1, 127, 128, 300, 2**21, 2**35]])}
    schema = {"x": features.FeatureSpec("int64", 7)}
    expected = tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(int64_list=tf.train.Int64List(value=arrays["x"][0].tolist()))}))
    assert records.encode_examples(arrays, schema) == [expected.SerializeToString()]


def test_encode_examples_rejects_negative_ids():
    arrays = random_arrays(np.random.default_rng(0), 2)
    arrays["input_ids"][0, 0] = -1
    with pytest.raises(ValueError, match="non-negative"):
        records.encode_examples(arrays, SCHEMA)


def test_encoded_examples_parse_with_the_schema():
    arrays = random_arrays(np.random.default_rng(1), 4)
    encoded = records.encode_examples(arrays, SCHEMA)
    parsed = features.parse_pretraining_examples(tf.constant(encoded), 7, 3)
    for name in SCHEMA:
        np.testing.assert_array_equal(parsed[name].numpy(), arrays[name])


def test_shard_paths():
    assert records.shard_paths("a.tf") == ["a.tf"]
    assert records.shard_paths("a.tf,b.tf") == ["a.tf", "b.tf"]
    assert records.shard_paths("out/t.tf", num_shards=2) == [
        "out/t.tf-00000-of-00002", "out/t.tf-00001-of-00002"]
    assert records.shard_paths("out/t.tf@3")[2] == "out/t.tf-00002-of-00003"
    assert records.meta_path("out/t.tf@3") == "out/t.tf_meta.json"
    assert records.meta_path("a.tf,b.tf") == "a.tf_meta.json"
    with pytest.raises(ValueError, match="lists 2 files"):
        records.shard_paths("a.tf,b.tf", num_shards=3)
    with pytest.raises(ValueError, match="@3"):
        records.shard_paths("t.tf@3", num_shards=2)


def test_record_writer_is_atomic(tmp_path):
    path = tmp_path / "x.tfrecord"
    with pytest.raises(RuntimeError), records.record_writer(str(path)) as writer:
        writer.write(b"partial")
        raise RuntimeError("interrupted")
    assert os.listdir(tmp_path) == []
    with records.record_writer(str(path)) as writer:
        writer.write(b"done")
    assert os.listdir(tmp_path) == ["x.tfrecord"]
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == [b"done"]
