"""Feature extraction against Google's extract_features.py, and the pooling options."""

import json
import os
import sys

import numpy as np
import pytest

import kbert
from kbert.tasks import feature_extraction
from tests import warm_process
from tests.conftest import TINY_CONFIG
from tests.oracle import google_bert
from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

# 31 entries: the tiny config's vocab_size.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog",
         "ran", "a", "big", "red", "ball", "##s", "##ed", "##ing", "play", "jump", "over", "and",
         "is", ",", ".", "!", "?", "hello", "world", "fox"]
LINES = [
    "The cat sat on the mat.",
    "Hello, world! ||| The dog ran and jumped over a big red ball.",
    "the dogs are playing ||| cats ||| jump",  # greedy split: text_b is "jump"
    "a big big big big big big big big big big big red ball ||| the mat is red !",  # truncated
    "Zebra",  # [UNK]
]
LAYERS = [-1, -2, 0]
SEQ = 12


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    google_bert.make_google_checkpoint(TINY_CONFIG, str(out / "bert_model.ckpt"),
                                       with_pretraining_heads=False, seed=11)
    (out / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (out / "input.txt").write_text("\n".join(LINES) + "\n")
    return out


def test_matches_google_extract_features(release):
    golden_file = release / "google.jsonl"
    oracle = warm_process.run(
        [sys.executable, "-m", "tests.oracle.google_extract_features",
         str(release / "bert_config.json"), str(release / "bert_model.ckpt"),
         str(release / "vocab.txt"), str(release / "input.txt"),
         ",".join(map(str, LAYERS)), str(SEQ), str(golden_file)],
        capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), "..", ".."),
        env=warm_process.environment(allow=("bert-tensorflow",)))
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    golden = [json.loads(line) for line in golden_file.read_text().splitlines()]

    encoder = kbert.BertEncoder.from_google_checkpoint(str(release))
    tokenizer = kbert.FullTokenizer(str(release / "vocab.txt"), do_lower_case=True)
    with open(release / "input.txt") as f:
        results = feature_extraction.extract(
            encoder, tokenizer, feature_extraction.read_examples(f), LAYERS, max_seq_length=SEQ,
            batch_size=2)
        ours = [json.loads(feature_extraction.to_google_json(r)) for r in results]
    assert len(ours) == len(golden) == len(LINES)
    for mine, theirs in zip(ours, golden, strict=True):
        assert mine["linex_index"] == theirs["linex_index"]
        assert [t["token"] for t in mine["features"]] == [t["token"] for t in theirs["features"]]
        for a, b in zip(mine["features"], theirs["features"], strict=True):
            assert [x["index"] for x in a["layers"]] == LAYERS
            for la, lb in zip(a["layers"], b["layers"], strict=True):
                np.testing.assert_allclose(la["values"], lb["values"], atol=1e-5)
    assert len(ours[3]["features"]) == SEQ  # the long pair was truncated to max_seq_length


def test_poolings(release, tiny_config):
    encoder = kbert.BertEncoder.from_google_checkpoint(str(release))
    tokenizer = kbert.FullTokenizer(str(release / "vocab.txt"), do_lower_case=True)
    examples = list(feature_extraction.read_examples(LINES))
    tokens, ids, segments = feature_extraction.featurize(tokenizer, examples[1], SEQ)
    single = encoder({"token_ids": np.array([ids], "int32"),
                      "segment_ids": np.array([segments], "int32"),
                      "padding_mask": np.ones((1, len(ids)), "int32")})
    layers = [np.asarray(x)[0] for x in single["encoder_outputs"]]
    expected = {
        "cls": layers[-1][0],
        "pooled": np.asarray(single["pooled_output"])[0],
        "mean": layers[-1].mean(0),
        "mean_second_to_last": layers[-2].mean(0),
        "mean_sum_last_four": (layers[-1] + layers[-2]).mean(0),  # only two layers exist
        "mean_concat_last_four": np.concatenate(layers, -1).mean(0),
    }
    for pooling, want in expected.items():
        # Batched with a longer and a shorter example, so padding must be masked out.
        results = list(feature_extraction.extract(encoder, tokenizer, examples[:3], [-1], pooling,
                                                  max_seq_length=SEQ, batch_size=3))
        np.testing.assert_allclose(results[1]["sentence_vector"], want, atol=1e-5,
                                   err_msg=pooling)


def test_bad_arguments(release):
    encoder = kbert.BertEncoder.from_google_checkpoint(str(release))
    tokenizer = kbert.FullTokenizer(str(release / "vocab.txt"), do_lower_case=True)
    with pytest.raises(ValueError, match="pooling must be one of"):
        next(feature_extraction.extract(encoder, tokenizer, [], pooling="max"))
    with pytest.raises(ValueError, match="layer index -3 out of range for 2 layers"):
        next(feature_extraction.extract(encoder, tokenizer, [], layers=[-3]))


def test_tool_writes_npy_and_jsonl(release, tmp_path):
    common = ["extract_features.py", f"--input_file={release / 'input.txt'}",
              f"--init_checkpoint={release}", f"--max_seq_length={SEQ}"]
    # The real entry point once, in a fresh process; then in-process.
    result = run_tool_in_subprocess(*common, f"--output_file={tmp_path / 'v.npy'}",
                                    "--pooling=mean")
    assert result.returncode == 0, result.stderr
    vectors = np.load(tmp_path / "v.npy")
    assert vectors.shape == (len(LINES), 12) and np.isfinite(vectors).all()
    result = run_tool(*common, f"--output_file={tmp_path / 'f.jsonl'}", "--layers=-1")
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "f.jsonl").read_text().splitlines()) == len(LINES)
    result = run_tool(*common, f"--output_file={tmp_path / 'x.npy'}")
    assert result.returncode != 0 and "must end in .jsonl" in result.stderr
    result = run_tool(*common, f"--output_file={tmp_path / 'f.jsonl'}", "--layers=-1,-3")
    assert result.returncode == 2
    assert "--layers -3: the model has 2 layers (indices -2 to 1)" in result.stderr


def test_texts_in_the_preprocessor_convention(release):
    """A list is a batch, a tuple of two lists is pairs, a str is one text; others fail."""
    encoder = kbert.BertEncoder.from_google_checkpoint(str(release))
    tokenizer = kbert.FullTokenizer(str(release / "vocab.txt"), do_lower_case=True)
    examples = list(feature_extraction.read_examples(LINES[:2]))  # a single text, then a pair
    expected = list(feature_extraction.extract(encoder, tokenizer, examples, [-1], "mean",
                                               max_seq_length=SEQ))
    texts_a = [e.text_a for e in examples]
    texts_b = [e.text_b or "" for e in examples]
    for texts in ([texts_a[0]], texts_a[0], (texts_a, texts_b)):
        got = list(feature_extraction.extract(encoder, tokenizer, texts, [-1], "mean",
                                              max_seq_length=SEQ))
        assert len(got) == (2 if isinstance(texts, tuple) else 1)
        for mine, theirs in zip(got, expected, strict=False):
            assert mine["tokens"] == theirs["tokens"]
            np.testing.assert_allclose(mine["sentence_vector"], theirs["sentence_vector"],
                                       atol=1e-6)
    assert feature_extraction.examples_from_texts(("a", "b")) == [
        feature_extraction.Example(0, "a", "b")]
    with pytest.raises(ValueError, match="extract: got a list of tuple"):
        next(feature_extraction.extract(encoder, tokenizer, [("a", "b")], [-1]))
