"""CRF against brute force: every label path enumerated on small random cases."""

import itertools

import keras
import numpy as np
import pytest

from kbert.layers.crf import CRF
from tests import harness


def random_crf(rng, num_labels):
    crf = CRF(num_labels)
    crf.build()
    crf.transitions.assign(rng.normal(size=(num_labels, num_labels)).astype("float32"))
    crf.start_transitions.assign(rng.normal(size=num_labels).astype("float32"))
    crf.end_transitions.assign(rng.normal(size=num_labels).astype("float32"))
    return crf


def brute_force_score(crf, potentials, path, positions):
    """Score of `path` (labels at `positions`), from the definition in the CRF docstring."""
    transitions, start, end = (np.asarray(w, np.float64) for w in (
        crf.transitions, crf.start_transitions, crf.end_transitions))
    if not len(path):
        return 0.0  # the one (empty) path of a row without selected positions
    score = start[path[0]] + end[path[-1]]
    score += sum(potentials[t, y] for t, y in zip(positions, path, strict=True))
    score += sum(transitions[a, b] for a, b in itertools.pairwise(path))
    return score


def random_case(rng, batch=3, seq=5, num_labels=3):
    potentials = rng.normal(size=(batch, seq, num_labels)).astype("float32") * 2
    mask = (rng.random((batch, seq)) < 0.7).astype("int32")
    mask[0] = 1  # one full row
    mask[-1, : seq // 2] = 0  # one starting late
    return potentials, mask


@pytest.mark.parametrize("seed", range(4))
def test_decode_is_the_brute_force_best_path(seed):
    rng = np.random.default_rng(seed)
    num_labels = 2 + seed % 3
    crf = random_crf(rng, num_labels)
    potentials, mask = random_case(rng, batch=4, seq=6, num_labels=num_labels)
    decoded = np.asarray(crf.decode(potentials, mask))
    assert decoded.shape == mask.shape and decoded.dtype == np.int32
    for row in range(len(mask)):
        positions = np.flatnonzero(mask[row])
        if not len(positions):
            continue
        paths = itertools.product(range(num_labels), repeat=len(positions))
        best = max(paths, key=lambda p: brute_force_score(crf, potentials[row], p, positions))
        assert tuple(decoded[row, positions]) == best


@pytest.mark.parametrize("seed", range(4))
def test_log_likelihood_is_the_brute_force_log_softmax_over_paths(seed):
    rng = np.random.default_rng(10 + seed)
    num_labels = 2 + seed % 2
    crf = random_crf(rng, num_labels)
    potentials, mask = random_case(rng, batch=3, seq=5, num_labels=num_labels)
    labels = rng.integers(0, num_labels, size=mask.shape)
    log_z = np.asarray(crf.log_partition(potentials, mask))
    scores = np.asarray(crf.path_score(potentials, labels, mask))
    likelihood = np.asarray(crf.log_likelihood(potentials, labels, mask))
    for row in range(len(mask)):
        positions = np.flatnonzero(mask[row])
        all_scores = [brute_force_score(crf, potentials[row], p, positions)
                      for p in itertools.product(range(num_labels), repeat=len(positions))]
        expected_log_z = np.logaddexp.reduce(all_scores)
        gold = brute_force_score(crf, potentials[row], labels[row, positions], positions)
        np.testing.assert_allclose(log_z[row], expected_log_z, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(scores[row], gold, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(likelihood[row], gold - expected_log_z, rtol=1e-5, atol=1e-5)


def test_unselected_positions_do_not_matter_and_empty_rows_are_zero():
    rng = np.random.default_rng(3)
    crf = random_crf(rng, 3)
    potentials, mask = random_case(rng)
    labels = rng.integers(0, 3, size=mask.shape)
    changed = np.where(mask[..., None] == 1, potentials, rng.normal(size=potentials.shape) * 9)
    other_labels = np.where(mask == 1, labels, (labels + 1) % 3)
    np.testing.assert_allclose(crf.log_likelihood(changed.astype("float32"), other_labels, mask),
                               crf.log_likelihood(potentials, labels, mask), atol=1e-5)
    decoded, again = crf.decode(potentials, mask), crf.decode(changed.astype("float32"), mask)
    np.testing.assert_array_equal(np.where(mask == 1, decoded, 0), np.where(mask == 1, again, 0))
    empty = np.zeros_like(mask)
    np.testing.assert_array_equal(crf.log_likelihood(potentials, labels, empty), [0, 0, 0])


def test_zero_transitions_factorise_into_per_position_softmax():
    rng = np.random.default_rng(4)
    crf = CRF(4)
    crf.build()
    potentials, mask = random_case(rng, num_labels=4)
    labels = rng.integers(0, 4, size=mask.shape)
    log_softmax = potentials - np.log(np.exp(potentials).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_softmax, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(crf.log_likelihood(potentials, labels, mask),
                               (picked * mask).sum(1), atol=1e-5)
    decoded = np.asarray(crf.decode(potentials, mask))
    np.testing.assert_array_equal(decoded[mask == 1], potentials.argmax(-1)[mask == 1])


def test_gradients_reach_the_transitions_and_config_roundtrip():
    import tensorflow as tf

    rng = np.random.default_rng(5)
    crf = random_crf(rng, 3)
    potentials, mask = random_case(rng)
    labels = rng.integers(0, 3, size=mask.shape)
    with tf.GradientTape() as tape:
        loss = -keras.ops.sum(crf.log_likelihood(potentials, labels, mask))
    grads = tape.gradient(loss, crf.trainable_variables)
    assert all(g is not None and np.any(np.asarray(g) != 0) for g in grads)
    clone = harness.assert_config_roundtrip(CRF(5, name="crf"))
    assert clone.num_labels == 5
    with pytest.raises(ValueError, match="num_labels must be >= 1"):
        CRF(0)


def test_traced_with_unknown_shapes_equals_eager():
    import tensorflow as tf

    rng = np.random.default_rng(6)
    crf = random_crf(rng, 3)
    potentials, mask = random_case(rng, batch=3, seq=6)
    labels = rng.integers(0, 3, size=mask.shape).astype("int32")
    specs = [tf.TensorSpec([None, None, 3]), tf.TensorSpec([None, None], tf.int32),
             tf.TensorSpec([None, None], tf.int32)]
    likelihood = tf.function(crf.log_likelihood, input_signature=specs)
    decode = tf.function(crf.decode, input_signature=[specs[0], specs[2]])
    np.testing.assert_allclose(likelihood(potentials, labels, mask),
                               crf.log_likelihood(potentials, labels, mask), atol=1e-6)
    np.testing.assert_array_equal(decode(potentials, mask), crf.decode(potentials, mask))
