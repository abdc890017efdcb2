"""`shared_reads.one_read_per_weight`: under mixed precision, a traced step that calls the model
once per batch part reads (and so casts) each trainable weight once, with the same numbers."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.models import shared_reads
from tests.conftest import TINY_CONFIG


@pytest.fixture
def mixed_bfloat16():
    keras.config.set_dtype_policy("mixed_bfloat16")
    yield
    keras.config.set_dtype_policy("float32")


@pytest.mark.parametrize("shared", [True, False])
def test_two_calls_in_a_step_share_one_read_of_a_trainable_float_weight(shared):
    weight = keras.Variable(np.ones((2, 2), "float32"), trainable=True)
    frozen = keras.Variable(np.ones((2, 2), "float32"), trainable=False)
    seed = keras.Variable(np.array([1, 2], "int64"), trainable=False)

    @tf.function(autograph=False)
    def part(x):
        with keras.src.backend.AutocastScope("bfloat16"):
            return tf.matmul(x, weight.value + frozen.value), seed.value

    @tf.function(autograph=False)
    def step(x):
        with shared_reads.one_read_per_weight() if shared else contextlib.nullcontext():
            return [part(x)[0] for _ in range(2)]

    graph = step.get_concrete_function(tf.TensorSpec([3, 2], tf.bfloat16)).graph
    # The part's trace made inside the step (the same signature: tf.function's cache).
    inner = part.get_concrete_function(tf.TensorSpec([3, 2], tf.bfloat16)).graph
    step_reads = [op for op in graph.get_operations() if op.type == "ReadVariableOp"]
    part_reads = sorted(op.outputs[0].dtype.name for op in inner.get_operations()
                        if op.type == "ReadVariableOp")
    if shared:  # the trainable weight once, in the step; the others in the part, as Keras does
        assert [op.outputs[0].dtype.name for op in step_reads] == ["float32"]
        assert part_reads == ["float32", "int64"]
    else:
        assert step_reads == []
        assert part_reads == ["float32", "float32", "int64"]
    outputs = step(tf.ones([3, 2], tf.bfloat16))
    np.testing.assert_array_equal(outputs[0].numpy().astype("float32"), np.full((3, 2), 4.0))


def test_eagerly_nothing_is_shared():
    with shared_reads.one_read_per_weight():
        assert getattr(shared_reads._state, "reads", None) is None


def _one_fit_step(parts):
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(**kbert.BertConfig(**TINY_CONFIG).encoder_kwargs())
    model = kbert.BertClassifier(encoder, 3, dropout=0.1)
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.batch_parts = parts
    start = [v.numpy() for v in model.trainable_variables]
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(4, 31, (6, 9)).astype("int32"),
         "segment_ids": np.zeros((6, 9), "int32"), "padding_mask": np.ones((6, 9), "int32")}
    history = model.fit(x, rng.integers(0, 3, 6), batch_size=6, verbose=0, shuffle=False)
    return history.history["loss"], start, [v.numpy() for v in model.trainable_variables]


def test_a_mixed_bfloat16_step_in_parts_is_the_same_with_shared_reads(mixed_bfloat16,
                                                                       monkeypatch):
    """Dropout on (each part draws its own masks), bfloat16 compute: the loss and every
    weight after an SGD step equal those of the step with a read per part, to the bit."""
    loss, start, weights = _one_fit_step(2)
    monkeypatch.setattr(shared_reads, "one_read_per_weight", contextlib.nullcontext)
    unshared_loss, _, unshared_weights = _one_fit_step(2)
    assert loss == unshared_loss
    for a, b in zip(weights, unshared_weights, strict=True):
        np.testing.assert_array_equal(a, b)
    _, _, whole = _one_fit_step(1)  # every weight the unsplit step moves moves, and only those
    assert [bool(np.any(a != b)) for a, b in zip(weights, start, strict=True)] == [
        bool(np.any(a != b)) for a, b in zip(whole, start, strict=True)]
