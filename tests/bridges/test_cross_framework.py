"""Exported heads run in Google's own code, in transformers (PyTorch) and in keras-hub."""

import json
import os

import keras_hub
import numpy as np
import pytest

import kbert
from tests.bridges import heads
from tests.oracle import google_classifier
from tests.oracle import google_squad

# PyTorch and transformers are imported by these tests only, on the one worker that runs them
# all (setup.cfg): imported at collection, they cost every pytest worker ~4 s (AMD AVX-512 VM,
# 2026-11-29).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]


def google_export(model, directory):
    prefix = str(directory / "bert_model.ckpt")
    kbert.save_google_checkpoint(model, prefix)
    with open(directory / "bert_config.json", encoding="utf-8") as f:
        return json.load(f), prefix


def context(x):
    # Where kbert's span labeler keeps Google's logits: segment 1, real, before the last [SEP].
    mask = (x["segment_ids"] == 1) & (x["padding_mask"] == 1)
    last = x["padding_mask"].sum(axis=1) - 1
    mask[np.arange(len(last)), last] = False
    return mask


def test_google_run_classifier_restores_kbert_classifier(tmp_path):
    model = heads.make_model("classifier")
    config, prefix = google_export(model, tmp_path)
    x = heads.inputs()
    logits = google_classifier.run_google_classifier_model(
        config, prefix, x["token_ids"], x["padding_mask"], x["segment_ids"], num_labels=3)
    np.testing.assert_allclose(model(x), logits, atol=1e-5)


def test_google_run_squad_restores_kbert_span_labeler(tmp_path):
    model = heads.make_model("span_labeler")
    config, prefix = google_export(model, tmp_path)
    x = heads.inputs()
    start, end = google_squad.run_google_squad_model(
        config, prefix, x["token_ids"], x["padding_mask"], x["segment_ids"])
    out, keep = model(x), context(x)
    np.testing.assert_allclose(np.asarray(out["start_logits"])[keep], start[keep], atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["end_logits"])[keep], end[keep], atol=1e-5)


def run_transformers(model_class, directory, x):
    import torch

    hf = model_class.from_pretrained(str(directory)).eval()
    with torch.no_grad():
        return hf(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                  token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
                  attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long)), hf.config


@pytest.mark.parametrize("kind", ["classifier", "regression", "multi_label", "span_labeler",
                                  "tagger_crf", "pretrainer", "encoder"])
def test_transformers_loads_each_head(kind, tmp_path):
    import transformers

    model = heads.make_model(kind)
    kbert.save_model(model, str(tmp_path), format="huggingface")
    x = heads.inputs()
    ours = heads.outputs(model, x)
    mask = x["padding_mask"].astype(bool)
    if kind in ("classifier", "regression", "multi_label"):
        out, config = run_transformers(transformers.BertForSequenceClassification, tmp_path, x)
        np.testing.assert_allclose(out.logits.numpy(), ours["output"], atol=1e-4)
        assert config.problem_type == {"regression": "regression",
                                       "multi_label": "multi_label_classification"}.get(
            kind, "single_label_classification")
        assert config.hidden_act == "gelu_new"
    elif kind == "span_labeler":
        out, _ = run_transformers(transformers.BertForQuestionAnswering, tmp_path, x)
        keep = context(x)
        np.testing.assert_allclose(out.start_logits.numpy()[keep], ours["start_logits"][keep],
                                   atol=1e-4)
        np.testing.assert_allclose(out.end_logits.numpy()[keep], ours["end_logits"][keep],
                                   atol=1e-4)
    elif kind == "tagger_crf":  # transformers gives the CRF's unary potentials
        out, config = run_transformers(transformers.BertForTokenClassification, tmp_path, x)
        np.testing.assert_allclose(out.logits.numpy()[mask], ours["output"][mask], atol=1e-4)
        assert config.id2label == {i: f"LABEL_{i}" for i in range(5)}
    elif kind == "encoder":
        out, _ = run_transformers(transformers.BertModel, tmp_path, x)
        np.testing.assert_allclose(out.last_hidden_state.numpy()[mask],
                                   ours["sequence_output"][mask], atol=1e-4)
        np.testing.assert_allclose(out.pooler_output.numpy(), ours["pooled_output"], atol=1e-4)
    else:
        out, _ = run_transformers(transformers.BertForPreTraining, tmp_path, x)
        np.testing.assert_allclose(out.seq_relationship_logits.numpy(), ours["nsp_logits"],
                                   atol=1e-4)
        positions = np.array([[1, 2], [5, 6]])
        mlm = np.take_along_axis(out.prediction_logits.numpy(), positions[..., None], axis=1)
        np.testing.assert_allclose(mlm, ours["mlm_logits"], atol=1e-4)


def test_transformers_label_names_and_back(tmp_path):
    import transformers

    model = heads.make_model("tagger")
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    kbert.save_model(model, str(tmp_path / "hf"), format="huggingface", label_names=labels)
    hf = transformers.BertForTokenClassification.from_pretrained(str(tmp_path / "hf"))
    assert hf.config.id2label[1] == "B-PER" and hf.config.label2id["I-LOC"] == 4
    # A model saved by transformers itself (no pooler in token classification) reads back.
    hf.save_pretrained(str(tmp_path / "saved"))
    heads.write_vocab(tmp_path / "saved")
    back = kbert.load_model(str(tmp_path / "saved"))
    np.testing.assert_array_equal(back.output_dense.kernel.numpy(),
                                  model.output_dense.kernel.numpy())
    x = heads.inputs()
    np.testing.assert_array_equal(heads.outputs(back, x)["output"],
                                  heads.outputs(model, x)["output"])


def test_keras_hub_loads_backbone_and_classifier(tmp_path):
    model = heads.make_model("classifier")
    (tmp_path / "vocab").mkdir()
    kbert.save_model(model, str(tmp_path / "preset"), format="keras_hub",
                     vocab_file=heads.write_vocab(tmp_path / "vocab"))
    preset = str(tmp_path / "preset")
    assert os.path.exists(os.path.join(preset, "task.json"))
    x = heads.inputs()
    backbone = keras_hub.models.BertBackbone.from_preset(preset)
    ours = model.encoder(x)
    mask = x["padding_mask"].astype(bool)
    theirs = backbone(x)
    np.testing.assert_allclose(np.asarray(theirs["sequence_output"])[mask],
                               np.asarray(ours["sequence_output"])[mask], atol=1e-4)
    classifier = keras_hub.models.BertTextClassifier.from_preset(preset)
    np.testing.assert_allclose(classifier(x), model(x), atol=1e-4)
    # Its preprocessor is the one written with the vocabulary (uncased: lower-cased input).
    packed = classifier.preprocessor(["the said"])
    assert list(np.asarray(packed["token_ids"])[0, :4]) == [2, 5, 14, 3]


def test_reads_a_preset_that_keras_hub_saved(tmp_path):
    """keras-hub's own preset (no bert_config.json) into kbert, then out as Google's format."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=31, num_layers=2, num_heads=3, hidden_dim=12, intermediate_dim=20,
        max_sequence_length=16)
    rng = np.random.default_rng(4)
    for variable in backbone.weights:
        variable.assign(rng.normal(scale=0.2, size=variable.shape).astype("float32"))
    backbone.save_to_preset(str(tmp_path / "preset"))
    keras_hub.models.BertTokenizer(vocabulary=heads.write_vocab(tmp_path),
                                   lowercase=True).save_to_preset(str(tmp_path / "preset"))
    encoder = kbert.load_model(str(tmp_path / "preset"))
    assert isinstance(encoder, kbert.BertEncoder) and encoder.bert_config.num_hidden_layers == 2
    x = heads.inputs()
    mask = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(encoder(x)["sequence_output"])[mask],
                               np.asarray(backbone(x)["sequence_output"])[mask], atol=1e-5)
    kbert.convert(str(tmp_path / "preset"), str(tmp_path / "google"))
    assert sorted(os.listdir(tmp_path / "google")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "checkpoint", "run_manifest.json", "vocab.txt"]


def test_transformers_trains_a_multi_label_head_with_binary_cross_entropy(tmp_path):
    import torch
    import transformers

    model = heads.make_model("multi_label")
    kbert.save_model(model, str(tmp_path), format="huggingface")
    x = heads.inputs()
    targets = np.array([[1, 0, 0, 1], [0, 0, 1, 0]], np.float32)
    hf = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path)).eval()
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                 token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
                 labels=torch.tensor(targets))
    # transformers' loss for the problem_type is kbert's compile default on the same logits.
    model.compile()
    expected = model.loss(targets, heads.outputs(model, x)["output"])
    np.testing.assert_allclose(out.loss.numpy(), expected, atol=1e-5)
