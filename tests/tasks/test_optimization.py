import json

import keras
import numpy as np
import pytest

from kbert.config import BertConfig
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.tasks import optimization
from tests.conftest import TINY_RELEASE_CONFIG

# The update does not depend on depth: the fit tests train one transformer layer, which has
# every kind of weight (embeddings, attention, feed-forward, LayerNorm, pooler, head).
ONE_LAYER = BertConfig(**TINY_RELEASE_CONFIG)
FUSED_STEP = optimization._fused_adamw_step  # before `fused_steps` wraps it


@pytest.fixture
def fused_steps(monkeypatch):
    """The shapes `optimization._fused_adamw_step` is called with (a call per weight per
    update in eager code, per weight per trace inside a `tf.function`)."""
    shapes = []

    def recording(handles, dtype, grad, *args, **kwargs):
        shapes.append(tuple(grad.shape))
        return FUSED_STEP(handles, dtype, grad, *args, **kwargs)

    monkeypatch.setattr(optimization, "_fused_adamw_step", recording)
    return shapes


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


def _reference_adamw(weights, grads_per_step, rates, decayed, weight_decay, clipnorm):
    """BERT's AdamW in NumPy: global-norm clipping, decoupled decay, bias-corrected Adam."""
    weights = [w.astype("float64") for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, (grads, lr) in enumerate(zip(grads_per_step, rates, strict=True), start=1):
        norm = np.sqrt(sum((g.astype("float64") ** 2).sum() for g in grads))
        grads = [g * min(1.0, clipnorm / norm) for g in grads]
        for i, g in enumerate(grads):
            if decayed[i]:
                weights[i] -= weights[i] * weight_decay * lr
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            alpha = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            weights[i] -= alpha * m[i] / (np.sqrt(v[i]) + 1e-6)
    return weights


@pytest.mark.parametrize("clipnorm", [1.0, None])
def test_compiled_update_equals_reference_adamw_with_sparse_gradients(clipnorm, fused_steps):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    initial = [rng.normal(size=(50, 8)).astype("float32"),   # a word table: sparse gradients
               rng.normal(size=(8, 4)).astype("float32"),
               rng.normal(size=(4,)).astype("float32")]
    variables = [keras.Variable(initial[0], name="embeddings"),
                 keras.Variable(initial[1], name="kernel"), keras.Variable(initial[2], name="bias")]
    # Without clipping, the sparse gradient reaches the update as IndexedSlices with repeated
    # rows (Keras' own Adam gets their second moment wrong there).
    optimizer = optimization.create_optimizer(0.05, num_train_steps=8, num_warmup_steps=2,
                                              weight_decay=0.1, global_clipnorm=clipnorm)
    dense_grads, rates = [], []
    for step, tokens in enumerate((7, 3, 12, 7, 5)):   # a new token count (shape) each step
        ids = rng.integers(0, 50, size=tokens)          # repeated ids sum, as tf.gather's grad
        rows = rng.normal(size=(tokens, 8)).astype("float32")
        others = [rng.normal(scale=3.0, size=w.shape).astype("float32") for w in initial[1:]]
        table_grad = np.zeros((50, 8), "float32")
        np.add.at(table_grad, ids, rows)
        dense_grads.append([table_grad] + others)
        rates.append(float(optimization.WarmupLinearDecay(0.05, 8, 2)(step)))
        sparse = tf.IndexedSlices(tf.constant(rows), tf.constant(ids), tf.constant([50, 8]))
        optimizer.apply_gradients(zip([sparse] + others, variables, strict=True))
        if step == 0:
            traces = FUSED_STEP.experimental_get_tracing_count()
    expected = _reference_adamw(initial, dense_grads, rates, [True, True, False], 0.1,
                                clipnorm or np.inf)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)
    # Every weight, the word table included, went through the compiled step, which was
    # traced at the first update only, whatever the number of tokens in the sparse gradient.
    assert fused_steps == [(50, 8), (8, 4), (4,)] * 5
    assert FUSED_STEP.experimental_get_tracing_count() == traces


@pytest.mark.parametrize("strategy", ["default", "one_device"])
def test_compiled_update_in_fit_equals_keras_update(strategy, fused_steps):
    """The recipes train under OneDeviceStrategy: the compiled update runs there too."""
    import tensorflow as tf

    class KerasUpdate(optimization.AdamW):
        def _backend_apply_gradients(self, grads, trainable_variables):
            return keras.optimizers.AdamW._backend_apply_gradients(
                self, grads, trainable_variables)

    rng = np.random.default_rng(1)
    x = {"token_ids": rng.integers(1, 31, (4, 7)).astype("int32"),
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    data = tf.data.Dataset.from_tensors((x, rng.integers(0, 3, 4))).repeat(3)
    scope = (tf.distribute.OneDeviceStrategy("/cpu:0") if strategy == "one_device"
             else tf.distribute.get_strategy())
    weights = []
    for cls in (optimization.AdamW, KerasUpdate):
        keras.utils.set_random_seed(0)
        with scope.scope():
            model = BertClassifier(BertEncoder(**ONE_LAYER.encoder_kwargs()), 3, dropout=0.0)
            model.compile(optimizer=cls(learning_rate=1e-2, weight_decay=0.1, epsilon=1e-6,
                                        global_clipnorm=1.0),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        fused_steps.clear()
        model.fit(data, verbose=0)
        weights.append([v.numpy() for v in model.trainable_variables])
        # A call per weight each time the train function is traced (twice without a
        # strategy: Keras builds the optimizer in the first trace), none with Keras' update.
        calls_per_trace = len(model.trainable_variables) if cls is optimization.AdamW else 0
        assert len(fused_steps) in (calls_per_trace, 2 * calls_per_trace)
        assert set(fused_steps) == (
            {tuple(v.shape) for v in model.trainable_variables} if calls_per_trace else set())
    for ours, keras_own in zip(*weights, strict=True):
        np.testing.assert_allclose(ours, keras_own, rtol=1e-5, atol=1e-6)


def _reference_lazy_adamw(weights, steps, rates, decayed, weight_decay, clipnorm):
    """Lazy AdamW in NumPy: each step's sparse gradient is (ids, rows) of the first weight,
    with repeated ids summed; only those rows are decayed and updated, their moments too."""
    weights = [w.astype("float64") for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, ((ids, rows, others), lr) in enumerate(zip(steps, rates, strict=True), start=1):
        used = np.unique(ids)
        table_grad = np.zeros_like(weights[0])
        np.add.at(table_grad, ids, rows)                  # a repeated token's rows summed
        grads = [table_grad[used]] + list(others)
        norm = np.sqrt(sum((g.astype("float64") ** 2).sum() for g in grads))
        grads = [g * min(1.0, clipnorm / norm) for g in grads]
        alpha = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        for i, g in enumerate(grads):
            where = used if i == 0 else slice(None)
            if decayed[i]:
                weights[i][where] -= weights[i][where] * weight_decay * lr
            m[i][where] = 0.9 * m[i][where] + 0.1 * g
            v[i][where] = 0.999 * v[i][where] + 0.001 * g * g
            weights[i][where] -= alpha * m[i][where] / (np.sqrt(v[i][where]) + 1e-6)
    return weights


@pytest.mark.parametrize("clipnorm", [1.0, None])
def test_sparse_embedding_updates_equal_reference_lazy_adamw(clipnorm, fused_steps):
    import tensorflow as tf

    rng = np.random.default_rng(2)
    initial = [rng.normal(size=(50, 8)).astype("float32"),
               rng.normal(size=(8, 4)).astype("float32"),
               rng.normal(size=(4,)).astype("float32")]
    variables = [keras.Variable(initial[0], name="embeddings"),
                 keras.Variable(initial[1], name="kernel"), keras.Variable(initial[2], name="bias")]
    optimizer = optimization.create_optimizer(0.05, num_train_steps=8, num_warmup_steps=2,
                                              weight_decay=0.1, global_clipnorm=clipnorm,
                                              sparse_embedding_updates=True)
    steps, rates = [], []
    # Ids from 0..24 only (rows 25..49 are never used) and repeated within a step.
    for step, ids in enumerate(([3, 7, 3, 3], [7, 1], [20, 3, 20, 24, 0], [5])):
        ids = np.asarray(ids)
        rows = rng.normal(scale=2.0, size=(len(ids), 8)).astype("float32")
        others = [rng.normal(scale=3.0, size=w.shape).astype("float32") for w in initial[1:]]
        steps.append((ids, rows, others))
        rates.append(float(optimization.WarmupLinearDecay(0.05, 8, 2)(step)))
        sparse = tf.IndexedSlices(tf.constant(rows), tf.constant(ids, tf.int32),
                                  tf.constant([50, 8]))
        optimizer.apply_gradients(zip([sparse] + others, variables, strict=True))
        if step == 0:
            traces = FUSED_STEP.experimental_get_tracing_count()
    expected = _reference_lazy_adamw(initial, steps, rates, [True, True, False], 0.1,
                                     clipnorm or np.inf)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)
    # Unused rows: weights and moments untouched (dense AdamW would have decayed them).
    np.testing.assert_array_equal(variables[0].numpy()[25:], initial[0][25:])
    assert not optimizer._momentums[0].numpy()[25:].any()
    # The dense weights went through the compiled step, the table's rows did not.
    assert fused_steps == [(8, 4), (4,)] * 4
    assert FUSED_STEP.experimental_get_tracing_count() == traces


@pytest.mark.parametrize("strategy", ["default", "one_device"])
def test_sparse_embedding_updates_in_fit_differ_from_dense_only_on_unused_rows(strategy):
    """The same batch every step: the rows it uses get exactly dense AdamW's update; the
    unused word and segment rows keep their initial values, where dense AdamW decays them."""
    import tensorflow as tf

    rng = np.random.default_rng(3)
    x = {"token_ids": rng.integers(1, 20, (4, 7)).astype("int32"),   # 0 and 20..30 unused
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    data = tf.data.Dataset.from_tensors((x, rng.integers(0, 3, 4))).repeat(3)
    scope = (tf.distribute.OneDeviceStrategy("/cpu:0") if strategy == "one_device"
             else tf.distribute.get_strategy())
    runs = {}
    for sparse in (True, False):
        keras.utils.set_random_seed(0)
        with scope.scope():
            model = BertClassifier(BertEncoder(**ONE_LAYER.encoder_kwargs()), 3, dropout=0.0)
            initial = {v.path: v.numpy() for v in model.trainable_variables}
            model.compile(optimizer=optimization.create_optimizer(
                1e-2, 10, 0, weight_decay=0.1, sparse_embedding_updates=sparse),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(data, verbose=0)
        runs[sparse] = {v.path: v.numpy() for v in model.trainable_variables}
    used = {"embeddings/token_embedding/embeddings": np.isin(np.arange(31), x["token_ids"]),
            "embeddings/segment_embedding/embeddings": np.array([True, False])}
    for path, value in runs[True].items():
        if path in used:
            rows = used[path]
            np.testing.assert_allclose(value[rows], runs[False][path][rows], rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(value[~rows], initial[path][~rows])
            assert not np.allclose(runs[False][path][~rows], initial[path][~rows])
        else:
            np.testing.assert_allclose(value, runs[False][path], rtol=1e-5, atol=1e-6)


def test_sparse_embedding_updates_config_and_validation():
    optimizer = optimization.create_optimizer(2e-5, 100, 10, sparse_embedding_updates=True)
    clone = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(optimizer))))
    assert clone.sparse_embedding_updates is True
    with pytest.raises(ValueError, match="global_clipnorm only"):
        optimization.AdamW(sparse_embedding_updates=True, clipnorm=1.0)


# L = 2 transformer layers: ELECTRA's depths 0 (embeddings), 1, 2 (layers), L + 2 = 4 (head).
def _electra_factor(path, decay, head):
    if path.startswith("embeddings/"):
        return decay ** 4
    for i in range(2):
        if path.startswith(f"transformer_layer_{i}/"):
            return decay ** (4 - (i + 1))
    return head if path.startswith("logits/") else 1.0  # the pooler: the full rate


def _first_adamw_step(weight, grad, lr, weight_decay, decayed):
    """Step 1 of BERT's AdamW in NumPy (m = 0.1 g, v = 0.001 g², bias-corrected)."""
    weight = weight.astype("float64")
    if decayed:
        weight = weight - weight * weight_decay * lr
    m, v = 0.1 * grad, 0.001 * grad.astype("float64") ** 2
    alpha = lr * np.sqrt(1 - 0.999) / (1 - 0.9)
    return weight - alpha * m / (np.sqrt(v) + 1e-6)


@pytest.mark.parametrize("path", ["compiled", "sparse_rows", "keras"])
def test_learning_rate_multipliers_scale_each_variables_step(tiny_config, path, fused_steps):
    """Head × 10 and ELECTRA's layer-wise decay 0.5: each variable's first step is exactly
    BERT's AdamW step at lr × its factor, decay included (and ≈ ±lr × factor per element)."""
    import tensorflow as tf

    class KerasUpdate(optimization.AdamW):  # Keras' own update (the multi-replica fallback)
        def _backend_apply_gradients(self, grads, trainable_variables):
            return keras.optimizers.AdamW._backend_apply_gradients(
                self, grads, trainable_variables)

    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(**tiny_config.encoder_kwargs()), 3)
    multipliers = optimization.layer_multipliers(
        "embeddings", ["transformer_layer_0", "transformer_layer_1"], ["logits"],
        head_multiplier=10.0, layerwise_decay=0.5)
    lr, weight_decay = 1e-3, 0.1
    cls = KerasUpdate if path == "keras" else optimization.AdamW
    optimizer = cls(learning_rate=optimization.WarmupLinearDecay(lr, 100),
                    weight_decay=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                    global_clipnorm=None,
                    sparse_embedding_updates=path == "sparse_rows",
                    learning_rate_multipliers=multipliers)
    rng = np.random.default_rng(4)
    variables = model.trainable_variables
    before = [v.numpy() for v in variables]
    grads = [rng.normal(size=v.shape).astype("float32") for v in variables]
    table = [v.path for v in variables].index("embeddings/token_embedding/embeddings")
    ids = np.array([3, 8, 3, 30])
    if path == "sparse_rows":  # the word table's gradient arrives as a gather's
        rows = rng.normal(size=(4, 12)).astype("float32")
        grads[table] = np.zeros((31, 12), "float32")
        np.add.at(grads[table], ids, rows)
        applied = list(grads)
        applied[table] = tf.IndexedSlices(tf.constant(rows), tf.constant(ids),
                                          tf.constant([31, 12]))
    else:
        applied = grads
    optimizer.apply_gradients(zip(applied, variables, strict=True))
    factors = set()
    for variable, start, grad in zip(variables, before, grads, strict=True):
        factor = _electra_factor(variable.path, 0.5, 10.0)
        factors.add(factor)
        assert optimizer.learning_rate_factor(variable.path) == factor, variable.path
        decayed = not variable.path.endswith(("/gamma", "/beta", "/bias"))
        want = _first_adamw_step(start, grad, lr * factor, weight_decay, decayed)
        got = variable.numpy()
        if path == "sparse_rows" and variable.path.endswith("token_embedding/embeddings"):
            used = np.isin(np.arange(31), ids)
            np.testing.assert_array_equal(got[~used], start[~used])  # lazy: untouched rows
            got, want = got[used], want[used]
        # float32 (1 - 0.999 alone is off by 1e-5); a wrong factor is off by a whole step.
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-4 * lr * factor,
                                   err_msg=variable.path)
        if not decayed:  # Adam's first step is ±lr × factor (up to epsilon)
            big = np.abs(grad) > 0.01  # where epsilon is negligible
            np.testing.assert_allclose(np.abs(got - start)[big], lr * factor, rtol=1e-2)
    assert factors == {0.5 ** 4, 0.5 ** 3, 0.5 ** 2, 1.0, 10.0}
    assert len(fused_steps) == {"compiled": len(variables), "sparse_rows": len(variables) - 1,
                                "keras": 0}[path]


def test_learning_rate_multipliers_default_is_bit_identical_and_serialises(tiny_config):
    import tensorflow as tf

    assert optimization.layer_multipliers("embeddings", ["transformer_layer_0"], ["logits"]) == {}
    rng = np.random.default_rng(5)
    x = {"token_ids": rng.integers(1, 31, (4, 7)).astype("int32"),
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    data = tf.data.Dataset.from_tensors((x, rng.integers(0, 3, 4))).repeat(3)
    weights = []
    # Factors of 1 for every variable take the multiplier code paths with the same arithmetic.
    for multipliers in (None, {"(^|/)logits/": 1.0, "transformer": 1.0}):
        keras.utils.set_random_seed(0)
        model = BertClassifier(BertEncoder(**tiny_config.encoder_kwargs()), 3, dropout=0.0)
        model.compile(optimizer=optimization.create_optimizer(
            1e-2, 10, 2, learning_rate_multipliers=multipliers),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(data, verbose=0)
        weights.append([v.numpy() for v in model.trainable_variables])
    for default, ones in zip(*weights, strict=True):
        np.testing.assert_array_equal(default, ones)
    optimizer = optimization.create_optimizer(
        2e-5, 100, 10, learning_rate_multipliers={"(^|/)crf/": 50.0, "^embeddings/": 0.3})
    clone = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(optimizer))))
    assert clone.learning_rate_multipliers == {"(^|/)crf/": 50.0, "^embeddings/": 0.3}
    assert clone.learning_rate_factor("tagger/crf/transitions") == 50.0
    assert clone.learning_rate_factor("pooler/kernel") == 1.0
    with pytest.raises(ValueError, match="must be >= 0"):
        optimization.AdamW(learning_rate_multipliers={"crf": -1.0})
    with pytest.raises(ValueError, match=r"layerwise_decay must be in \(0, 1\]"):
        optimization.layer_multipliers("embeddings", [], layerwise_decay=1.5)
