import functools
import os

import numpy as np
import tensorflow as tf

from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

run = functools.partial(run_tool, "convert_checkpoint.py")


def test_converts_both_ways(minilm_dir, tmp_path):
    google, hf = str(tmp_path / "google"), str(tmp_path / "hf")
    # The real entry point, in a fresh process; the other runs are in-process.
    result = run_tool_in_subprocess("convert_checkpoint.py", f"--input_dir={minilm_dir}",
                                    f"--output_dir={google}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(google)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                          "bert_model.ckpt.index", "checkpoint",
                                          "run_manifest.json", "vocab.txt"]
    result = run(f"--input={google}", f"--output_dir={hf}", "--to=huggingface")
    assert result.returncode == 0, result.stderr
    from safetensors.numpy import load_file
    weights = load_file(os.path.join(hf, "model.safetensors"))
    reader = tf.train.load_checkpoint(os.path.join(google, "bert_model.ckpt"))
    np.testing.assert_array_equal(weights["bert.encoder.layer.2.output.dense.weight"].T,
                                  reader.get_tensor("bert/encoder/layer_2/output/dense/kernel"))


def test_fine_tuned_classifier_to_huggingface_and_keras_hub(tmp_path):
    # A recipe's --output_dir: model.keras and vocab.txt.
    import keras_hub
    import torch
    import transformers

    from tests.bridges import heads

    model = heads.make_model("classifier")
    model.save(str(tmp_path / "model.keras"))
    heads.write_vocab(tmp_path)
    x = heads.inputs()
    result = run(f"--input={tmp_path}", f"--output_dir={tmp_path}/hf", "--to=huggingface",
                 "--label_names=no,maybe,yes")
    assert result.returncode == 0, result.stderr
    hf = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path / "hf"))
    assert hf.config.id2label == {0: "no", 1: "maybe", 2: "yes"}
    with torch.no_grad():
        logits = hf.eval()(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                           token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
                           attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long)).logits
    np.testing.assert_allclose(logits.numpy(), model(x), atol=1e-4)
    result = run(f"--input={tmp_path}", f"--output_dir={tmp_path}/kh", "--to=keras_hub")
    assert result.returncode == 0, result.stderr
    classifier = keras_hub.models.BertTextClassifier.from_preset(str(tmp_path / "kh"))
    np.testing.assert_allclose(classifier(x), model(x), atol=1e-4)


def test_usage_errors(tmp_path):
    result = run("--output_dir=x")
    assert result.returncode != 0 and "input" in result.stderr
    result = run(f"--input={tmp_path}", f"--output_dir={tmp_path}/o")
    assert result.returncode != 0 and "not a model kbert reads" in result.stderr
    result = run(f"--input={tmp_path}", f"--output_dir={tmp_path}/o", "--to=onnx")
    assert result.returncode != 0 and "--to" in result.stderr
