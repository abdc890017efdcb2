import keras
import numpy as np
import pytest

import kbert
from tests import harness
from tests.models.test_encoder import inputs


def pretrainer_inputs():
    return {**inputs(), "mask_positions": np.array([[1, 3, 5], [2, 4, 0]], "int32")}


def test_outputs_and_tied_embeddings(tiny_encoder):
    model = kbert.BertPretrainer(tiny_encoder)
    out = model(pretrainer_inputs())
    assert out["mlm_logits"].shape == (2, 3, 31)
    assert out["nsp_logits"].shape == (2, 2)
    assert model.mlm_head.token_embedding is tiny_encoder.token_embedding
    # Tied: the word table is one variable, so the pretrainer has no [hidden, vocab] kernel.
    assert not [w for w in model.weights if tuple(w.shape) == (12, 31)]


def test_saves_loads_and_reties(tiny_encoder, tmp_path):
    model = kbert.BertPretrainer(tiny_encoder)
    loaded = harness.assert_saves_and_loads(model, pretrainer_inputs(),
                                            str(tmp_path / "pretrainer.keras"))
    assert loaded.mlm_head.token_embedding is loaded.encoder.token_embedding
    table = loaded.encoder.token_embedding.embeddings
    table.assign(table.numpy() * 2)  # a change to the table must reach the MLM output
    assert not np.allclose(loaded(pretrainer_inputs())["mlm_logits"],
                           model(pretrainer_inputs())["mlm_logits"])


def test_config_roundtrip(tiny_encoder):
    clone = harness.assert_config_roundtrip(kbert.BertPretrainer(tiny_encoder))
    assert clone.bert_config == tiny_encoder.bert_config


def test_fresh_heads_on_a_release_without_heads(tiny_google_dir, tiny_config):
    with pytest.raises(ValueError, match="heads='fresh'.*--init_heads=fresh"):
        kbert.BertPretrainer.from_google_checkpoint(tiny_google_dir)
    keras.utils.set_random_seed(1)
    model = kbert.BertPretrainer.from_google_checkpoint(tiny_google_dir, heads="fresh")
    encoder = kbert.BertEncoder.from_google_checkpoint(tiny_google_dir)
    for ours, theirs in zip(model.encoder.weights, encoder.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)
    assert model.mlm_head.token_embedding is model.encoder.token_embedding
    # Google's initializer: truncated normal (at 2 stddev) with initializer_range, zero biases.
    for kernel in (model.mlm_head._intermediate_dense.kernel, model.nsp_head.kernel):
        values = kernel.numpy()
        assert np.abs(values).max() <= 2 * tiny_config.initializer_range
        assert 0.5 * tiny_config.initializer_range < values.std() < tiny_config.initializer_range
    assert not model.mlm_head._bias.numpy().any() and not model.nsp_head.bias.numpy().any()
    with pytest.raises(ValueError, match="heads must be one of"):
        kbert.BertPretrainer.from_google_checkpoint(tiny_google_dir, heads="random")


def test_without_a_sentence_head(tiny_encoder, tmp_path):
    model = kbert.BertPretrainer(tiny_encoder, sentence_head=False)
    assert sorted(model(pretrainer_inputs())) == ["mlm_logits"] and model.nsp_head is None
    clone = harness.assert_config_roundtrip(model)
    assert not clone.sentence_head
    harness.assert_saves_and_loads(model, pretrainer_inputs(), str(tmp_path / "mlm.keras"))
