import functools
import os
import shutil

import numpy as np
import tensorflow as tf

from kbert.checkpoints import tf1
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


def release_copy(tiny_google_dir, tmp_path, change=None):
    """A copy of the tiny release whose tensors `change` (a dict of name -> array) edits."""
    release = tmp_path / "release"
    shutil.copytree(tiny_google_dir, release)
    if change is not None:
        prefix = str(release / "bert_model.ckpt")
        reader = tf.train.load_checkpoint(prefix)
        tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
        change(tensors)
        for name in os.listdir(release):
            if name.startswith("bert_model.ckpt"):
                os.remove(release / name)
        tf1.write_tf1_checkpoint(prefix, tensors)
    return release


def test_release_missing_a_variable_is_refused(tiny_google_dir, tmp_path):
    release = release_copy(tiny_google_dir, tmp_path,
                           lambda t: t.pop("bert/encoder/layer_0/output/dense/bias"))
    result = run(f"--input={release}", f"--output_dir={tmp_path}/hf", "--to=huggingface")
    assert result.returncode == 2
    assert (f"error: {release}/bert_model.ckpt: checkpoint does not match the config"
            in result.stderr)
    assert "missing from the checkpoint (1):\n    bert/encoder/layer_0/output/dense/bias" \
        in result.stderr
    assert not os.path.exists(tmp_path / "hf")


def test_release_with_a_wrongly_shaped_variable_is_refused(tiny_google_dir, tmp_path):
    name = "bert/encoder/layer_0/attention/self/query/kernel"
    release = release_copy(tiny_google_dir, tmp_path,
                           lambda t: t.update({name: t[name][:, :6]}))
    result = run(f"--input={release}", f"--output_dir={tmp_path}/hf", "--to=huggingface")
    assert result.returncode == 2
    assert f"{name}: checkpoint [12, 6], config expects [12, 12]" in result.stderr


def test_vocab_with_a_blank_line_is_refused(tiny_google_dir, tmp_path):
    release = release_copy(tiny_google_dir, tmp_path)
    tokens = (release / "vocab.txt").read_text(encoding="utf-8").splitlines()
    tokens[9] = ""
    (release / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    result = run(f"--input={release}", f"--output_dir={tmp_path}/hf", "--to=huggingface")
    assert result.returncode == 2
    assert f"error: {release}/vocab.txt:10: empty token" in result.stderr


def test_vocab_of_another_size_than_the_config_is_refused(tiny_google_dir, tmp_path):
    release = release_copy(tiny_google_dir, tmp_path)
    with open(release / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("newword\n")
    result = run(f"--input={release}", f"--output_dir={tmp_path}/hf", "--to=huggingface")
    assert result.returncode == 2
    assert (f"error: {release}/vocab.txt: 32 tokens, but {release} has vocab_size=31"
            in result.stderr)


def test_input_and_its_alias_together_are_refused(tiny_google_dir, minilm_dir, tmp_path):
    result = run(f"--input={tiny_google_dir}", f"--input_dir={minilm_dir}",
                 f"--output_dir={tmp_path}/o")
    assert result.returncode == 2
    assert "error: --input_dir is another name of --input; pass one of them" in result.stderr


def test_label_names_without_a_labelled_head_are_refused(tiny_google_dir, tmp_path):
    result = run(f"--input={tiny_google_dir}", f"--output_dir={tmp_path}/hf", "--to=huggingface",
                 "--label_names=a,b")
    assert result.returncode == 2
    assert ("error: label_names (--label_names) name the outputs of a classifier or tagger "
            f"head; {tiny_google_dir}/bert_model.ckpt has no head") in result.stderr
    assert not os.path.exists(tmp_path / "hf")


def test_huggingface_config_that_is_not_json_names_the_file(minilm_dir, tmp_path):
    hf = tmp_path / "hf"
    shutil.copytree(minilm_dir, hf)
    (hf / "config.json").write_text("{ not json")
    result = run(f"--input={hf}", f"--output_dir={tmp_path}/o")
    assert result.returncode == 2
    assert (f"error: {hf}/config.json:1: not valid JSON (Expecting property name enclosed in "
            "double quotes at column 3)") in result.stderr
