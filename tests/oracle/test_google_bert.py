"""Self-tests of the Google BERT oracle: checkpoint names, shim maths, restore, determinism."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import google_bert as gb

# Slow: builds TF1 graphs (a few seconds in all), once, on one worker (setup.cfg).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]

tf1 = tf.compat.v1

CONFIG = dict(
    vocab_size=31, hidden_size=12, num_hidden_layers=2, num_attention_heads=3,
    intermediate_size=20, hidden_act="gelu", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1, max_position_embeddings=16, type_vocab_size=2,
    initializer_range=0.02)


def google_names(num_layers, heads):
    """Every variable name of Google's BertModel (+ run_pretraining's heads)."""
    names = ["bert/embeddings/word_embeddings", "bert/embeddings/token_type_embeddings",
             "bert/embeddings/position_embeddings", "bert/embeddings/LayerNorm/beta",
             "bert/embeddings/LayerNorm/gamma", "bert/pooler/dense/kernel",
             "bert/pooler/dense/bias"]
    for i in range(num_layers):
        for sub in ("attention/self/query", "attention/self/key", "attention/self/value",
                    "attention/output/dense", "intermediate/dense", "output/dense"):
            names += [f"bert/encoder/layer_{i}/{sub}/kernel", f"bert/encoder/layer_{i}/{sub}/bias"]
        for sub in ("attention/output/LayerNorm", "output/LayerNorm"):
            names += [f"bert/encoder/layer_{i}/{sub}/beta", f"bert/encoder/layer_{i}/{sub}/gamma"]
    if heads:
        names += ["cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
                  "cls/predictions/transform/LayerNorm/beta",
                  "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/output_bias",
                  "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"]
    return set(names)


@pytest.fixture(scope="module")
def plain_ckpt(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("plain") / "bert_model.ckpt")
    gb.make_google_checkpoint(CONFIG, prefix, with_pretraining_heads=False, seed=1)
    return prefix


@pytest.fixture(scope="module")
def full_ckpt(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("full") / "bert_model.ckpt")
    gb.make_google_checkpoint(CONFIG, prefix, with_pretraining_heads=True, seed=1,
                              with_optimizer_slots=True, with_classifier_head=True)
    return prefix


def np_layer_norm(x, gamma, beta, eps=1e-12):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_gelu(x):  # Google's tanh approximation
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def test_plain_checkpoint_files_and_names(plain_ckpt):
    directory = os.path.dirname(plain_ckpt)
    assert sorted(os.listdir(directory)) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "checkpoint"]
    with open(os.path.join(directory, "bert_config.json")) as f:
        assert json.load(f) == CONFIG
    shapes = dict(tf.train.list_variables(plain_ckpt))
    assert set(shapes) == google_names(2, heads=False)
    assert shapes["bert/encoder/layer_0/attention/self/query/kernel"] == [12, 12]
    assert shapes["bert/encoder/layer_1/intermediate/dense/kernel"] == [12, 20]
    assert shapes["bert/encoder/layer_1/output/dense/kernel"] == [20, 12]
    assert shapes["bert/embeddings/position_embeddings"] == [16, 12]


def test_full_checkpoint_names(full_ckpt):
    shapes = dict(tf.train.list_variables(full_ckpt))
    trainable = google_names(2, heads=True) | {"output_weights", "output_bias"}
    slots = {f"{n}/{s}" for n in trainable for s in ("adam_m", "adam_v")}
    assert set(shapes) == trainable | slots | {"global_step"}
    assert shapes["cls/predictions/output_bias"] == [31]
    assert shapes["cls/seq_relationship/output_weights"] == [2, 12]
    assert shapes["output_weights"] == [3, 12]
    assert shapes["global_step"] == []
    assert (tf.train.load_variable(full_ckpt, "bert/pooler/dense/kernel/adam_v") > 0).all()


def test_values_are_random_not_defaults(full_ckpt, plain_ckpt):
    for name in google_names(2, heads=True) | {"output_weights", "output_bias"}:
        value = tf.train.load_variable(full_ckpt, name)
        assert value.dtype == np.float32
        assert np.all(value != 0), name
        if name.endswith("gamma"):
            assert not np.allclose(value, 1.0), name
    # Per-variable seeding: the encoder weights do not depend on which heads exist.
    for name in google_names(2, heads=False):
        np.testing.assert_array_equal(tf.train.load_variable(plain_ckpt, name),
                                      tf.train.load_variable(full_ckpt, name))


def test_layer_norm_shim_matches_numpy_with_eps_1e_12():
    rng = np.random.RandomState(0)
    x = rng.normal(size=(2, 3, 5)).astype(np.float32)
    x[0, 0] = [0.0, 2e-6, 0.0, 2e-6, 1e-6]  # variance ~6e-13: epsilon matters
    gamma = (1 + 0.1 * rng.normal(size=5)).astype(np.float32)
    beta = (0.1 * rng.normal(size=5)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        y = gb.layer_norm(tf.constant(x), begin_norm_axis=-1, begin_params_axis=-1)
        with tf1.variable_scope("outer"):
            gb.layer_norm(tf.constant(x), scope="LayerNorm")
        names = sorted(v.op.name for v in tf1.global_variables())
        assert names == ["LayerNorm/beta", "LayerNorm/gamma", "outer/LayerNorm/beta",
                         "outer/LayerNorm/gamma"]
        beta_var, gamma_var = tf1.global_variables()[:2]
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run([beta_var.assign(beta), gamma_var.assign(gamma)])
            got = sess.run(y)
    np.testing.assert_allclose(got, np_layer_norm(x, gamma, beta), rtol=1e-4, atol=1e-5)
    assert not np.allclose(got[0, 0], np_layer_norm(x, gamma, beta, eps=1e-6)[0, 0], atol=1e-2)


def test_dense_shim_names_and_maths():
    rng = np.random.RandomState(0)
    x2 = rng.normal(size=(4, 5)).astype(np.float32)
    x3 = rng.normal(size=(2, 3, 5)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        y2 = gb.dense(tf.constant(x2), 6, activation=tf.tanh)
        y3 = gb.dense(tf.constant(x3), units=6)
        with tf1.variable_scope("pooler"):
            gb.dense(tf.constant(x2), 6)
        names = [v.op.name for v in tf1.global_variables()]
        assert names == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias",
                         "pooler/dense/kernel", "pooler/dense/bias"]
        assert y3.shape.as_list() == [2, 3, 6]
        init = tf1.random_normal_initializer(seed=0)
        assigns = [v.assign(init(v.shape)) for v in tf1.global_variables()]
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(assigns)
            got2, got3, (k0, b0, k1, b1) = sess.run([y2, y3, tf1.global_variables()[:4]])
    np.testing.assert_allclose(got2, np.tanh(x2 @ k0 + b0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got3, x3 @ k1 + b1, rtol=1e-5, atol=1e-6)


def test_run_outputs_match_checkpoint_and_are_deterministic(full_ckpt):
    inputs = gb.random_inputs(CONFIG)
    assert inputs["input_mask"][0].all() and not inputs["input_mask"][1].all()
    out = gb.run_google_bert(CONFIG, full_ckpt, **inputs)
    again = gb.run_google_bert(CONFIG, full_ckpt, **inputs)
    assert gb.HEADS_SOURCE == "bert.run_pretraining"
    assert set(out) == {"embedding_output", "all_encoder_layers", "sequence_output",
                        "pooled_output", "mlm_logits", "nsp_logits"}
    for key in ("embedding_output", "sequence_output", "pooled_output", "mlm_logits",
                "nsp_logits"):
        np.testing.assert_array_equal(out[key], again[key])
    assert out["embedding_output"].shape == (2, 7, 12)
    assert [a.shape for a in out["all_encoder_layers"]] == [(2, 7, 12)] * 2
    np.testing.assert_array_equal(out["all_encoder_layers"][-1], out["sequence_output"])
    assert out["pooled_output"].shape == (2, 12)
    assert out["mlm_logits"].shape == (2, 3, 31)
    assert out["nsp_logits"].shape == (2, 2)

    # Embeddings and both heads, recomputed in numpy from the checkpoint.
    def w(name):
        return tf.train.load_variable(full_ckpt, name)

    ids, types = inputs["input_ids"], inputs["token_type_ids"]
    emb = (w("bert/embeddings/word_embeddings")[ids]
           + w("bert/embeddings/token_type_embeddings")[types]
           + w("bert/embeddings/position_embeddings")[:7])
    emb = np_layer_norm(emb, w("bert/embeddings/LayerNorm/gamma"),
                        w("bert/embeddings/LayerNorm/beta"))
    np.testing.assert_allclose(out["embedding_output"], emb, rtol=1e-4, atol=1e-5)

    pos = inputs["masked_lm_positions"]
    h = np.take_along_axis(out["sequence_output"].astype(np.float64), pos[..., None], axis=1)
    h = np_gelu(h @ w("cls/predictions/transform/dense/kernel")
                + w("cls/predictions/transform/dense/bias"))
    h = np_layer_norm(h, w("cls/predictions/transform/LayerNorm/gamma"),
                      w("cls/predictions/transform/LayerNorm/beta"))
    mlm = h @ w("bert/embeddings/word_embeddings").T + w("cls/predictions/output_bias")
    np.testing.assert_allclose(out["mlm_logits"], mlm, rtol=1e-4, atol=1e-5)
    nsp = (out["pooled_output"] @ w("cls/seq_relationship/output_weights").T
           + w("cls/seq_relationship/output_bias"))
    np.testing.assert_allclose(out["nsp_logits"], nsp, rtol=1e-4, atol=1e-5)


def test_replica_heads_equal_run_pretraining(full_ckpt, monkeypatch):
    inputs = gb.random_inputs(CONFIG, seed=3)
    real = gb.run_google_bert(CONFIG, full_ckpt, **inputs)
    monkeypatch.setitem(gb._LOADED, "heads", gb._ReplicaHeads)
    replica = gb.run_google_bert(CONFIG, full_ckpt, **inputs)
    np.testing.assert_array_equal(real["mlm_logits"], replica["mlm_logits"])
    np.testing.assert_array_equal(real["nsp_logits"], replica["nsp_logits"])


def test_without_heads_and_failing_loudly(plain_ckpt):
    inputs = gb.random_inputs(CONFIG, batch=3, seq=5, seed=2)
    out = gb.run_google_bert(CONFIG, plain_ckpt, **inputs)
    assert "mlm_logits" not in out and "nsp_logits" not in out
    assert out["sequence_output"].shape == (3, 5, 12)
    with pytest.raises(ValueError, match="layer_2/attention/self/query/kernel"):
        gb.run_google_bert(dict(CONFIG, num_hidden_layers=3), plain_ckpt, **inputs)
    with pytest.raises(ValueError, match="Wrong shape"):
        gb.run_google_bert(dict(CONFIG, intermediate_size=21), plain_ckpt, **inputs)


def test_process_stays_eager_and_clean():
    gb._modeling()
    assert tf.executing_eagerly()
    assert "tensorflow.contrib" not in sys.modules
    assert "tensorflow.contrib.layers" not in sys.modules
