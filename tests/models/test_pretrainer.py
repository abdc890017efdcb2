import numpy as np

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
