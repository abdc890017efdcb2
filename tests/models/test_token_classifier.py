import keras
import numpy as np
import pytest

import kbert
from kbert.layers.crf import CRF
from kbert.models.token_classifier import BertTokenClassifier
from tests import harness
from tests.models.test_encoder import inputs

# First piece of each word: positions 1, 2 and 4 of row 0; 1 and 3 of row 1 (5 real tokens).
WEIGHTS = np.array([[0, 1, 1, 0, 1, 0, 0], [0, 1, 0, 1, 0, 0, 0]], "float32")
LABELS = np.array([[0, 2, 1, 0, 3, 0, 0], [0, 1, 0, 2, 0, 0, 0]], "int32")


@pytest.mark.parametrize("use_crf", [False, True])
def test_head_on_sequence_output(tiny_encoder, use_crf):
    model = BertTokenClassifier(tiny_encoder, 4, use_crf=use_crf)
    outputs = model(inputs(), training=False)
    assert outputs.shape == (2, 7, 4) and outputs.dtype == "float32"
    sequence = tiny_encoder(inputs(), training=False)["sequence_output"]
    expected = sequence @ model.output_dense.kernel + model.output_dense.bias
    np.testing.assert_allclose(outputs, expected, atol=1e-6)
    assert isinstance(model.crf, CRF) == use_crf
    assert not model.encoder.pooler.trainable


def test_config_roundtrip(tiny_encoder):
    clone = harness.assert_config_roundtrip(
        BertTokenClassifier(tiny_encoder, 5, use_crf=True, dropout=0.2))
    assert (clone.num_labels, clone.use_crf, clone.dropout) == (5, True, 0.2)
    assert clone.bert_config == tiny_encoder.bert_config


@pytest.mark.parametrize("use_crf", [False, True])
def test_trains_one_step_saves_and_loads(tiny_encoder, tmp_path, use_crf):
    model = BertTokenClassifier(tiny_encoder, 4, use_crf=use_crf)
    before = [w.numpy().copy() for w in model.trainable_weights]
    model.compile(optimizer=kbert_optimizer())
    history = model.fit(inputs(), LABELS, sample_weight=WEIGHTS, batch_size=2, epochs=1,
                        verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = [not np.array_equal(b, a.numpy())
               for b, a in zip(before, model.trainable_weights, strict=True)]
    assert sum(changed) > len(changed) // 2
    if use_crf:
        assert np.any(model.crf.transitions.numpy() != 0)
    loaded = harness.assert_saves_and_loads(model, inputs(), str(tmp_path / "tagger.keras"))
    assert (loaded.num_labels, loaded.use_crf) == (4, use_crf)
    assert int(loaded.optimizer.iterations) == 1
    outputs = model(inputs(), training=False)
    np.testing.assert_array_equal(loaded.decode(outputs, WEIGHTS), model.decode(outputs, WEIGHTS))
    if use_crf:
        np.testing.assert_array_equal(loaded.crf.transitions.numpy(),
                                      model.crf.transitions.numpy())
        assert loaded.loss is None
    else:
        assert loaded.loss.get_config()["reduction"] == "mean_with_sample_weight"
    np.testing.assert_allclose(loaded.compute_loss(inputs(), LABELS, outputs, WEIGHTS),
                               model.compute_loss(inputs(), LABELS, outputs, WEIGHTS), rtol=1e-6)


def test_losses_are_masked_means_over_words(tiny_encoder):
    model = BertTokenClassifier(tiny_encoder, 4)
    model.compile()
    logits = model(inputs(), training=False)
    log_probs = np.asarray(keras.ops.log_softmax(logits, axis=-1), np.float64)
    picked = np.take_along_axis(log_probs, LABELS[..., None], -1)[..., 0]
    expected = -(picked * WEIGHTS).sum() / WEIGHTS.sum()
    got = model.compute_loss(inputs(), LABELS, logits, WEIGHTS)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # Changing a label at a weight-0 position changes nothing.
    other = LABELS.copy()
    other[0, 3] = 2
    np.testing.assert_allclose(model.compute_loss(inputs(), other, logits, WEIGHTS), got)
    crf = BertTokenClassifier(tiny_encoder, 4, use_crf=True)
    crf.compile()
    # Zero transitions: the CRF likelihood factorises into the per-word softmax.
    np.testing.assert_allclose(crf.compute_loss(inputs(), LABELS, logits, WEIGHTS), expected,
                               rtol=1e-5)
    with pytest.raises(ValueError, match="compile it with loss='auto' or None"):
        crf.compile(loss="mse")


def test_decode(tiny_encoder):
    logits = np.random.default_rng(0).normal(size=(2, 7, 4)).astype("float32")
    model = BertTokenClassifier(tiny_encoder, 4)
    np.testing.assert_array_equal(model.decode(logits, WEIGHTS), logits.argmax(-1))
    crf = BertTokenClassifier(tiny_encoder, 4, use_crf=True)
    crf(inputs())
    # A large penalty for label 0 -> 1 forbids that transition in the decoded words.
    transitions = np.zeros((4, 4), "float32")
    transitions[0, 1] = -100
    crf.crf.transitions.assign(transitions)
    logits[0, 1] = [5, 0, 0, 0]
    logits[0, 2] = [0, 5, 4, 0]
    logits[0, 4] = [0, 0, 0, 5]
    decoded = np.asarray(crf.decode(logits, WEIGHTS))
    assert decoded[0, [1, 2, 4]].tolist() == [0, 2, 3]


def test_from_google_checkpoint(tiny_encoder, tmp_path):
    kbert.save_google_checkpoint(tiny_encoder, str(tmp_path / "release" / "bert_model.ckpt"))
    model = BertTokenClassifier.from_google_checkpoint(str(tmp_path / "release"), 5,
                                                       use_crf=True)
    assert model.num_labels == 5 and model.use_crf
    np.testing.assert_allclose(model.encoder(inputs(), training=False)["sequence_output"],
                               tiny_encoder(inputs(), training=False)["sequence_output"],
                               atol=1e-6)
    with pytest.raises(ValueError, match="num_labels must be >= 1"):
        BertTokenClassifier(tiny_encoder, 0)


def kbert_optimizer():
    from kbert.tasks import optimization

    return optimization.create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=0)
