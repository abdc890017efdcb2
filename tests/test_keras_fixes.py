"""kbert.keras_fixes: Keras' saving computes its skip sets once per session, not per layer."""

import keras
import numpy as np
from keras.src.layers import layer as layer_lib
from keras.src.saving import saving_lib

import kbert
from tests.conftest import TINY_CONFIG


def test_skip_sets_are_computed_once_per_session_and_are_keras_own(monkeypatch):
    keras.backend.clear_session(free_memory=False)
    built = []
    init = layer_lib.Layer.__init__

    def counting_init(self, *args, **kwargs):
        built.append(type(self))
        init(self, *args, **kwargs)

    monkeypatch.setattr(layer_lib.Layer, "__init__", counting_init)
    first = saving_lib.get_attr_skipset("Layer")
    assert saving_lib.get_attr_skipset("Layer") is first
    assert built == [layer_lib.Layer]  # Keras' reference layer, built once
    assert first == saving_lib.get_attr_skipset.__wrapped__("Layer")  # Keras' own answer
    keras.backend.clear_session(free_memory=False)
    assert saving_lib.get_attr_skipset("Layer") is not first  # a new session computes anew


def test_a_saved_model_loads_equal(tmp_path):
    keras.utils.set_random_seed(0)
    model = kbert.BertClassifier(kbert.BertEncoder(**kbert.BertConfig(
        **TINY_CONFIG).encoder_kwargs()), 3)
    inputs = {"token_ids": np.array([[2, 5, 6, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
              "padding_mask": np.ones((1, 4), "int32")}
    model.save(tmp_path / "model.keras")
    model.save_weights(tmp_path / "model.weights.h5")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(loaded(inputs), model(inputs))
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    loaded.load_weights(tmp_path / "model.weights.h5")
    np.testing.assert_array_equal(loaded(inputs), model(inputs))
