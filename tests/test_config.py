import json

import pytest

import kbert
from tests.conftest import TINY_CONFIG


def write(tmp_path, text):
    path = tmp_path / "bert_config.json"
    path.write_text(text)
    return str(path)


def test_json_round_trip(tmp_path):
    config = kbert.BertConfig(**TINY_CONFIG)
    path = write(tmp_path, config.to_json_string())
    assert kbert.BertConfig.from_json_file(path) == config
    assert json.loads(config.to_json_string()) == TINY_CONFIG


def test_reads_google_release_config_with_extra_keys(tmp_path):
    # Google's multilingual/Chinese configs carry keys BERT itself does not use.
    values = dict(TINY_CONFIG, directionality="bidi", pooler_fc_size=12, pooler_type="first")
    config = kbert.BertConfig.from_json_file(write(tmp_path, json.dumps(values)))
    assert config.hidden_size == 12


def test_reads_a_config_saved_with_a_byte_order_mark(tmp_path):
    # As Windows editors save it; Python's json refuses the mark.
    path = tmp_path / "bert_config.json"
    path.write_text("\ufeff" + json.dumps(TINY_CONFIG), encoding="utf-8")
    assert kbert.BertConfig.from_json_file(str(path)) == kbert.BertConfig(**TINY_CONFIG)


def test_encoder_kwargs_round_trip():
    config = kbert.BertConfig(**TINY_CONFIG)
    kwargs = config.encoder_kwargs()
    assert kwargs["vocabulary_size"] == 31 and kwargs["attention_dropout"] == 0.1
    assert kbert.BertConfig.from_encoder_kwargs(kwargs) == config


@pytest.mark.parametrize("change, message", [
    (dict(hidden_size=13), "hidden_size (13) must be divisible by num_attention_heads (3)"),
    (dict(hidden_act="swiglu"), "hidden_act must be one of"),
    (dict(vocab_size=0), "vocab_size must be a positive integer, got 0"),
    (dict(num_hidden_layers="2"), "num_hidden_layers must be a positive integer, got '2'"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob must be a number in [0, 1)"),
    (dict(initializer_range=-1), "initializer_range must be a positive number"),
])
def test_rejects_bad_values_naming_file_and_field(tmp_path, change, message):
    path = write(tmp_path, json.dumps(dict(TINY_CONFIG, **change)))
    with pytest.raises(ValueError) as error:
        kbert.BertConfig.from_json_file(path)
    assert path in str(error.value) and message in str(error.value)


def test_missing_key(tmp_path):
    values = dict(TINY_CONFIG)
    del values["num_attention_heads"]
    with pytest.raises(ValueError, match="missing key.*'num_attention_heads'"):
        kbert.BertConfig.from_json_file(write(tmp_path, json.dumps(values)))


def test_not_json(tmp_path):
    path = write(tmp_path, '{\n  "vocab_size": 31,\n  oops\n}')
    with pytest.raises(ValueError, match=r"bert_config.json:3: not valid JSON"):
        kbert.BertConfig.from_json_file(path)


def test_not_an_object(tmp_path):
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        kbert.BertConfig.from_json_file(write(tmp_path, "[1, 2]"))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json: BERT config file not found"):
        kbert.BertConfig.from_json_file(str(tmp_path / "nope.json"))
