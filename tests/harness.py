"""One function per contract every kbert layer and model must keep."""

import json

import keras
import numpy as np
import tensorflow as tf


def _flat(outputs):
    return [np.asarray(t) for t in tf.nest.flatten(outputs)]


def assert_config_roundtrip(obj):
    """`from_config(get_config())` rebuilds an object with a JSON-equal config."""
    config = obj.get_config()
    clone = type(obj).from_config(json.loads(json.dumps(config)))
    assert json.dumps(clone.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)
    return clone


def assert_saves_and_loads(model, inputs, path):
    """`.keras` save, `load_model` (safe_mode on), same class, same outputs, no Lambda layer."""
    expected = _flat(model(inputs, training=False))
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is type(model)
    lambdas = [x for x in loaded._flatten_layers() if isinstance(x, keras.layers.Lambda)]
    assert not lambdas
    for got, want in zip(_flat(loaded(inputs, training=False)), expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)
    return loaded


def assert_trains_one_step(model, inputs, targets, loss):
    """One `fit` step runs and changes every trainable weight that the loss reaches."""
    before = [w.numpy().copy() for w in model.trainable_weights]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
    # Built before `fit`, as BertTask.fit does: a plain keras.Model's first fit outside a
    # strategy creates the optimizer's variables inside the traced step, and traces it twice
    # (~3 of its ~5 s on the AMD AVX-512 VM, 2026-11-29).
    model.optimizer.build(model.trainable_variables)
    history = model.fit(inputs, targets, epochs=1, batch_size=len(next(iter(inputs.values()))),
                        verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [w.numpy() for w in model.trainable_weights]
    changed = [not np.array_equal(b, a) for b, a in zip(before, after, strict=True)]
    assert sum(changed) > len(changed) // 2


def assert_variable_length(model, make_inputs, lengths):
    """Runs at several sequence lengths; outputs keep [batch, seq, ...] shapes."""
    for length in lengths:
        outputs = model(make_inputs(length), training=False)
        assert outputs["sequence_output"].shape[1] == length
