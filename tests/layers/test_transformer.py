import keras
import keras_nlp
import numpy as np
import pytest
import tensorflow as tf

from kbert import cpu_features
from kbert.layers.transformer import BertTransformerLayer
from kbert.layers.transformer import gelu_approximate_for_training

BATCH, SEQ, HIDDEN, HEADS, INTERMEDIATE = 3, 9, 12, 3, 20  # all distinct


def layer_and_inputs(dtype="float32", batch=BATCH, **kwargs):
    """A built layer, hidden states [batch, SEQ, HIDDEN], a padding mask that pads the last
    example (from position 3) and, if there are three, the second (from 6), and a random
    attention mask."""
    keras.utils.set_random_seed(1)
    layer = BertTransformerLayer(INTERMEDIATE, HEADS, dtype=dtype, **kwargs)
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(BATCH, SEQ, HIDDEN)).astype("float32")[-batch:]
    padding = np.ones((BATCH, SEQ), "int32")
    padding[1, 6:] = 0
    padding[2, 3:] = 0
    padding = padding[-batch:]
    attention = (rng.random((BATCH, SEQ, SEQ)) > 0.3).astype("int32")[-batch:]
    attention[:, :, 0] = 1  # every query sees [CLS]
    layer(hidden, padding_mask=padding)
    # Biases away from zero, so a dropped or misplaced bias fails.
    for weight in layer.weights:
        if weight.path.endswith("bias") or weight.path.endswith("beta"):
            weight.assign(rng.normal(size=weight.shape) * 0.5)
    return layer, hidden, padding, attention


def keras_nlp_call(layer, *args, **kwargs):
    """keras-nlp's own TransformerEncoder computation on the same sublayers and weights."""
    return keras_nlp.layers.TransformerEncoder.call(layer, *args, **kwargs)


@pytest.mark.parametrize("batch", [BATCH, 1])  # 1 takes a path of its own
@pytest.mark.parametrize("dtype, atol", [("float32", 1e-5), ("mixed_float16", 4e-3)])
def test_matches_keras_nlp_transformer_encoder(dtype, atol, batch):
    layer, hidden, padding, attention = layer_and_inputs(dtype, batch)
    # In a tf.function too, where TensorFlow's graph rewrites fuse ops.
    for call in (layer, tf.function(layer)):
        for masks in ({}, {"padding_mask": padding}, {"attention_mask": attention},
                      {"padding_mask": padding, "attention_mask": attention}):
            ours = call(hidden, training=False, **masks)
            assert ours.dtype == layer.compute_dtype
            golden = keras_nlp_call(layer, hidden, training=False, **masks)
            np.testing.assert_allclose(np.float32(ours), np.float32(golden), atol=atol,
                                       err_msg=str(sorted(masks)))
            first = call(hidden, training=False, first_token_only=True, **masks)
            np.testing.assert_allclose(np.float32(first), np.float32(golden)[:, :1], atol=atol,
                                       err_msg=str(sorted(masks)))


def test_unknown_batch_size():
    layer, hidden, padding, _ = layer_and_inputs()
    call = tf.function(lambda x, mask: layer(x, padding_mask=mask), input_signature=[
        tf.TensorSpec((None, SEQ, HIDDEN)), tf.TensorSpec((None, SEQ), "int32")])
    for batch in (1, BATCH):
        np.testing.assert_allclose(call(hidden[:batch], padding[:batch]),
                                   layer(hidden[:batch], padding_mask=padding[:batch]), atol=1e-5)


def test_masks_change_the_output():
    layer, hidden, padding, attention = layer_and_inputs()
    plain = layer(hidden)
    assert np.abs(layer(hidden, padding_mask=padding) - plain)[1].max() > 1e-3
    assert np.abs(layer(hidden, attention_mask=attention) - plain).max() > 1e-3


@pytest.mark.parametrize("batch", [BATCH, 1])
@pytest.mark.parametrize("training", [False, True])  # training: kbert's GELU and its gradient
def test_gradients_match_keras_nlp_transformer_encoder(batch, training):
    layer, hidden, padding, _ = layer_and_inputs(batch=batch)
    hidden = tf.constant(hidden)
    weights = np.random.default_rng(2).normal(size=hidden.shape).astype("float32")

    def gradients(call):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            loss = tf.reduce_sum(
                call(layer, hidden, padding_mask=padding, training=training) * weights)
        return tape.gradient(loss, [hidden] + layer.trainable_variables)

    ours = gradients(BertTransformerLayer.__call__)
    golden = gradients(keras_nlp_call)
    assert len(ours) == 2 + 16 - 1  # input, 16 weights
    for variable, a, b in zip(["input"] + layer.trainable_variables, ours, golden, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, err_msg=getattr(variable, "path", variable))


def test_training_gelu_equals_the_tanh_form_and_its_gradient():
    # Google's tanh-form GELU and its automatic gradient in float64 are the reference; kbert's
    # sigmoid form in float32 must be as close to them as TensorFlow's own float32 GELU.
    x = np.concatenate([np.linspace(-12, 12, 4801),
                        np.random.default_rng(0).normal(0, 3, 2000)]).astype("float32")

    def value_and_gradient(gelu, dtype):
        inputs = tf.constant(x, dtype)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = gelu(inputs)
        return np.float64(outputs), np.float64(tape.gradient(outputs, inputs))

    reference = value_and_gradient(lambda v: tf.nn.gelu(v, approximate=True), tf.float64)
    ours = value_and_gradient(gelu_approximate_for_training, tf.float32)
    tensorflow = value_and_gradient(lambda v: tf.nn.gelu(v, approximate=True), tf.float32)
    for name, a, b, c in zip(["value", "gradient"], ours, reference, tensorflow, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-6, err_msg=name)
        assert np.abs(a - b).max() <= 2 * np.abs(c - b).max() + 1e-7, name
    # Far out it saturates to the identity and zero, with gradients 1 and 0.
    (values, gradients), far = ours, [0, 4800]  # x = -12 and 12
    assert list(values[far]) == [0, 12] and list(gradients[far]) == [0, 1]


def _activation_dtypes(function, *args):
    """The dtypes of the GELU's transcendental ops (Tanh in `tf.nn.gelu`, Sigmoid in
    `gelu_approximate_for_training`) in `function`'s graph for `args`, by op type."""
    graph = tf.function(function).get_concrete_function(*args).graph
    return {(op.type, op.get_attr("T").name) for op in graph.get_operations()
            if op.type in ("Tanh", "Sigmoid")}


def test_mixed_bfloat16_training_computes_the_activation_in_float32(monkeypatch):
    layer, hidden, padding, _ = layer_and_inputs("mixed_bfloat16", dropout=0.0,
                                                 attention_dropout=0.0)

    def call(x, training):
        return layer(x, padding_mask=padding, training=training)

    assert _activation_dtypes(lambda x: call(x, True), hidden) == {("Sigmoid", "float32")}
    # Inference keeps bfloat16 and tf.nn.gelu, which oneDNN fuses into the matmul; so does a
    # GPU.
    assert _activation_dtypes(lambda x: call(x, False), hidden) == {("Tanh", "bfloat16")}
    with monkeypatch.context() as patch:
        patch.setattr(cpu_features, "runs_on_cpu", lambda: False)
        assert _activation_dtypes(lambda x: call(x, True), hidden) == {("Tanh", "bfloat16")}
    # The same function either way, within bfloat16's precision, and the same as keras-nlp's.
    training, inference = call(hidden, True), call(hidden, False)
    assert training.dtype == "bfloat16"
    golden = keras_nlp_call(layer, hidden, padding_mask=padding, training=False)
    np.testing.assert_allclose(np.float32(training), np.float32(golden), atol=0.1)
    np.testing.assert_allclose(np.float32(training), np.float32(inference), atol=0.1)
    # In float32, training computes exactly keras-nlp's layer.
    layer = layer_and_inputs(dropout=0.0, attention_dropout=0.0)[0]
    np.testing.assert_allclose(
        layer(hidden, padding_mask=padding, training=True),
        keras_nlp_call(layer, hidden, padding_mask=padding, training=True), atol=1e-5)


@pytest.mark.parametrize("batch", [BATCH, 1])
def test_attention_dropout_applies_in_training_only(batch):
    layer, hidden, padding, _ = layer_and_inputs(batch=batch, dropout=0.0, attention_dropout=0.5)
    inference = layer(hidden, padding_mask=padding, training=False)
    np.testing.assert_array_equal(inference, layer(hidden, padding_mask=padding))
    keras.utils.set_random_seed(3)
    training = layer(hidden, padding_mask=padding, training=True)
    assert np.abs(training - inference).max() > 1e-2


@pytest.mark.parametrize("batch", [BATCH, 1])
def test_return_attention_scores(batch):
    layer, hidden, padding, _ = layer_and_inputs(batch=batch)
    output, scores = layer(hidden, padding_mask=padding, return_attention_scores=True)
    np.testing.assert_allclose(output, layer(hidden, padding_mask=padding), atol=1e-5)
    assert scores.shape == (batch, HEADS, SEQ, SEQ)
    np.testing.assert_allclose(np.sum(scores, axis=-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(scores)[-1, :, :, 3:], 0.0)  # padding
    golden_output, golden_scores = keras_nlp_call(layer, hidden, padding_mask=padding,
                                                  return_attention_scores=True)
    np.testing.assert_allclose(output, golden_output, atol=1e-5)
    np.testing.assert_allclose(scores, golden_scores, atol=1e-6)
    first, first_scores = layer(hidden, padding_mask=padding, return_attention_scores=True,
                                first_token_only=True)
    np.testing.assert_allclose(first, np.asarray(output)[:, :1], atol=1e-5)
    np.testing.assert_allclose(first_scores, np.asarray(scores)[:, :, :1], atol=1e-6)


def test_config_round_trip():
    layer, hidden, padding, _ = layer_and_inputs(activation="relu", dropout=0.1,
                                                 attention_dropout=0.2, initializer_range=0.05)
    clone = BertTransformerLayer.from_config(layer.get_config())
    clone(hidden)
    clone.set_weights(layer.get_weights())
    assert (clone.activation_name, clone.dropout, clone.attention_dropout,
            clone.initializer_range) == ("relu", 0.1, 0.2, 0.05)
    np.testing.assert_allclose(clone(hidden, padding_mask=padding),
                               layer(hidden, padding_mask=padding), atol=1e-6)


def test_cpu_training_is_the_keras_layers_in_fewer_ops(monkeypatch):
    """In training on the CPU, the LayerNorms and dropouts go through kbert.layers.training_ops:
    the values and gradients of Keras' layers (the same dropout masks), in fewer ops."""
    layer, hidden, padding, _ = layer_and_inputs(dropout=0.2, attention_dropout=0.3)
    hidden = tf.constant(hidden)
    seeds = [v.numpy() for v in layer.non_trainable_variables]  # the dropouts' generators
    assert seeds

    def step(x):
        for variable, value in zip(layer.non_trainable_variables, seeds, strict=True):
            variable.assign(value)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, padding_mask=padding, training=True)
            loss = tf.reduce_sum(y * tf.reshape(tf.range(tf.size(y), dtype=y.dtype), y.shape))
        return [y, *tape.gradient(loss, [x, *layer.trainable_variables])]

    def ops():
        graph = tf.function(step).get_concrete_function(hidden).graph
        return len(graph.get_operations())

    ours, our_ops = step(hidden), ops()
    monkeypatch.setattr(cpu_features, "runs_on_cpu", lambda: False)  # Keras' layers
    theirs, their_ops = step(hidden), ops()
    for a, b in zip(ours, theirs, strict=True):
        # float32 round-off on the scale of each gradient (some entries are sums near 0; the
        # key bias's is 0 but for round-off)
        np.testing.assert_allclose(a, b, atol=1e-5 * np.abs(b).max() + 1e-6)
    # Dropout happened (so the equality above means the same masks).
    assert np.abs(ours[0] - layer(hidden, padding_mask=padding, training=False)).max() > 0.1
    assert our_ops < 0.85 * their_ops, (our_ops, their_ops)
