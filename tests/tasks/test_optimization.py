import json

import keras
import numpy as np
import pytest

from kbert.models.classifier import BertClassifier
from kbert.tasks import optimization


def test_schedule_warms_up_then_decays_as_google():
    schedule = optimization.WarmupLinearDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    rates = np.array([float(schedule(step)) for step in range(0, 121)])
    np.testing.assert_allclose(rates[:10], 1e-3 * np.arange(10) / 10, rtol=1e-6)
    # After warm-up: Google's polynomial_decay (power 1) counted from step 0, here Keras' own.
    decay = keras.optimizers.schedules.PolynomialDecay(1e-3, 100, end_learning_rate=0.0)
    np.testing.assert_allclose(rates[10:], [float(decay(s)) for s in range(10, 121)],
                               rtol=1e-5, atol=1e-12)
    assert rates[100:].max() == 0.0 and rates.max() == pytest.approx(0.9e-3, rel=1e-6)
    no_warmup = optimization.WarmupLinearDecay(2.0, num_train_steps=4)
    assert [float(no_warmup(s)) for s in range(5)] == [2.0, 1.5, 1.0, 0.5, 0.0]


def test_schedule_config_and_validation():
    schedule = optimization.WarmupLinearDecay(5e-5, 1000, 100)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(schedule)))
    clone = keras.saving.deserialize_keras_object(config)
    assert isinstance(clone, optimization.WarmupLinearDecay)
    assert clone.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="num_warmup_steps"):
        optimization.WarmupLinearDecay(1e-3, 10, 11)


def test_weight_decay_skips_layer_norm_and_biases(tiny_encoder):
    model = BertClassifier(tiny_encoder, 2)
    optimizer = optimization.create_optimizer(0.1, num_train_steps=10, num_warmup_steps=0,
                                              weight_decay=0.5)
    before = {v.path: v.numpy().copy() for v in model.trainable_variables}
    # Zero gradients: Adam moves nothing, so every change is weight decay (1 - lr * decay).
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v)
                               for v in model.trainable_variables])
    decayed, kept = [], []
    for variable in model.trainable_variables:
        ratio = variable.numpy() / np.where(before[variable.path] == 0, 1, before[variable.path])
        if np.allclose(variable.numpy(), before[variable.path]):
            kept.append(variable.path)
        else:
            np.testing.assert_allclose(ratio, 1 - 0.1 * 0.5, rtol=1e-5)
            decayed.append(variable.path)
    assert kept and decayed
    assert all(p.endswith(("/gamma", "/beta", "/bias")) for p in kept)
    assert not any(p.endswith(("/gamma", "/beta", "/bias")) for p in decayed)
    assert "logits/kernel" in decayed and "embeddings/token_embedding/embeddings" in decayed


def test_optimizer_settings_and_serialization():
    optimizer = optimization.create_optimizer(2e-5, 100, 10)
    config = optimizer.get_config()
    assert config["epsilon"] == 1e-6 and config["global_clipnorm"] == 1.0
    assert config["weight_decay"] == 0.01
    clone = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(optimizer))))
    assert clone.weight_decay_exclusions == optimization.NO_WEIGHT_DECAY
    assert isinstance(clone._learning_rate, optimization.WarmupLinearDecay)
