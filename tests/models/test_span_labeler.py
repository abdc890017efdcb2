import json

import keras
import numpy as np
import pytest

import kbert
from kbert.checkpoints import tf1
from kbert.models.span_labeler import MASKED_LOGIT
from kbert.models.span_labeler import BertSpanLabeler
from tests import harness
from tests.oracle import google_squad


def squad_inputs():
    """Two packed windows: [CLS] q q [SEP] c c c [SEP] pad pad, and a full-length one."""
    return {
        "token_ids": np.array([[2, 5, 6, 3, 7, 8, 9, 3, 0, 0],
                               [2, 5, 3, 7, 8, 9, 10, 11, 12, 3]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 1, 0, 0],
                                 [0, 0, 0, 1, 1, 1, 1, 1, 1, 1]], "int32"),
        "padding_mask": np.array([[1] * 8 + [0] * 2, [1] * 10], "int32"),
    }


CONTEXT = np.array([[0, 0, 0, 0, 1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1, 1, 0]], bool)


@pytest.mark.parametrize("allow_null", [False, True])
def test_logits_masked_to_the_context(tiny_encoder, allow_null):
    model = BertSpanLabeler(tiny_encoder, allow_null=allow_null)
    out = model(squad_inputs())
    keep = CONTEXT.copy()
    keep[:, 0] = allow_null
    for name in ("start_logits", "end_logits"):
        logits = np.asarray(out[name])
        assert logits.shape == (2, 10) and logits.dtype == np.float32
        assert (logits[~keep] == MASKED_LOGIT).all() and (np.abs(logits[keep]) < 10).all()
    # The head is a dense layer on the sequence output: start and end use their own columns.
    sequence = np.asarray(tiny_encoder(squad_inputs())["sequence_output"])
    dense = sequence @ model.span_head.kernel.numpy() + model.span_head.bias.numpy()
    np.testing.assert_allclose(np.asarray(out["start_logits"])[keep], dense[..., 0][keep],
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(out["end_logits"])[keep], dense[..., 1][keep],
                               atol=1e-6)


def test_config_roundtrip_save_and_load(tiny_encoder, tmp_path):
    model = BertSpanLabeler(tiny_encoder, allow_null=True)
    clone = harness.assert_config_roundtrip(model)
    assert clone.allow_null and clone.bert_config == tiny_encoder.bert_config
    loaded = harness.assert_saves_and_loads(model, squad_inputs(), str(tmp_path / "m.keras"))
    assert loaded.allow_null


def test_compile_defaults_are_googles_loss(tiny_encoder):
    model = BertSpanLabeler(tiny_encoder)
    model.compile()
    targets = {"start_logits": np.array([4, 5]), "end_logits": np.array([6, 8])}
    outputs = model(squad_inputs())
    # The loss is Google's: the mean of the start and end cross-entropies.
    want = np.mean([-np.log(_softmax(np.asarray(outputs[name]))[[0, 1], targets[name]]).mean()
                    for name in targets])
    got = model.compute_loss(x=squad_inputs(), y=targets, y_pred=outputs)
    assert float(got) == pytest.approx(want, rel=1e-5)
    assert isinstance(model.optimizer, keras.optimizers.Adam)


def _softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_trains_one_step(tiny_encoder):
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    harness.assert_trains_one_step(
        BertSpanLabeler(tiny_encoder), squad_inputs(),
        {"start_logits": np.array([4, 5]), "end_logits": np.array([6, 8])},
        {"start_logits": loss, "end_logits": loss})


def test_from_google_checkpoint_equals_google_create_model(tiny_encoder, tmp_path):
    release = tmp_path / "release"
    kbert.save_google_checkpoint(tiny_encoder, str(release / "bert_model.ckpt"))
    fresh = BertSpanLabeler.from_google_checkpoint(str(release))
    np.testing.assert_allclose(
        fresh.encoder(squad_inputs())["sequence_output"],
        tiny_encoder(squad_inputs())["sequence_output"], atol=1e-6)
    # A run_squad.py checkpoint also has its head, cls/squad/output_weights [2, hidden].
    reader = tf1.GoogleCheckpoint.open(str(release))
    tensors = {name: reader.tensor(name) for name in reader.shapes()}
    rng = np.random.default_rng(0)
    tensors["cls/squad/output_weights"] = rng.normal(size=(2, 12)).astype("float32")
    tensors["cls/squad/output_bias"] = rng.normal(size=(2,)).astype("float32")
    finetuned = str(tmp_path / "finetuned" / "model.ckpt-7")
    tf1.write_tf1_checkpoint(finetuned, tensors)
    config = str(release / "bert_config.json")
    model = BertSpanLabeler.from_google_checkpoint(finetuned, config=config)
    np.testing.assert_array_equal(model.span_head.kernel.numpy(),
                                  tensors["cls/squad/output_weights"].T)
    out = model(squad_inputs())
    with open(config, encoding="utf-8") as f:
        start, end = google_squad.run_google_squad_model(
            json.load(f), finetuned, squad_inputs()["token_ids"],
            squad_inputs()["padding_mask"], squad_inputs()["segment_ids"])
    np.testing.assert_allclose(np.asarray(out["start_logits"])[CONTEXT], start[CONTEXT],
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["end_logits"])[CONTEXT], end[CONTEXT], atol=1e-5)
    tensors["cls/squad/output_weights"] = tensors["cls/squad/output_weights"][:, :6]
    tf1.write_tf1_checkpoint(finetuned, tensors)
    with pytest.raises(ValueError,
                       match=r"output_weights: checkpoint \[2, 6\], model expects \[2, 12\]"):
        BertSpanLabeler.from_google_checkpoint(finetuned, config=config)
