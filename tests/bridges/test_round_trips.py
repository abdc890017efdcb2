"""kbert -> Google / Hugging Face / keras-hub -> kbert, for every head: bit-identical weights."""

import json

import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.checkpoints import tf1
from tests.bridges import heads

# The Google names that each head writes, with their shapes on the tiny config (H=12).
HEAD_TENSORS = {
    "encoder": {},
    "pretrainer": {"cls/seq_relationship/output_weights": [2, 12],
                   "cls/predictions/output_bias": [31]},
    "classifier": {"output_weights": [3, 12], "output_bias": [3]},
    "regression": {"output_weights": [1, 12], "output_bias": [1]},
    "multi_label": {"output_weights": [4, 12], "output_bias": [4]},
    "span_labeler": {"cls/squad/output_weights": [2, 12], "cls/squad/output_bias": [2]},
    "tagger": {"cls/ner/output_weights": [5, 12], "cls/ner/output_bias": [5]},
    "tagger_crf": {"cls/ner/output_weights": [5, 12], "cls/ner/crf/transitions": [5, 5],
                   "cls/ner/crf/start_transitions": [5], "cls/ner/crf/end_transitions": [5]},
}


def assert_same_model(first, second):
    assert type(first) is type(second)
    assert getattr(first, "multi_label", False) == getattr(second, "multi_label", False)
    a, b = heads.weights(first), heads.weights(second)
    assert sorted(a) == sorted(b)
    for path in a:
        np.testing.assert_array_equal(a[path], b[path], err_msg=path)
    x = heads.inputs()
    for name, value in heads.outputs(first, x).items():
        np.testing.assert_array_equal(value, heads.outputs(second, x)[name], err_msg=name)


@pytest.mark.parametrize("kind", sorted(heads.BUILDERS))
def test_google_round_trip(kind, tmp_path):
    model = heads.make_model(kind)
    kbert.save_google_checkpoint(model, str(tmp_path / "out" / "bert_model.ckpt"),
                                 vocab_file=heads.write_vocab(tmp_path))
    shapes = dict(tf.train.list_variables(str(tmp_path / "out" / "bert_model.ckpt")))
    for name, shape in HEAD_TENSORS[kind].items():
        assert shapes[name] == shape, name
    assert ("cls/ner/crf/transitions" in shapes) == (kind == "tagger_crf")
    # Google's format has no place for multi_label: it is told on the way back.
    assert_same_model(model, kbert.load_model(str(tmp_path / "out"),
                                              multi_label=kind == "multi_label"))


@pytest.mark.parametrize("format", ["huggingface", "keras_hub"])
@pytest.mark.parametrize("kind", sorted(heads.BUILDERS))
def test_foreign_round_trip(kind, format, tmp_path):
    model = heads.make_model(kind)
    kbert.save_model(model, str(tmp_path / format), format=format,
                     vocab_file=heads.write_vocab(tmp_path))
    assert_same_model(model, kbert.load_model(str(tmp_path / format)))


def test_task_model_from_release_gets_a_new_head_but_a_partial_head_fails(tmp_path):
    encoder = heads.make_model("encoder")
    kbert.save_google_checkpoint(encoder, str(tmp_path / "release" / "bert_model.ckpt"))
    tagger = kbert.BertTokenClassifier.from_google_checkpoint(str(tmp_path / "release"), 5)
    np.testing.assert_array_equal(tagger.output_dense.bias.numpy(), np.zeros(5))
    # A CRF tagger's checkpoint read by a tagger without CRF: the CRF tensors are not
    # `bert/` weights, so they are skipped; the other way round they are missing.
    crf = heads.make_model("tagger_crf")
    kbert.save_google_checkpoint(crf, str(tmp_path / "crf" / "bert_model.ckpt"))
    plain = kbert.BertTokenClassifier.from_google_checkpoint(str(tmp_path / "crf"), 5)
    np.testing.assert_array_equal(plain.output_dense.kernel.numpy(),
                                  crf.output_dense.kernel.numpy())
    kbert.save_google_checkpoint(plain, str(tmp_path / "plain" / "bert_model.ckpt"))
    with pytest.raises(ValueError, match=r"missing from the checkpoint \(3\):\n.*"
                                         r"cls/ner/crf/transitions"):
        kbert.BertTokenClassifier.from_google_checkpoint(str(tmp_path / "plain"), 5,
                                                         use_crf=True)


def test_convert_learns_multi_label_from_the_keras_model(tmp_path):
    """A recipe's output dir (model.keras) converts to a multi-label Hugging Face model."""
    model = heads.make_model("multi_label")
    (tmp_path / "run").mkdir()
    model.save(str(tmp_path / "run" / "model.keras"))
    kbert.convert(str(tmp_path / "run"), str(tmp_path / "hf"), format="huggingface")
    config = json.loads((tmp_path / "hf" / "config.json").read_text(encoding="utf-8"))
    assert config["problem_type"] == "multi_label_classification"
    assert config["id2label"] == {str(i): f"LABEL_{i}" for i in range(4)}
    kbert.convert(str(tmp_path / "run"), str(tmp_path / "kh"), format="keras_hub")
    assert kbert.load_model(str(tmp_path / "kh")).multi_label
    # Google's format: recorded nowhere, so told on the way back (or out).
    kbert.convert(str(tmp_path / "run"), str(tmp_path / "google"))
    assert not kbert.load_model(str(tmp_path / "google")).multi_label
    kbert.convert(str(tmp_path / "google"), str(tmp_path / "hf2"), format="huggingface",
                  multi_label=True, label_names=["a", "b", "c", "d"])
    back = kbert.load_model(str(tmp_path / "hf2"))
    assert back.multi_label and back.num_classes == 4
    kbert.save_model(heads.make_model("span_labeler"), str(tmp_path / "squad"),
                     format="huggingface")
    with pytest.raises(ValueError, match="multi_label applies to a classifier head, not to "
                                         "BertForQuestionAnswering"):
        kbert.convert(str(tmp_path / "squad"), str(tmp_path / "y"), format="huggingface",
                      multi_label=True)
    with pytest.raises(ValueError, match="multi_label applies to a classifier head"):
        kbert.load_model(str(tmp_path / "squad"), multi_label=True)


@pytest.mark.parametrize("kind", sorted(heads.BUILDERS))
def test_checkpoint_is_checked_against_its_config_as_a_model_load_checks_it(kind):
    """What converters and the vocab expansion check without building the model."""
    model = heads.make_model(kind)
    tensors = tf1.google_tensors(model)
    tf1.check_checkpoint(tf1.GoogleCheckpoint.from_tensors(tensors, model.bert_config, kind))
    query = "bert/encoder/layer_0/attention/self/query/kernel"
    broken = dict(tensors, **{query: tensors[query][:, :6]})
    del broken["bert/encoder/layer_1/output/dense/bias"]
    with pytest.raises(ValueError, match=(
            r"checkpoint does not match the config .*\n  missing from the checkpoint \(1\):\n"
            r"    bert/encoder/layer_1/output/dense/bias \(for transformer_layer_1/"
            r"feedforward_output_dense/bias, shape \[12\]\)\n  shape mismatch \(1\):\n"
            rf"    {query}: checkpoint \[12, 6\], config expects \[12, 12\]")):
        tf1.check_checkpoint(tf1.GoogleCheckpoint.from_tensors(broken, model.bert_config, kind))
