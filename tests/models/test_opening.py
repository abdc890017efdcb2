"""open_model: every kind of input gives the model, its config, its vocab and its settings."""

import json
import logging
import os
import shutil

import numpy as np
import pytest

import kbert
from kbert import artifacts
from kbert.checkpoints import tf1
from kbert.models import opening
from tests.conftest import TINY_VOCAB

WORDS = "bert/embeddings/word_embeddings"


def google_inputs(release, tmp):
    """(path, expected checkpoint_file) of each way to name a Google checkpoint."""
    prefix = os.path.join(release, tf1.RELEASE_PREFIX)
    training = tmp / "training"  # a training directory: model.ckpt-N and its state file
    checkpoint = tf1.GoogleCheckpoint.open(release)
    tf1.write_google_release(str(training / "model.ckpt-5"),
                             {n: checkpoint.tensor(n) for n in checkpoint.shapes()},
                             checkpoint.config, checkpoint.vocab_file)
    return {"release_dir": (release, prefix + ".index"), "prefix": (prefix, prefix + ".index"),
            "index_file": (prefix + ".index", prefix + ".index"),
            "training_dir": (str(training), str(training / "model.ckpt-5.index"))}


@pytest.fixture(scope="module")
def inputs(tiny_google_dir, tmp_path_factory):
    """kind -> (path, expected kind, expected checkpoint_file, expected settings)."""
    tmp = tmp_path_factory.mktemp("opening")
    table = {name: (path, "google", index, {})
             for name, (path, index) in google_inputs(tiny_google_dir, tmp).items()}
    classifier = kbert.load_model(tiny_google_dir)  # an encoder; give it a head
    classifier = kbert.BertClassifier(classifier, 3, multi_label=True)
    run = tmp / "run"  # a recipe's output directory
    run.mkdir()
    classifier.save(str(run / artifacts.MODEL_FILE))
    shutil.copy(os.path.join(tiny_google_dir, artifacts.VOCAB_FILE), run)
    (run / artifacts.EXPORT_SETTINGS_FILE).write_text(json.dumps({"max_seq_length": 9}))
    keras_file = str(run / artifacts.MODEL_FILE)
    table["recipe_dir"] = (str(run), "keras", keras_file, {"max_seq_length": 9})
    table["keras_file"] = (keras_file, "keras", keras_file, {"max_seq_length": 9})
    kbert.convert_google_to_huggingface(tiny_google_dir, str(tmp / "hf"))
    table["huggingface"] = (str(tmp / "hf"), "huggingface", str(tmp / "hf/model.safetensors"), {})
    kbert.convert(tiny_google_dir, str(tmp / "kh"), format="keras_hub")
    table["keras_hub"] = (str(tmp / "kh"), "keras_hub", str(tmp / "kh"), {})
    return table


@pytest.mark.parametrize("name", ["release_dir", "prefix", "index_file", "training_dir",
                                  "recipe_dir", "keras_file", "huggingface", "keras_hub"])
def test_opens_every_kind(inputs, name):
    path, kind, checkpoint_file, settings = inputs[name]
    source = opening.open_model(path)
    assert (source.kind, source.checkpoint_file, source.settings) == (
        kind, checkpoint_file, settings)
    assert source.bert_config.vocab_size == 31 and source.bert_config.hidden_size == 12
    assert source.vocab().tokens == TINY_VOCAB
    assert source.multi_label == (kind == "keras")
    checkpoint = source.google_checkpoint()
    assert checkpoint.shapes()[WORDS] == (31, 12)
    assert checkpoint.vocab_file == source.vocab_file
    assert source.google_checkpoint() is checkpoint  # read once
    head = {"keras": "kbert>BertClassifier"}.get(kind)
    assert tf1.find_head(checkpoint.shapes()) == head
    # Every kind holds the same tiny release's word table.
    reference = tf1.GoogleCheckpoint.open(inputs["release_dir"][0]).tensor(WORDS)
    np.testing.assert_array_equal(checkpoint.tensor(WORDS), reference)


def test_a_release_name_and_the_arguments_given(tiny_google_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("KBERT_HOME", str(tmp_path))  # the release is in the cache: no download
    shutil.copytree(tiny_google_dir, tmp_path / "uncased_L-12_H-768_A-12")
    source = opening.open_model("uncased_L-12_H-768_A-12")
    assert source.kind == "google" and source.path == "uncased_L-12_H-768_A-12"
    assert source.vocab_file == str(tmp_path / "uncased_L-12_H-768_A-12" / "vocab.txt")
    vocab = tmp_path / "other.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB))
    config = tmp_path / "config.json"
    config.write_text(source.bert_config.to_json_string().replace('"gelu"', '"relu"'))
    given = opening.open_model(tiny_google_dir, str(vocab), str(config))
    assert given.vocab_file == str(vocab) and given.google_checkpoint().vocab_file == str(vocab)
    assert given.bert_config.hidden_act == "relu"


def test_the_minilm_huggingface_directory_is_opened_without_reading_its_weights(minilm_dir,
                                                                               caplog):
    with caplog.at_level(logging.INFO):
        source = opening.open_model(minilm_dir)
        assert source.kind == "huggingface" and source.bert_config.hidden_size == 384
        assert source.vocab_file == os.path.join(minilm_dir, "vocab.txt")
        assert source._checkpoint is None  # the weights wait for google_checkpoint()
        assert source.google_checkpoint().config is source.bert_config
    # Its erf GELU becomes Google's tanh one, said once (the config is read once).
    assert caplog.text.count("hidden_act 'gelu' (erf) written as Google's 'gelu'") == 1


def test_anything_else_is_refused_naming_what_is_accepted(tmp_path):
    accepted = ["Google release directory, training directory or checkpoint prefix",
                "kbert.list_presets()", "recipe's output directory", ".keras file",
                "Hugging Face BERT directory", "keras-hub preset directory"]
    (tmp_path / "notes.txt").write_text("hello")
    for path, error, start in [(tmp_path, ValueError, "not a model kbert reads"),
                               (tmp_path / "notes.txt", ValueError, "not a model kbert reads"),
                               (tmp_path / "missing", FileNotFoundError, "not found")]:
        with pytest.raises(error) as raised:
            opening.open_model(path)
        message = str(raised.value)
        assert message.startswith(f"{path}: {start} — expected ") and "\n" not in message
        assert all(kind in message for kind in accepted), message
    with pytest.raises(FileNotFoundError, match="missing.keras: not found"):
        opening.open_model(tmp_path / "missing.keras")


def test_a_model_without_a_vocab(tiny_google_dir, tmp_path):
    for name in os.listdir(tiny_google_dir):
        if name != artifacts.VOCAB_FILE:
            shutil.copy(os.path.join(tiny_google_dir, name), tmp_path)
    source = opening.open_model(tmp_path)
    assert source.vocab_file is None
    with pytest.raises(ValueError, match=f"no vocab.txt beside {tmp_path}; pass vocab_file"):
        source.vocab()
