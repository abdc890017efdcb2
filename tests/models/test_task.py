import collections.abc
import contextlib
import json
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.checkpoints import releases
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.task import BertTask
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tasks import precision

HEADS = [BertClassifier, BertTokenClassifier, BertSpanLabeler, BertPretrainer]
# `.keras` configs (config.json) of a tiny compiled model of each head, as written before the
# heads shared `BertTask`: models saved then must keep loading.
SAVED_CONFIGS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "models",
                             "saved_configs.json")
SAVED = {  # fixture key -> class, the attributes it was saved with, its "auto" loss
    "classifier": (BertClassifier, {"num_classes": 3, "dropout": 0.2, "multi_label": True},
                   keras.losses.BinaryCrossentropy),
    "token_classifier": (BertTokenClassifier, {"num_labels": 5, "use_crf": True,
                                               "dropout": 0.3}, type(None)),
    "span_labeler": (BertSpanLabeler, {"allow_null": True}, collections.abc.Mapping),
    "pretrainer": (BertPretrainer, {"sentence_head": False}, type(None)),
}
# A release name of `kbert.list_presets()` that the tests put in the cache by hand.
PRESET = "uncased_L-2_H-128_A-2"


@pytest.mark.parametrize("model_class", HEADS)
def test_trainable_models_are_bert_tasks(model_class):
    assert issubclass(model_class, BertTask)


def _without_object_ids(config):
    """`config` without the `shared_object_id`s, which differ from one process to the next."""
    if isinstance(config, dict):
        return {k: _without_object_ids(v) for k, v in config.items() if k != "shared_object_id"}
    if isinstance(config, list):
        return [_without_object_ids(v) for v in config]
    return config


@pytest.mark.parametrize("key", sorted(SAVED))
def test_loads_a_config_saved_before_bert_task(key):
    with open(SAVED_CONFIGS, encoding="utf-8") as f:
        saved = json.load(f)[key]
    model_class, attributes, loss_type = SAVED[key]
    model = keras.saving.deserialize_keras_object(saved)
    assert type(model) is model_class
    assert {name: getattr(model, name) for name in attributes} == attributes
    assert model.bert_config.num_hidden_layers == 1
    # The same config comes back, keys and values: a model saved now loads with older code.
    assert _without_object_ids(model.get_config()) == _without_object_ids(saved["config"])
    # The compile state comes back too (the span labeler's was skipped before BertTask).
    optimizer = saved["compile_config"]["optimizer"]
    assert type(model.optimizer).__name__ == optimizer["class_name"]
    np.testing.assert_allclose(float(model.optimizer.learning_rate),
                               optimizer["config"]["learning_rate"])
    assert isinstance(model.loss, loss_type)


@pytest.mark.parametrize("model_class", HEADS)
def test_compile_auto_is_adam_and_the_heads_loss(tiny_encoder, model_class):
    model = (model_class(tiny_encoder) if model_class in (BertSpanLabeler, BertPretrainer)
             else model_class(tiny_encoder, 2))
    model.compile()
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 5e-5)
    assert model.get_compile_config()["loss"] == keras.saving.serialize_keras_object(
        model.default_loss())


@pytest.fixture
def preset_cache(monkeypatch, tmp_path, tiny_google_dir):
    """`$KBERT_HOME` with the tiny release cached under the name `PRESET`: nothing to download."""
    monkeypatch.setenv(releases.HOME_ENV, str(tmp_path))
    os.symlink(tiny_google_dir, tmp_path / PRESET)


@pytest.mark.parametrize("model_class, kwargs, new_head", [
    (BertClassifier, {"num_classes": 2, "multi_label": True}, "output_dense"),
    (BertTokenClassifier, {"num_labels": 3, "use_crf": True}, "output_dense"),
    (BertSpanLabeler, {"allow_null": True}, "span_head"),
    (BertPretrainer, {"heads": "fresh", "sentence_head": False}, "nsp_head"),
])
def test_from_preset_is_from_google_checkpoint_on_the_release(
        preset_cache, tiny_google_dir, model_class, kwargs, new_head):
    model = model_class.from_preset(PRESET, check_token_ids=True, **kwargs)
    assert model.encoder.check_token_ids  # an encoder argument reaches the encoder
    expected = kbert.BertEncoder.from_google_checkpoint(tiny_google_dir)
    np.testing.assert_array_equal(model.encoder.pooler.kernel.numpy(),
                                  expected.pooler.kernel.numpy())
    for name, value in kwargs.items():
        if name != "heads":
            assert getattr(model, name) == value
    if new_head != "nsp_head":
        np.testing.assert_array_equal(getattr(model, new_head).bias.numpy(), 0)
    else:
        assert model.nsp_head is None


def test_fit_builds_the_optimizer_before_tracing_the_train_step_once(tiny_encoder):
    """Without a strategy: TensorFlow traces the step once, not again after a first trace
    that made the optimizer's variables."""
    model = BertClassifier(tiny_encoder, 2)
    model.compile(optimizer=kbert.create_optimizer(1e-3, 10, 1))
    traces = []
    train_step = model.train_step

    def counting_train_step(data):
        traces.append(model.optimizer.built)
        return train_step(data)

    model.train_step = counting_train_step
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 31, (4, 7)).astype("int32"),
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    model.fit(x, rng.integers(0, 2, 4), batch_size=2, epochs=2, verbose=0)
    assert traces == [True]
    assert int(model.optimizer.iterations) == 4


def test_fit_on_a_dataset_leaves_out_keras_warning_that_shuffle_is_ignored(tiny_encoder):
    model = BertClassifier(tiny_encoder, 2)
    model.compile(optimizer=kbert.create_optimizer(1e-3, 10, 1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = {"token_ids": np.ones((4, 5), "int32"), "segment_ids": np.zeros((4, 5), "int32"),
         "padding_mask": np.ones((4, 5), "int32")}
    dataset = tf.data.Dataset.from_tensor_slices((x, np.zeros(4, "int32"))).batch(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, epochs=1, verbose=0)
    assert not [w for w in caught if "shuffle" in str(w.message)]
    # Asked for, it is Keras' to answer.
    with pytest.warns(UserWarning, match="shuffle"):
        model.fit(dataset, epochs=1, verbose=0, shuffle=True)
    assert int(model.optimizer.iterations) == 4


def test_fit_and_evaluate_build_string_metrics_before_tracing_once(tiny_encoder):
    """Without a strategy, a metric given by name ("accuracy") is made by Keras inside the
    first trace, and TensorFlow would trace the step again; on a dataset kbert builds it
    first, so the train step (a model that fits) and the test step (another that only
    evaluates) are each traced once."""
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 31, (4, 7)).astype("int32"),
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    dataset = tf.data.Dataset.from_tensor_slices((x, rng.integers(0, 2, 4))).batch(2)
    traces = []

    def model_counting(step_name):
        model = BertClassifier(tiny_encoder, 2)
        model.compile(optimizer=kbert.create_optimizer(1e-3, 10, 1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        step = getattr(model, step_name)

        def counted(data):
            traces.append(step_name)
            return step(data)

        setattr(model, step_name, counted)
        return model

    history = model_counting("train_step").fit(dataset, epochs=2, verbose=0)
    scores = model_counting("test_step").evaluate(dataset, verbose=0, return_dict=True)
    assert traces == ["train_step", "test_step"]
    assert set(scores) == {"loss", "accuracy"} and "accuracy" in history.history


def test_the_train_step_alone_is_traced_for_fewer_grappler_passes(tiny_encoder):
    """On the CPU the train step is traced, and its graph first run, with this thread's
    function-call options asking Grappler for one pass without its layout and memory
    optimisers and TFG passes (`kbert.graph_passes`); the test and predict steps, inside
    `fit` too, with TensorFlow's default (their second pass fuses the GELU into its matmul),
    as is everything after `fit`."""
    from tests.test_graph_passes import TENSORFLOWS
    from tests.test_graph_passes import TRAINING_STEPS
    from tests.test_graph_passes import grappler_settings

    model = BertClassifier(tiny_encoder, 2)
    model.compile(optimizer=kbert.create_optimizer(1e-3, 10, 1))
    seen = {}

    def recording(name):
        step = getattr(model, name)

        def recorded(data):
            seen[name] = grappler_settings()
            return step(data)

        return recorded

    for name in ("train_step", "test_step", "predict_step"):
        setattr(model, name, recording(name))
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 31, (4, 7)).astype("int32"),
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    y = rng.integers(0, 2, 4)
    model.fit(x, y, batch_size=2, verbose=0, validation_data=(x, y))
    assert seen == {"train_step": TRAINING_STEPS, "test_step": TENSORFLOWS}
    model.predict(x, batch_size=2, verbose=0)
    assert seen["predict_step"] == TENSORFLOWS
    assert grappler_settings() == TENSORFLOWS
    train_function = model.train_function
    model.fit(x, y, batch_size=2, verbose=0)  # the same function again, not wrapped twice
    assert model.train_function is train_function


@pytest.mark.parametrize("policy, amx, remapping", [
    ("mixed_bfloat16", True, "OFF"), ("mixed_bfloat16", False, "DEFAULT"),
    ("float32", True, "DEFAULT")])
def test_the_bias_fusion_is_left_out_of_the_train_step_in_bfloat16_on_amx(
        tiny_config, monkeypatch, policy, amx, remapping):
    """Grappler's remapper fuses each product with its bias into an inner product that
    oneDNN runs without AMX in bfloat16: on such a CPU the bfloat16 train step is optimised
    without it; a float32 step, or one on another CPU, keeps it."""
    from tensorflow.core.protobuf import rewriter_config_pb2

    from kbert import cpu_features
    from tests.test_graph_passes import _rewrite_options

    monkeypatch.setattr(cpu_features, "has_amx_bfloat16", lambda: amx)
    with precision.mixed_precision_scope(policy):
        model = BertClassifier(BertEncoder(**tiny_config.encoder_kwargs()), 2)
    model.compile(optimizer=kbert.create_optimizer(1e-3, 10, 1))
    seen = []
    step = model.train_step
    model.train_step = lambda data: (seen.append(_rewrite_options().remapping), step(data))[1]
    x = {"token_ids": np.ones((2, 5), "int32"), "segment_ids": np.zeros((2, 5), "int32"),
         "padding_mask": np.ones((2, 5), "int32")}
    model.fit(x, np.zeros(2, "int32"), batch_size=2, verbose=0)
    assert seen == [getattr(rewriter_config_pb2.RewriterConfig, remapping)]


@pytest.mark.parametrize("strategy", [None, "mirrored"])
def test_the_loss_and_metrics_are_built_from_the_graph_not_a_trace_of_the_model(
        tiny_config, strategy):
    """Before `fit`'s first trace the compiled loss and metrics are built on the outputs'
    spec, which a functional model gives from its graph: no layer's `call` runs (Keras'
    `_symbolic_build` traces the whole model for it, ~0.6 s for MiniLM), with or without a
    strategy (whose `fit` then finds them built)."""
    scope = (tf.distribute.MirroredStrategy(["/cpu:0"]).scope() if strategy
             else contextlib.nullcontext())
    with scope:
        model = BertClassifier(kbert.BertEncoder(**tiny_config.encoder_kwargs()), 3)
        model.compile(optimizer="adam", metrics=["accuracy"])
    x = {"token_ids": np.ones((4, 7), "int32"), "segment_ids": np.zeros((4, 7), "int32"),
         "padding_mask": np.ones((4, 7), "int32")}
    dataset = tf.data.Dataset.from_tensor_slices((x, np.zeros(4, "int32"))).batch(2)
    calls = []
    call = model.output_dense.call
    model.output_dense.call = lambda *args, **kwargs: calls.append(1) or call(*args, **kwargs)
    model._build_compiled_state(dataset)
    assert calls == []
    assert model._compile_loss.built and model._compile_metrics.built
    model.output_dense.call = call
    history = model.fit(dataset, epochs=1, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
