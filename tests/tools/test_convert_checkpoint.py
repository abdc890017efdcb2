import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "convert_checkpoint.py")


def run(*args):
    result = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                            timeout=300)
    return result


def test_converts_both_ways(minilm_dir, tmp_path):
    google, hf = str(tmp_path / "google"), str(tmp_path / "hf")
    assert run(f"--input_dir={minilm_dir}", f"--output_dir={google}").returncode == 0
    assert sorted(os.listdir(google)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                          "bert_model.ckpt.index", "checkpoint", "vocab.txt"]
    result = run(f"--input_dir={google}", f"--output_dir={hf}",
                 "--direction=google_to_huggingface")
    assert result.returncode == 0, result.stderr
    from safetensors.numpy import load_file
    weights = load_file(os.path.join(hf, "model.safetensors"))
    reader = tf.train.load_checkpoint(os.path.join(google, "bert_model.ckpt"))
    np.testing.assert_array_equal(weights["bert.encoder.layer.2.output.dense.weight"].T,
                                  reader.get_tensor("bert/encoder/layer_2/output/dense/kernel"))


def test_usage_errors(tmp_path):
    result = run("--output_dir=x")
    assert result.returncode != 0 and "input_dir" in result.stderr
    result = run(f"--input_dir={tmp_path}", f"--output_dir={tmp_path}/o")
    assert result.returncode != 0 and "config.json: not found" in result.stderr
