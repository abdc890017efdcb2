"""Vocabulary expansion on the real uncased vocab (994 [unused] slots)."""

import os
import pathlib
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from bert import tokenization as google_tokenization

import kbert
from kbert import vocab_expansion
from kbert.checkpoints import tf1
from tests.conftest import TINY_RELEASE_CONFIG
from tests.oracle import google_bert
from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

NEW = ["covid-19", "SARS-CoV-2", "immunotherapy", "nanobody", "the"]  # "the" is present


@pytest.fixture(scope="module")
def real_vocab_release(minilm_dir, tmp_path_factory):
    """A tiny pretrainer (H=12) over the real 30,522-token vocab, saved as a Google release."""
    keras.utils.set_random_seed(1)
    config = kbert.BertConfig(**dict(TINY_RELEASE_CONFIG, vocab_size=30522))
    model = kbert.BertPretrainer(kbert.BertEncoder(**config.encoder_kwargs()))
    bias = model.mlm_head._bias
    bias.assign(np.random.RandomState(0).normal(0, 1, bias.shape).astype("float32"))
    out = str(tmp_path_factory.mktemp("release"))
    kbert.save_google_checkpoint(model, os.path.join(out, "bert_model.ckpt"),
                                 vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    return out


def lines(path):
    return pathlib.Path(path).read_text(encoding="utf-8").splitlines()


def google_tokenizer(vocab_file):
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return google_tokenization.FullTokenizer(vocab_file, do_lower_case=True)


def tensors(directory):
    reader = tf.train.load_checkpoint(os.path.join(directory, "bert_model.ckpt"))
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_replace_unused_slots(real_vocab_release, tmp_path):
    out = str(tmp_path / "expanded")
    expansion = vocab_expansion.expand(real_vocab_release, NEW, out)
    old_vocab = lines(os.path.join(real_vocab_release, "vocab.txt"))
    new_vocab = lines(os.path.join(out, "vocab.txt"))
    assert len(new_vocab) == len(old_vocab) == 30522
    assert expansion.skipped == ["the"]
    slots = [old_vocab.index(f"[unused{i}]") for i in range(4)]
    assert [expansion.added[t] for t in NEW[:4]] == slots
    assert sorted(expansion.never_split) == ["SARS-CoV-2", "covid-19"]
    assert lines(os.path.join(out, "added_tokens.txt")) == expansion.never_split

    # New tokens come out whole (hyphens, capitals), from kbert's tokenizer with the new files.
    tokenizer = kbert.FullTokenizer(os.path.join(out, "vocab.txt"), do_lower_case=True)
    assert tokenizer.tokenize("SARS-CoV-2 and covid-19 immunotherapy") == [
        "SARS-CoV-2", "and", "covid-19", "immunotherapy"]

    before, after = tensors(real_vocab_release), tensors(out)
    changed = np.zeros(30522, bool)
    changed[slots] = True
    for name in before:
        if name in (vocab_expansion.WORD_EMBEDDINGS, vocab_expansion.OUTPUT_BIAS):
            np.testing.assert_array_equal(after[name][~changed], before[name][~changed])
        else:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    # Mean of the pieces the *old* vocab gives, computed with Google's own tokenizer.
    old = google_tokenizer(os.path.join(real_vocab_release, "vocab.txt"))
    for token in NEW[:4]:
        ids = old.convert_tokens_to_ids(old.tokenize(token))
        assert len(ids) > 1
        row = expansion.added[token]
        for name in (vocab_expansion.WORD_EMBEDDINGS, vocab_expansion.OUTPUT_BIAS):
            np.testing.assert_allclose(after[name][row], before[name][ids].mean(0), rtol=1e-6)

    # The MLM head still ties to the (changed) word table.
    model = kbert.BertPretrainer.from_google_checkpoint(out)
    assert model.mlm_head.token_embedding is model.encoder.token_embedding
    np.testing.assert_array_equal(model.encoder.token_embedding.embeddings.numpy(),
                                  after[vocab_expansion.WORD_EMBEDDINGS])


def test_append_restores_in_google_modeling(real_vocab_release, tmp_path):
    out = str(tmp_path / "appended")
    expansion = vocab_expansion.expand(real_vocab_release, NEW, out, mode="append",
                                       init="normal")
    assert list(expansion.added.values()) == [30522, 30523, 30524, 30525]
    after = tensors(out)
    assert after[vocab_expansion.WORD_EMBEDDINGS].shape == (30526, 12)
    assert after[vocab_expansion.OUTPUT_BIAS].shape == (30526,)
    config = kbert.BertConfig.from_json_file(os.path.join(out, "bert_config.json"))
    assert config.vocab_size == 30526
    inputs = google_bert.random_inputs(config.to_dict(), seed=3)
    inputs["input_ids"][0, 1] = 30525  # the appended "nanobody"
    golden = google_bert.run_google_bert(config.to_dict(), os.path.join(out, "bert_model.ckpt"),
                                         **inputs)
    model = kbert.BertPretrainer.from_google_checkpoint(out)
    ours = model({"token_ids": inputs["input_ids"], "segment_ids": inputs["token_type_ids"],
                  "padding_mask": inputs["input_mask"],
                  "mask_positions": inputs["masked_lm_positions"]})
    assert golden["mlm_logits"].shape[-1] == 30526
    np.testing.assert_allclose(ours["mlm_logits"], golden["mlm_logits"], atol=1e-5)


def test_expand_model_fine_tune_save_reload(real_vocab_release, minilm_dir, tmp_path):
    model = kbert.BertPretrainer.from_google_checkpoint(real_vocab_release)
    vocab_file = os.path.join(minilm_dir, "vocab.txt")
    model, expansion = vocab_expansion.expand_model(model, vocab_file, NEW, mode="append")
    assert model.encoder.vocabulary_size == 30526
    assert model.mlm_head.token_embedding is model.encoder.token_embedding
    x = {"token_ids": np.array([[101, 30522, 30525, 102]], "int32"),
         "segment_ids": np.zeros((1, 4), "int32"), "padding_mask": np.ones((1, 4), "int32"),
         "mask_positions": np.array([[1, 2]], "int32")}
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss={"mlm_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        "nsp_logits": None})
    model.fit(x, {"mlm_logits": np.array([[30522, 30525]])}, epochs=1, verbose=0)
    out = str(tmp_path / "tuned")
    kbert.save_google_checkpoint(model, os.path.join(out, "bert_model.ckpt"))
    vocab_expansion.write_vocab(out, expansion)
    reloaded = kbert.BertPretrainer.from_google_checkpoint(out)
    for name in ("mlm_logits", "nsp_logits"):
        np.testing.assert_array_equal(reloaded(x)[name], model(x)[name])
    assert lines(os.path.join(out, "vocab.txt"))[30525] == "nanobody"


def test_expand_model_replace_in_place(real_vocab_release, minilm_dir):
    encoder = kbert.BertEncoder.from_google_checkpoint(real_vocab_release)
    before = encoder.token_embedding.embeddings.numpy()
    same, expansion = vocab_expansion.expand_model(
        encoder, os.path.join(minilm_dir, "vocab.txt"), ["nanobody"], init="keep")
    assert same is encoder and expansion.added == {"nanobody": 1}  # [unused0] is id 1
    np.testing.assert_array_equal(encoder.token_embedding.embeddings.numpy(), before)


def test_errors(real_vocab_release, minilm_dir, tmp_path):
    with pytest.raises(ValueError, match="new_tokens is empty"):
        vocab_expansion.expand(real_vocab_release, [], str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"new token #2 'two words' is empty or contains white"):
        vocab_expansion.expand(real_vocab_release, ["ok", "two words"], str(tmp_path / "b"))
    many = [f"newtoken{i}" for i in range(995)]
    real_vocab = lines(os.path.join(minilm_dir, "vocab.txt"))
    with pytest.raises(ValueError, match="995 new tokens but only 994 \\[unusedN\\] slots left"):
        vocab_expansion.plan_expansion(real_vocab, many)
    fallback = vocab_expansion.plan_expansion(real_vocab, many, fallback_to_append=True)
    assert fallback.added["newtoken994"] == 30522
    short = str(tmp_path / "short")
    shutil.copytree(real_vocab_release, short)
    pathlib.Path(short, "vocab.txt").write_text("\n".join(real_vocab[:-1]) + "\n")
    with pytest.raises(ValueError, match="has 30521 tokens but .* vocab_size 30522"):
        vocab_expansion.expand(short, ["nanobody"], str(tmp_path / "c"))


def test_tool(real_vocab_release, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("covid-19\nnanobody\n")
    # The real entry point, in a fresh process.
    result = run_tool_in_subprocess(
        "expand_vocab.py", f"--input_dir={real_vocab_release}", f"--new_tokens_file={tokens}",
        f"--output_dir={tmp_path / 'out'}", "--mode=append")
    assert result.returncode == 0, result.stderr
    config = kbert.BertConfig.from_json_file(str(tmp_path / "out" / "bert_config.json"))
    assert config.vocab_size == 30524


def test_release_missing_a_variable_is_refused_before_expanding(tiny_google_dir, tmp_path):
    release = str(tmp_path / "release")
    shutil.copytree(tiny_google_dir, release)
    prefix = os.path.join(release, "bert_model.ckpt")
    kept = {name: value for name, value in tensors(release).items()
            if name != "bert/pooler/dense/bias"}
    for name in os.listdir(release):
        if name.startswith("bert_model.ckpt"):
            os.remove(os.path.join(release, name))
    tf1.write_tf1_checkpoint(prefix, kept)
    with pytest.raises(ValueError, match=r"checkpoint does not match the config .*\n  missing "
                                         r"from the checkpoint \(1\):\n    bert/pooler/dense/bias"):
        vocab_expansion.expand(release, ["nanobody"], str(tmp_path / "out"), mode="append")
    assert not os.path.exists(tmp_path / "out")


def test_append_with_init_keep_is_refused(real_vocab_release, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("nanobody\n")
    result = run_tool("expand_vocab.py", f"--input_dir={real_vocab_release}",
                      f"--new_tokens_file={tokens}", f"--output_dir={tmp_path / 'out'}",
                      "--mode=append", "--init=keep")
    assert result.returncode == 2
    assert "error: init=keep keeps the old row of a filled [unusedN] slot" in result.stderr
    with pytest.raises(ValueError, match="mode='append' fills none"):
        vocab_expansion.expand(real_vocab_release, ["nanobody"], str(tmp_path / "lib"),
                               mode="append", init="keep")
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "lib")


def test_new_tokens_file_that_is_not_utf8_names_the_line(tiny_google_dir, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_bytes("zebra\ncaf\xe9\n".encode("latin-1"))
    result = run_tool("expand_vocab.py", f"--input_dir={tiny_google_dir}",
                      f"--new_tokens_file={tokens}", f"--output_dir={tmp_path / 'out'}")
    assert result.returncode == 2
    assert f"error: {tokens}:2: not UTF-8 (" in result.stderr


def test_new_tokens_file_empty_or_with_two_words_is_named(tiny_google_dir, tmp_path):
    tokens = tmp_path / "tokens.txt"
    for content, expected in (("\n \n", f"error: {tokens}: no token in the file — expected one "),
                              ("zebra\nnew york\n", f"error: {tokens}:2: 'new york' contains "
                                                    "whitespace — expected one token")):
        tokens.write_text(content)
        result = run_tool("expand_vocab.py", f"--input_dir={tiny_google_dir}",
                          f"--new_tokens_file={tokens}", f"--output_dir={tmp_path / 'out'}")
        assert result.returncode == 2 and expected in result.stderr, result.stderr[-2000:]
        assert not os.path.exists(tmp_path / "out")
