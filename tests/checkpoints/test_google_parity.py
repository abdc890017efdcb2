"""kbert against Google's original modeling.py (bert-tensorflow), run by tests/oracle."""

import os

import numpy as np
import pytest

import kbert
from tests.conftest import TINY_CONFIG
from tests.oracle import google_bert

# On one worker (setup.cfg), so its Google graphs are built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]
ATOL = 1e-5


def kbert_inputs(google_inputs):
    return {
        "token_ids": google_inputs["input_ids"].astype("int32"),
        "segment_ids": google_inputs["token_type_ids"].astype("int32"),
        "padding_mask": google_inputs["input_mask"].astype("int32"),
        "mask_positions": google_inputs["masked_lm_positions"].astype("int32"),
    }


def assert_encoder_matches(ours, golden):
    np.testing.assert_allclose(ours["embedding_output"], golden["embedding_output"], atol=ATOL)
    assert len(ours["encoder_outputs"]) == len(golden["all_encoder_layers"])
    for i, (a, b) in enumerate(zip(ours["encoder_outputs"], golden["all_encoder_layers"],
                                   strict=True)):
        np.testing.assert_allclose(a, b, atol=ATOL, err_msg=f"layer {i}")
    np.testing.assert_allclose(ours["sequence_output"], golden["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(ours["pooled_output"], golden["pooled_output"], atol=ATOL)


@pytest.fixture(scope="module")
def google_release(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("google") / "bert_model.ckpt")
    google_bert.make_google_checkpoint(TINY_CONFIG, prefix, with_pretraining_heads=True, seed=3)
    inputs = google_bert.random_inputs(TINY_CONFIG, batch=2, seq=9, seed=1)
    return prefix, inputs, google_bert.run_google_bert(TINY_CONFIG, prefix, **inputs)


def test_pretrainer_matches_google(google_release):
    prefix, inputs, golden = google_release
    assert inputs["input_mask"][1].min() == 0 and inputs["token_type_ids"].max() == 1
    model = kbert.BertPretrainer.from_google_checkpoint(os.path.dirname(prefix))
    x = kbert_inputs(inputs)
    out = model(x)
    np.testing.assert_allclose(out["mlm_logits"], golden["mlm_logits"], atol=ATOL)
    np.testing.assert_allclose(out["nsp_logits"], golden["nsp_logits"], atol=ATOL)
    encoder_inputs = {k: v for k, v in x.items() if k != "mask_positions"}
    assert_encoder_matches(model.encoder(encoder_inputs), golden)
    # The classifier's path: the last layer computed for [CLS] alone (a padded row included).
    np.testing.assert_allclose(model.encoder.pooled_output(encoder_inputs),
                               golden["pooled_output"], atol=ATOL)


def test_encoder_from_encoder_only_checkpoint(tmp_path):
    prefix = str(tmp_path / "bert_model.ckpt")
    google_bert.make_google_checkpoint(TINY_CONFIG, prefix, with_pretraining_heads=False, seed=5)
    inputs = google_bert.random_inputs(TINY_CONFIG, batch=3, seq=11, seed=2)
    golden = google_bert.run_google_bert(TINY_CONFIG, prefix, **inputs)
    encoder = kbert.BertEncoder.from_google_checkpoint(prefix)
    x = kbert_inputs(inputs)
    del x["mask_positions"]
    assert_encoder_matches(encoder(x), golden)


def test_run_pretraining_and_run_classifier_layouts_load(tmp_path):
    prefix = str(tmp_path / "model.ckpt-100")
    google_bert.make_google_checkpoint(TINY_CONFIG, prefix, with_pretraining_heads=True, seed=7,
                                       with_optimizer_slots=True, with_classifier_head=True)
    inputs = google_bert.random_inputs(TINY_CONFIG, seed=4)
    golden = google_bert.run_google_bert(TINY_CONFIG, prefix, **inputs)
    model = kbert.BertPretrainer.from_google_checkpoint(str(tmp_path))  # via `checkpoint` file
    np.testing.assert_allclose(model(kbert_inputs(inputs))["mlm_logits"], golden["mlm_logits"],
                               atol=ATOL)


def test_kbert_checkpoint_restores_in_google_modeling(google_release, tmp_path):
    """kbert -> save_google_checkpoint -> Google's Saver restores it, same outputs."""
    prefix, inputs, golden = google_release
    model = kbert.BertPretrainer.from_google_checkpoint(prefix)
    saved = str(tmp_path / "bert_model.ckpt")
    kbert.save_google_checkpoint(model, saved)
    config = kbert.BertConfig.from_json_file(str(tmp_path / "bert_config.json")).to_dict()
    restored = google_bert.run_google_bert(config, saved, **inputs)
    for name in ("embedding_output", "sequence_output", "pooled_output", "mlm_logits",
                 "nsp_logits"):
        np.testing.assert_allclose(restored[name], golden[name], atol=ATOL, err_msg=name)


def test_fresh_kbert_model_restores_in_google_modeling(tiny_encoder, tmp_path):
    """A newly initialised kbert pretrainer, written out, computes the same in Google's code."""
    model = kbert.BertPretrainer(tiny_encoder)
    for variable in model.weights:  # make LayerNorm and biases non-trivial
        variable.assign(variable.numpy() + np.random.RandomState(0).normal(
            0, 0.1, variable.shape).astype("float32"))
    kbert.save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    inputs = google_bert.random_inputs(TINY_CONFIG, seed=9)
    golden = google_bert.run_google_bert(TINY_CONFIG, str(tmp_path / "bert_model.ckpt"), **inputs)
    out = model(kbert_inputs(inputs))
    np.testing.assert_allclose(out["mlm_logits"], golden["mlm_logits"], atol=ATOL)
    np.testing.assert_allclose(out["nsp_logits"], golden["nsp_logits"], atol=ATOL)
