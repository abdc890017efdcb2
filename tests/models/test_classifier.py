import keras
import numpy as np
import pytest

import kbert
from kbert.checkpoints import tf1
from kbert.models.classifier import BertClassifier
from tests import harness
from tests.models.test_encoder import inputs


@pytest.mark.parametrize("num_classes", [3, 1])
def test_head_on_pooled_output(tiny_encoder, num_classes):
    model = BertClassifier(tiny_encoder, num_classes)
    logits = model(inputs(), training=False)
    assert logits.shape == (2, num_classes) and logits.dtype == "float32"
    pooled = tiny_encoder(inputs(), training=False)["pooled_output"]
    expected = pooled @ model.output_dense.kernel + model.output_dense.bias
    np.testing.assert_allclose(logits, expected, atol=1e-6)
    assert model.is_regression == (num_classes == 1)


def test_config_roundtrip(tiny_encoder):
    clone = harness.assert_config_roundtrip(BertClassifier(tiny_encoder, 3, dropout=0.2))
    assert clone.num_classes == 3 and clone.dropout == 0.2
    assert clone.bert_config == tiny_encoder.bert_config


def test_saves_and_loads(tiny_encoder, tmp_path):
    model = BertClassifier(tiny_encoder, 2)
    model.compile(optimizer=kbert_optimizer())
    loaded = harness.assert_saves_and_loads(model, inputs(), str(tmp_path / "classifier.keras"))
    assert loaded.num_classes == 2
    # The weight-decay exclusions are part of the saved optimizer.
    assert loaded.optimizer.weight_decay_exclusions == ("gamma", "beta", "bias")


@pytest.mark.parametrize("num_classes, targets", [
    (2, np.array([0, 1])),
    (1, np.array([0.5, 4.5], "float32")),
])
def test_trains_one_step_classification_and_regression(tiny_encoder, num_classes, targets):
    model = BertClassifier(tiny_encoder, num_classes)
    loss = "mse" if num_classes == 1 else keras.losses.SparseCategoricalCrossentropy(
        from_logits=True)
    harness.assert_trains_one_step(model, inputs(), targets, loss)


@pytest.mark.parametrize("num_classes", [2, 1])
def test_compile_defaults(tiny_encoder, num_classes):
    model = BertClassifier(tiny_encoder, num_classes)
    model.compile()
    if num_classes == 1:
        assert isinstance(model.loss, keras.losses.MeanSquaredError)
    else:
        assert model.loss.get_config()["from_logits"]
    metrics = keras.saving.serialize_keras_object(model.get_compile_config()["metrics"])
    assert ("SparseCategoricalAccuracy" in str(metrics)) == (num_classes == 2)


def test_from_google_checkpoint(tiny_encoder, tmp_path):
    prefix = str(tmp_path / "release" / "bert_model.ckpt")
    kbert.save_google_checkpoint(tiny_encoder, prefix)
    model = BertClassifier.from_google_checkpoint(str(tmp_path / "release"), 3)
    np.testing.assert_allclose(model.encoder(inputs(), training=False)["pooled_output"],
                               tiny_encoder(inputs(), training=False)["pooled_output"], atol=1e-6)
    # A run_classifier.py checkpoint also carries its head: output_weights [classes, hidden].
    reader = tf1.GoogleCheckpoint.open(prefix)
    tensors = {name: reader.tensor(name) for name in reader.shapes()}
    rng = np.random.default_rng(0)
    tensors["output_weights"] = rng.normal(size=(3, 12)).astype("float32")
    tensors["output_bias"] = rng.normal(size=(3,)).astype("float32")
    tensors["output_weights/adam_m"] = tensors["output_weights"]  # optimizer slots are skipped
    finetuned = str(tmp_path / "finetuned" / "model.ckpt-100")
    tf1.write_tf1_checkpoint(finetuned, tensors)
    config = str(tmp_path / "release" / "bert_config.json")
    model = BertClassifier.from_google_checkpoint(finetuned, 3, config=config)
    np.testing.assert_array_equal(model.output_dense.kernel.numpy(), tensors["output_weights"].T)
    np.testing.assert_array_equal(model.output_dense.bias.numpy(), tensors["output_bias"])
    with pytest.raises(ValueError,
                       match=r"output_weights: checkpoint \[3, 12\], model expects \[2, 12\]"):
        BertClassifier.from_google_checkpoint(finetuned, 2, config=config)


def test_rejects_no_classes(tiny_encoder):
    with pytest.raises(ValueError, match="num_classes must be >= 1"):
        BertClassifier(tiny_encoder, 0)


def kbert_optimizer():
    from kbert.tasks import optimization
    return optimization.create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=1)


def _packed_models(tiny_config, num_classes=3, dropout=0.0):
    """An unpacked and a packed classifier with the same weights."""
    keras.utils.set_random_seed(0)
    plain = BertClassifier(kbert.BertEncoder(**tiny_config.encoder_kwargs()), num_classes,
                           dropout=dropout)
    packed = BertClassifier(kbert.BertEncoder(**tiny_config.encoder_kwargs(), packed=True),
                            num_classes, dropout=dropout)
    packed.set_weights(plain.get_weights())
    return plain, packed


def _examples():
    from kbert.data import packing

    rng = np.random.default_rng(4)
    lengths, labels = [5, 3, 6, 4, 2], np.array([2, 0, 1, 2, 1])
    token_ids = [np.concatenate([[2], rng.integers(5, 31, n - 2), [3]]) for n in lengths]
    segment_ids = [(np.arange(n) >= n // 2).astype("int32") for n in lengths]  # pairs
    batch = packing.pack(token_ids, segment_ids, labels, max_seq_length=12)
    return token_ids, segment_ids, labels, batch


def test_packed_example_gets_the_logits_it_gets_alone(tiny_config):
    plain, packed = _packed_models(tiny_config)
    token_ids, segment_ids, labels, batch = _examples()
    assert batch.features["token_ids"].shape == (2, 11)  # rows [2, 0] and [3, 1, 4]
    logits = packed(batch.features, training=False).numpy()
    assert logits.shape == (2, 3, 3)  # an empty slot in the first row
    for row, slot in zip(*np.nonzero(batch.example_index >= 0), strict=True):
        i = batch.example_index[row, slot]
        alone = {"token_ids": token_ids[i][None].astype("int32"),
                 "segment_ids": segment_ids[i][None],
                 "padding_mask": np.ones((1, len(token_ids[i])), "int32")}
        np.testing.assert_allclose(logits[row, slot], plain(alone, training=False)[0],
                                   atol=1e-5)
    # The loss ignores empty slots: the mean over the examples, as unpacked.
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    used = batch.example_index >= 0
    unpacked = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        labels[batch.example_index[used]], logits[used])
    np.testing.assert_allclose(loss(batch.labels, logits), unpacked, rtol=1e-6)


def test_packed_encoder_sequence_output_equals_each_example_alone(tiny_config):
    keras.utils.set_random_seed(0)
    plain = kbert.BertEncoder(**tiny_config.encoder_kwargs())
    packed = kbert.BertEncoder(**tiny_config.encoder_kwargs(), packed=True)
    packed.set_weights(plain.get_weights())
    token_ids, segment_ids, _, batch = _examples()
    features = {k: v for k, v in batch.features.items() if k != "cls_positions"}
    sequence = packed(features, training=False)["sequence_output"].numpy()
    for row, slot in zip(*np.nonzero(batch.example_index >= 0), strict=True):
        i, start = batch.example_index[row, slot], batch.features["cls_positions"][row, slot]
        alone = plain({"token_ids": token_ids[i][None].astype("int32"),
                       "segment_ids": segment_ids[i][None],
                       "padding_mask": np.ones((1, len(token_ids[i])), "int32")},
                      training=False)["sequence_output"][0]
        np.testing.assert_allclose(sequence[row, start:start + len(token_ids[i])], alone,
                                   atol=1e-5)


def test_packed_classifier_trains_saves_and_loads(tiny_config, tmp_path):
    _, packed = _packed_models(tiny_config, dropout=0.1)
    _, _, _, batch = _examples()
    assert packed(batch.features, training=True).shape == (2, 3, 3)
    harness.assert_config_roundtrip(packed)
    packed.compile(optimizer=kbert_optimizer(), loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=-1), weighted_metrics=[
            keras.metrics.SparseCategoricalAccuracy()])
    history = packed.fit(batch.features, batch.labels, sample_weight=batch.sample_weight,
                         batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    harness.assert_saves_and_loads(packed, batch.features, str(tmp_path / "packed.keras"))


@pytest.mark.parametrize("num_classes", [4, 1])
def test_multi_label_head_compiles_trains_and_round_trips(tiny_encoder, tmp_path, num_classes):
    model = BertClassifier(tiny_encoder, num_classes, multi_label=True)
    assert model.multi_label and not model.is_regression  # one label is binary, not a score
    logits = model(inputs(), training=False)
    assert logits.shape == (2, num_classes) and logits.dtype == "float32"
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    assert isinstance(model.loss, keras.losses.BinaryCrossentropy)
    assert model.loss.get_config()["from_logits"]
    targets = np.array([[1, 0, 1, 1], [0, 0, 1, 0]], "float32")[:, :num_classes]
    history = model.fit(inputs(), targets, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]) and "accuracy" in history.history
    # Binary accuracy on logits: a logit > 0 is probability > 0.5, a predicted label.
    [metric] = keras.saving.serialize_keras_object(model.get_compile_config()["metrics"])
    assert metric["class_name"] == "BinaryAccuracy" and metric["config"]["threshold"] == 0.0
    loaded = harness.assert_saves_and_loads(model, inputs(), str(tmp_path / "m.keras"))
    assert loaded.multi_label and loaded.num_classes == num_classes
    assert isinstance(loaded.loss, keras.losses.BinaryCrossentropy)
    clone = harness.assert_config_roundtrip(model)
    assert clone.multi_label and clone.get_config()["multi_label"] is True


def test_multi_label_from_google_checkpoint(tiny_encoder, tmp_path):
    kbert.save_google_checkpoint(tiny_encoder, str(tmp_path / "bert_model.ckpt"))
    model = BertClassifier.from_google_checkpoint(str(tmp_path), 3, multi_label=True)
    assert model.multi_label and model.num_classes == 3
