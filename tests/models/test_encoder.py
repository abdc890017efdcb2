import keras
import numpy as np
import pytest

import kbert
from tests import harness


def inputs(batch=2, seq=7, seed=0, vocab=31):
    rng = np.random.RandomState(seed)
    mask = np.ones((batch, seq), "int32")
    mask[1, seq - 2:] = 0
    return {
        "token_ids": rng.randint(1, vocab, (batch, seq)).astype("int32") * mask,
        "segment_ids": (np.arange(seq)[None, :] >= seq // 2).astype("int32") * mask,
        "padding_mask": mask,
    }


def test_outputs(tiny_encoder):
    out = tiny_encoder(inputs())
    assert out["sequence_output"].shape == (2, 7, 12)
    assert out["pooled_output"].shape == (2, 12)
    assert out["embedding_output"].shape == (2, 7, 12)
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])


def test_padding_does_not_change_real_tokens(tiny_encoder):
    short = inputs(batch=2, seq=5)
    padded = {k: np.pad(v, ((0, 0), (0, 4))) for k, v in short.items()}
    a = tiny_encoder(short)["sequence_output"].numpy()
    b = tiny_encoder(padded)["sequence_output"].numpy()[:, :5]
    mask = short["padding_mask"].astype(bool)
    np.testing.assert_allclose(a[mask], b[mask], atol=1e-6)


def test_config_roundtrip_and_bert_config(tiny_encoder, tiny_config):
    harness.assert_config_roundtrip(tiny_encoder)
    assert tiny_encoder.bert_config == tiny_config


def test_saves_and_loads(tiny_encoder, tmp_path):
    harness.assert_saves_and_loads(tiny_encoder, inputs(), str(tmp_path / "encoder.keras"))


def test_variable_length(tiny_encoder):
    harness.assert_variable_length(tiny_encoder, lambda n: inputs(seq=n), [3, 9, 16])


def test_longer_than_max_position_embeddings_fails(tiny_encoder):
    with pytest.raises(ValueError, match="sequence length 17, longer than max_sequence_length"):
        tiny_encoder(inputs(seq=17))


def test_trains_one_step(tiny_encoder):
    x = inputs()
    classifier_input = tiny_encoder.input
    logits = keras.layers.Dense(2)(tiny_encoder(classifier_input)["pooled_output"])
    model = keras.Model(classifier_input, logits)
    harness.assert_trains_one_step(model, x, np.array([0, 1]),
                                   keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def test_separate_attention_dropout_rate():
    encoder = kbert.BertEncoder(31, 1, 3, 12, 20, dropout=0.1, attention_dropout=0.3,
                                max_sequence_length=16)
    layer = encoder.transformer_layers[0]
    assert layer._attention_probs_dropout.rate == 0.3
    assert layer._feedforward_dropout.rate == 0.1
    # Attention dropout is live in training: outputs vary between calls, not at inference.
    x = inputs()
    assert not np.allclose(encoder(x, training=True)["sequence_output"],
                           encoder(x, training=True)["sequence_output"])
    np.testing.assert_array_equal(encoder(x)["sequence_output"], encoder(x)["sequence_output"])


def test_rejects_bad_hyper_parameters():
    with pytest.raises(ValueError, match=r"hidden_size \(10\) must be divisible"):
        kbert.BertEncoder(31, 1, 3, 10, 20)
    with pytest.raises(ValueError, match="hidden_act must be one of"):
        kbert.BertEncoder(31, 1, 3, 12, 20, activation="swish")


def test_mixed_bfloat16(tiny_config):
    keras.utils.set_random_seed(0)
    reference = kbert.BertEncoder(**tiny_config.encoder_kwargs())
    mixed = kbert.BertEncoder(**tiny_config.encoder_kwargs(), dtype="mixed_bfloat16")
    mixed.set_weights(reference.get_weights())
    out = mixed(inputs())
    assert out["sequence_output"].dtype == "bfloat16"
    assert all(w.dtype == "float32" for w in mixed.weights)
    np.testing.assert_allclose(np.asarray(out["pooled_output"], "float32"),
                               reference(inputs())["pooled_output"], atol=0.05)


def test_jit_compile_matches_eager(tiny_encoder):
    x = inputs()
    tiny_encoder.compile(jit_compile=True)
    jitted = tiny_encoder.predict(x, verbose=0)
    np.testing.assert_allclose(jitted["sequence_output"], tiny_encoder(x)["sequence_output"],
                               atol=1e-5)


def test_first_token_only_layer_equals_full_layer_first_position(tiny_encoder):
    x = inputs(batch=3, seq=9, seed=4)
    hidden = tiny_encoder(x, training=False)["encoder_outputs"][0]
    layer = tiny_encoder.transformer_layers[1]
    # A custom attention mask on top of padding: row 0 ([CLS]) may not see positions 2 and 5.
    attention = np.ones((3, 9, 9), "int32")
    attention[:, 0, [2, 5]] = 0
    for kwargs in ({"padding_mask": x["padding_mask"]},
                   {"padding_mask": x["padding_mask"], "attention_mask": attention},
                   {"attention_mask": attention}):
        full = layer(hidden, training=False, **kwargs)
        first = layer(hidden, training=False, first_token_only=True, **kwargs)
        assert first.shape == (3, 1, hidden.shape[-1])
        np.testing.assert_allclose(first, full[:, :1], atol=1e-5, err_msg=str(sorted(kwargs)))
    # The masks matter: dropping the attention mask changes [CLS]'s output.
    unmasked = layer(hidden, padding_mask=x["padding_mask"], first_token_only=True)
    assert np.abs(unmasked - first).max() > 1e-3
