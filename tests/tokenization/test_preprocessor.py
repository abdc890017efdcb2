"""BertPreprocessor: Google's packing and pair truncation, tf.data, tf.function, saving."""

import ast
import importlib.util
import os
import shutil
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from bert import tokenization as google_tokenization

from kbert.tokenization import BertPreprocessor
from tests import harness

PAIRS = [
    ("The quick brown fox jumps over the lazy dog near the river bank today.", "Short."),
    ("Tiny.", "A much longer second segment that certainly needs to be truncated a lot here."),
    ("Both segments here are fairly long ones indeed.", "And this one is also quite long ok."),
    ("Exactly equal length", "Exactly equal length"),
    ("Una frase en español, ¿verdad?", ""),  # no B tokens: Google packs A alone
    ("東京は日本の首都です。", "   "),
]


@pytest.fixture(scope="module")
def google_classifier():
    """run_classifier's `convert_single_example` and `InputExample`, Google's own source.

    Only those definitions are executed (the module defines absl flags that clash with other
    oracles imported in the same pytest process).
    """
    path = importlib.util.find_spec("bert.run_classifier").origin
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    wanted = {"InputExample", "PaddingInputExample", "InputFeatures", "convert_single_example",
              "_truncate_seq_pair"}
    body = [node for node in tree.body if getattr(node, "name", None) in wanted]
    module = types.SimpleNamespace()
    namespace = {"tokenization": google_tokenization, "tf": tf.compat.v1}
    exec(compile(ast.Module(body, []), path, "exec"), namespace)  # noqa: S102
    for name in wanted:
        setattr(module, name, namespace[name])
    return module


def google_pack(classifier, tokenizer, a, b, max_seq_length):
    example = classifier.InputExample(guid="x", text_a=a, text_b=b, label="0")
    # ex_index >= 5: no logging.
    features = classifier.convert_single_example(10, example, ["0"], max_seq_length, tokenizer)
    return features.input_ids, features.segment_ids, features.input_mask


@pytest.mark.parametrize("max_seq_length", [5, 9, 12, 16, 64])
def test_pairs_match_google(vocab_file, google_tokenizer, google_classifier, max_seq_length):
    layer = BertPreprocessor(vocab_file, max_seq_length=max_seq_length)
    out = layer((tf.constant([a for a, _ in PAIRS]), tf.constant([b for _, b in PAIRS])))
    for row, (a, b) in enumerate(PAIRS):
        ids, segments, mask = google_pack(google_classifier, google_tokenizer(True), a, b,
                                          max_seq_length)
        assert out["token_ids"][row].numpy().tolist() == ids, (a, b)
        assert out["segment_ids"][row].numpy().tolist() == segments
        assert out["padding_mask"][row].numpy().tolist() == mask


@pytest.mark.parametrize("max_seq_length", [3, 4, 5, 8, 11, 16])
def test_truncation_equals_google_for_all_lengths(vocab_file, google_classifier,
                                                  max_seq_length):
    """Every pair of segment lengths 0..13: "a" and "b" are one token each (1037, 1038)."""
    lengths = [(n_a, n_b) for n_a in range(14) for n_b in range(14)]
    layer = BertPreprocessor(vocab_file, max_seq_length=max_seq_length)
    pairs = (tf.constant([" ".join("a" * n) for n, _ in lengths]),
             tf.constant([" ".join("b" * n) for _, n in lengths]))
    if max_seq_length < 5:  # Google drops one or both texts here; kbert refuses
        with pytest.raises(ValueError, match="cannot hold a text pair"):
            layer(pairs)
        return
    out = layer(pairs)["token_ids"].numpy()
    for (n_a, n_b), row in zip(lengths, out, strict=True):
        tokens_a, tokens_b = ["a"] * n_a, ["b"] * n_b
        if tokens_b:
            google_classifier._truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
        else:
            tokens_a = tokens_a[:max_seq_length - 2]
        assert (np.sum(row == 1037), np.sum(row == 1038)) == (len(tokens_a), len(tokens_b))
        assert np.sum(row == 102) == (2 if tokens_b else 1)


def test_tf_data_pairs_padded_to_longest(vocab_file):
    layer = BertPreprocessor(vocab_file, max_seq_length=8, pad_to_max_length=False)
    data = tf.data.Dataset.from_tensor_slices(
        (["hello world", "a b c d e f g h i j k", ""], ["pair b", "x", ""]))
    out = next(iter(data.batch(3).map(lambda a, b: layer((a, b)))))
    assert out["token_ids"].shape == (3, 8)  # the long one is truncated to 8
    np.testing.assert_array_equal(out["padding_mask"].numpy().sum(1), [7, 8, 2])
    assert out["token_ids"][2].numpy().tolist() == [101, 102, 0, 0, 0, 0, 0, 0]
    assert out["segment_ids"][0].numpy().tolist() == [0, 0, 0, 0, 1, 1, 1, 0]
    assert layer(tf.constant(["hi", "ok"]))["token_ids"].shape == (2, 3)
    unbatched = layer(tf.constant("hello world"))  # a scalar string
    assert unbatched["token_ids"].numpy().tolist() == [101, 7592, 2088, 102]


def test_tf_function_and_saved_model(vocab_file, tmp_path):
    copy = tmp_path / "vocab" / "vocab.txt"
    copy.parent.mkdir()
    shutil.copy(vocab_file, copy)
    layer = BertPreprocessor(str(copy), max_seq_length=16)
    module = tf.Module()
    module.layer = layer
    module.serve = tf.function(layer, input_signature=[tf.TensorSpec([None], tf.string)])
    texts = tf.constant(["Hello there!", "General Kenobi", ""])
    expected = module.serve(texts)
    assert expected["padding_mask"].numpy().sum(1).tolist() == [5, 6, 2]
    tf.saved_model.save(module, str(tmp_path / "saved"))
    shutil.rmtree(copy.parent)  # the SavedModel carries the vocabulary
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    got = loaded.serve(texts)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(got[key], expected[key])
        assert got[key].dtype == tf.int32


def test_config_and_keras_file_round_trip(vocab_file, tmp_path):
    layer = BertPreprocessor(vocab_file, do_lower_case=False, max_seq_length=10,
                             pad_to_max_length=False)
    clone = harness.assert_config_roundtrip(layer)
    assert clone.vocabulary == layer.vocabulary and not clone.do_lower_case
    texts = keras.Input(shape=(), dtype="string")
    model = keras.Model(texts, layer(texts))
    inputs = tf.constant(["Hello World", "Straße"])
    expected = model(inputs)
    model.save(tmp_path / "preprocessor.keras")
    loaded = keras.saving.load_model(tmp_path / "preprocessor.keras")  # safe_mode
    for key, value in loaded(inputs).items():
        np.testing.assert_array_equal(value, expected[key])


def test_never_split_and_errors(vocab_file, tmp_path):
    with open(vocab_file, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[lines.index("[unused7]")] = "covid-19"
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "added_tokens.txt").write_text("covid-19\n", encoding="utf-8")
    layer = BertPreprocessor(str(path), max_seq_length=8)
    assert layer.never_split == ["covid-19"]
    assert layer(tf.constant(["covid-19!"]))["token_ids"][0, :4].numpy().tolist() == [
        101, 8, 999, 102]
    assert layer.get_config()["never_split"] == ["covid-19"]
    with pytest.raises(ValueError, match="max_seq_length must be at least 3"):
        BertPreprocessor(vocab_file, max_seq_length=2)
    with pytest.raises(ValueError, match="needs vocab_file or vocabulary"):
        BertPreprocessor()
    with pytest.raises(FileNotFoundError, match="nope.txt: vocab file not found"):
        BertPreprocessor(os.path.join(tmp_path, "nope.txt"))
    with pytest.raises(ValueError, match="one or two text segments, got 3"):
        layer((tf.constant(["a"]),) * 3)


def test_keras_file_carries_vocab_and_added_tokens(vocab_file, tmp_path):
    """A saved `.keras` model needs neither vocab.txt nor added_tokens.txt to reload."""
    with open(vocab_file, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[lines.index("[unused3]")] = "COVID-19"
    source = tmp_path / "release"
    source.mkdir()
    (source / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (source / "added_tokens.txt").write_text("COVID-19\n", encoding="utf-8")
    layer = BertPreprocessor(str(source / "vocab.txt"), max_seq_length=12)
    texts = keras.Input(shape=(), dtype="string")
    model = keras.Model(texts, layer(texts))
    inputs = tf.constant(["COVID-19 spreads; covid-19 too.", "Straße"])
    expected = model(inputs)
    assert expected["token_ids"][0, :3].numpy().tolist() == [
        101, lines.index("COVID-19"), lines.index("spreads")]
    model.save(tmp_path / "model.keras")
    shutil.rmtree(source)
    loaded = keras.saving.load_model(tmp_path / "model.keras")  # safe_mode
    for key, value in loaded(inputs).items():
        np.testing.assert_array_equal(value, expected[key])
    reloaded = next(x for x in loaded.layers if isinstance(x, BertPreprocessor))
    assert reloaded.never_split == ["COVID-19"] and len(reloaded.vocabulary) == len(lines)


# keras-hub's convention: a list is a batch, a tuple holds a pair's segments, a str is one text.
# Each form is compared with the [batch] string tensors that test_pairs_match_google checks.
A, B = ["hello world", "hi"], ["ok", "a b"]
PAIR_SEGMENTS = [[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 0, 0]]
INPUT_FORMS = {
    "list": (A, (2, 8), [[0] * 8] * 2, (A,)),
    "tuple of two lists": ((A, B), (2, 8), PAIR_SEGMENTS, (A, B)),
    "tuple of list and tensor": ((A, tf.constant(B)), (2, 8), PAIR_SEGMENTS, (A, B)),
    "tuple of two tensors": ((tf.constant(A), tf.constant(B)), (2, 8), PAIR_SEGMENTS, (A, B)),
    "string tensor": (tf.constant(A), (2, 8), [[0] * 8] * 2, (A,)),
    "numpy array": (np.array(A), (2, 8), [[0] * 8] * 2, (A,)),
    "[batch, 1] tensor": (tf.constant([[a] for a in A]), (2, 8), [[0] * 8] * 2, (A,)),
    "[batch, 2] tensor": (tf.constant(list(zip(A, B, strict=True))), (2, 8), PAIR_SEGMENTS, (A, B)),
    # Row 0 is a pair, row 1 a single text: packed as the pair (A, "") is, i.e. A alone.
    "ragged rows": (tf.ragged.constant([[A[0], B[0]], [A[1]]]), (2, 8),
                    [PAIR_SEGMENTS[0], [0] * 8], (A, [B[0], ""])),
    "empty list": ([], (0, 8), [], ([],)),
}


@pytest.mark.parametrize("name", INPUT_FORMS)
def test_input_forms(vocab_file, name):
    inputs, shape, segments, as_tensors = INPUT_FORMS[name]
    layer = BertPreprocessor(vocab_file, max_seq_length=8)
    out = layer(inputs)
    expected = layer(tuple(tf.constant(s, tf.string, shape=[len(s)]) for s in as_tensors))
    assert out["token_ids"].shape == shape
    assert out["segment_ids"].numpy().tolist() == segments
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(out[key], expected[key])
        assert out[key].dtype == tf.int32


def test_single_example_forms_are_unbatched(vocab_file):
    layer = BertPreprocessor(vocab_file, max_seq_length=8)
    one = layer("hello world")
    assert one["token_ids"].numpy().tolist() == [101, 7592, 2088, 102, 0, 0, 0, 0]
    assert one["segment_ids"].numpy().tolist() == [0] * 8
    pair = layer(("hello world", "ok"))
    assert pair["token_ids"].shape == (8,)
    assert pair["segment_ids"].numpy().tolist() == PAIR_SEGMENTS[0]
    np.testing.assert_array_equal(pair["token_ids"], layer((A, B))["token_ids"][0])


@pytest.mark.parametrize("inputs, problem", [
    ([("hello", "ok"), ("hi", "a b")], "got a list of tuple, but a list is a batch of texts"),
    ([["hello", "ok"]], "got a list of list"),
    ([tf.constant("hello")], "got a list of EagerTensor"),
    ((["hello"], "ok"), r"both segments of a pair must be batches, or both single texts"),
    ((A, B, A), "packs one or two text segments, got 3"),
    (tf.constant([1, 2]), "got a int32 tensor; texts must be strings"),
    (tf.constant([["a", "b", "c"]]), r"got a tensor of shape \[1, 3\]"),
    ({"text": A}, "got a dict"),
])
def test_ambiguous_inputs_name_the_accepted_forms(vocab_file, inputs, problem):
    layer = BertPreprocessor(vocab_file, max_seq_length=8)
    with pytest.raises(ValueError, match=problem) as error:
        layer(inputs)
    message = str(error.value)
    assert "a batch of texts: ['The cat sat.', 'Dogs bark.']" in message
    assert "a batch of pairs: (['The cat sat.', 'Dogs bark.'], ['It was tired.'" in message


def test_ragged_row_with_three_segments_fails(vocab_file):
    layer = BertPreprocessor(vocab_file, max_seq_length=8)
    with pytest.raises(tf.errors.InvalidArgumentError, match="holds one or two segments"):
        layer(tf.ragged.constant([["a", "b", "c"], ["d"]]))
