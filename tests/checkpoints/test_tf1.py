"""Strict loading, save-back and clear errors for Google TF1 checkpoints."""

import os

import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert import checkpoints
from tests.conftest import TINY_CONFIG
from tests.models.test_pretrainer import pretrainer_inputs


@pytest.fixture
def release_dir(tiny_encoder, tmp_path):
    """A release directory written from a random tiny pretrainer."""
    model = kbert.BertPretrainer(tiny_encoder)
    model(pretrainer_inputs())
    checkpoints.save_google_checkpoint(model, str(tmp_path / "release" / "bert_model.ckpt"))
    return str(tmp_path / "release")


def tensors_of(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_load_save_load_is_bit_identical(release_dir, tmp_path):
    model = kbert.BertPretrainer.from_google_checkpoint(release_dir)
    checkpoints.save_google_checkpoint(model, str(tmp_path / "again" / "bert_model.ckpt"))
    first = tensors_of(os.path.join(release_dir, "bert_model.ckpt"))
    second = tensors_of(str(tmp_path / "again" / "bert_model.ckpt"))
    assert sorted(first) == sorted(second)
    assert len(first) == 5 + 2 + 16 * 2 + 7  # embeddings, pooler, layers, heads
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_accepts_directory_prefix_and_index_paths(release_dir):
    expected = kbert.BertEncoder.from_google_checkpoint(release_dir).get_weights()
    for path in (os.path.join(release_dir, "bert_model.ckpt"),
                 os.path.join(release_dir, "bert_model.ckpt.index")):
        got = kbert.BertEncoder.from_google_checkpoint(path).get_weights()
        for a, b in zip(expected, got, strict=True):
            np.testing.assert_array_equal(a, b)


def test_training_state_and_classifier_heads_are_skipped(release_dir, tmp_path):
    tensors = tensors_of(os.path.join(release_dir, "bert_model.ckpt"))
    extra = {f"{n}/adam_m": v for n, v in tensors.items()}
    extra.update({f"{n}/adam_v": v for n, v in tensors.items()})
    extra.update(global_step=np.int64(7), output_weights=np.ones((3, 12), "float32"),
                 output_bias=np.zeros(3, "float32"))
    prefix = str(tmp_path / "trained" / "model.ckpt-7")
    checkpoints.write_tf1_checkpoint(prefix, {**tensors, **extra})
    config = os.path.join(release_dir, "bert_config.json")
    model = kbert.BertPretrainer.from_google_checkpoint(str(tmp_path / "trained"), config=config)
    np.testing.assert_array_equal(model.encoder.token_embedding.embeddings.numpy(),
                                  tensors["bert/embeddings/word_embeddings"])


def test_config_checkpoint_disagreement_lists_every_problem(release_dir):
    config = kbert.BertConfig(**dict(TINY_CONFIG, vocab_size=40, num_hidden_layers=1))
    with pytest.raises(ValueError) as error:
        kbert.BertEncoder.from_google_checkpoint(release_dir, config=config)
    message = str(error.value)
    assert "bert_model.ckpt: checkpoint does not match the model" in message
    assert ("bert/embeddings/word_embeddings: checkpoint [31, 12], model expects [40, 12]"
            in message)
    assert "unexpected in the checkpoint (16)" in message  # layer_1 has 16 tensors
    assert "bert/encoder/layer_1/output/dense/kernel [20, 12]" in message


def test_missing_tensors_are_listed(release_dir, tmp_path):
    tensors = tensors_of(os.path.join(release_dir, "bert_model.ckpt"))
    del tensors["bert/pooler/dense/kernel"], tensors["cls/predictions/output_bias"]
    prefix = str(tmp_path / "partial" / "bert_model.ckpt")
    checkpoints.write_tf1_checkpoint(prefix, tensors)
    config = os.path.join(release_dir, "bert_config.json")
    with pytest.raises(ValueError, match=r"missing from the checkpoint \(2\)") as error:
        kbert.BertPretrainer.from_google_checkpoint(prefix, config=config)
    assert "bert/pooler/dense/kernel (for pooler/kernel, shape [12, 12])" in str(error.value)
    # An encoder does not need the MLM bias, so only the pooler is missing for it.
    with pytest.raises(ValueError, match=r"missing from the checkpoint \(1\)"):
        kbert.BertEncoder.from_google_checkpoint(prefix, config=config)


def test_missing_files(release_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.index: checkpoint index not found"):
        kbert.BertEncoder.from_google_checkpoint(str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError, match="expected one checkpoint"):
        kbert.BertEncoder.from_google_checkpoint(str(tmp_path))
    os.remove(os.path.join(release_dir, "bert_config.json"))
    with pytest.raises(FileNotFoundError, match="bert_config.json: not found; pass `config=`"):
        kbert.BertEncoder.from_google_checkpoint(release_dir)


def test_missing_data_file(release_dir):
    os.remove(os.path.join(release_dir, "bert_model.ckpt.data-00000-of-00001"))
    with pytest.raises(FileNotFoundError, match=r"bert_model.ckpt.data-\*: checkpoint data file"):
        kbert.BertEncoder.from_google_checkpoint(release_dir)


def test_truncated_checkpoint(release_dir):
    data = os.path.join(release_dir, "bert_model.ckpt.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    with pytest.raises(ValueError, match="truncated or corrupt"):
        kbert.BertEncoder.from_google_checkpoint(release_dir)


def test_corrupt_index(release_dir):
    with open(os.path.join(release_dir, "bert_model.ckpt.index"), "wb") as f:
        f.write(b"not a checkpoint index")
    with pytest.raises(ValueError, match="bert_model.ckpt: not a readable TF checkpoint"):
        kbert.BertEncoder.from_google_checkpoint(release_dir)


def test_failed_save_keeps_earlier_checkpoint(release_dir, tiny_encoder, monkeypatch):
    prefix = os.path.join(release_dir, "bert_model.ckpt")
    before = tensors_of(prefix)

    def save_half_then_fail(prefix, **kwargs):
        with open(prefix + ".index", "wb") as f:
            f.write(b"half-written")
        raise OSError("disk full")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", save_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        checkpoints.save_google_checkpoint(tiny_encoder, prefix)
    after = tensors_of(prefix)
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])
    assert not [n for n in os.listdir(release_dir) if n.startswith(".")]


def test_save_rejects_weights_outside_the_table(tiny_encoder, tmp_path):
    tiny_encoder.add_weight(shape=(1,), name="stray")
    with pytest.raises(ValueError, match="variables not in the name table: .*stray"):
        checkpoints.save_google_checkpoint(tiny_encoder, str(tmp_path / "bert_model.ckpt"))
