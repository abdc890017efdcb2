"""BertPreprocessor: packing, Google's pair truncation, tf.data and tf.function use."""

import os

import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from bert import tokenization as google_tokenization

import kbert
from kbert.tokenization.packer import truncated_lengths


def google_pack(tokenizer, a, b, max_seq_length):
    """Google's run_classifier packing, with its own `_truncate_seq_pair` loop."""
    tokens_a, tokens_b = tokenizer.tokenize(a), tokenizer.tokenize(b) if b else None
    if tokens_b:
        while len(tokens_a) + len(tokens_b) > max_seq_length - 3:
            (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    else:
        tokens_a = tokens_a[: max_seq_length - 2]
    tokens = ["[CLS]", *tokens_a, "[SEP]"] + ([*tokens_b, "[SEP]"] if tokens_b else [])
    segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1 if tokens_b else 0)
    return tokenizer.convert_tokens_to_ids(tokens), segments


PAIRS = [
    ("The quick brown fox jumps over the lazy dog near the river bank today.", "Short."),
    ("Tiny.", "A much longer second segment that certainly needs to be truncated a lot here."),
    ("Both segments here are fairly long ones indeed.", "And this one is also quite long ok."),
    ("Exactly equal length", "Exactly equal length"),
]


@pytest.mark.parametrize("max_seq_length", [9, 12, 16, 64])
def test_pairs_match_google_truncation(minilm_dir, max_seq_length):
    vocab_file = os.path.join(minilm_dir, "vocab.txt")
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    oracle = google_tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    layer = kbert.BertPreprocessor(vocab_file, max_seq_length=max_seq_length)
    out = layer((tf.constant([a for a, _ in PAIRS]), tf.constant([b for _, b in PAIRS])))
    for row, (a, b) in enumerate(PAIRS):
        ids, segments = google_pack(oracle, a, b, max_seq_length)
        n = len(ids)
        assert out["token_ids"][row, :n].numpy().tolist() == ids
        assert out["segment_ids"][row, :n].numpy().tolist() == segments
        assert out["padding_mask"][row].numpy().sum() == n
        assert out["token_ids"][row, n:].numpy().sum() == 0


def test_truncation_formula_equals_pop_loop():
    for a in range(0, 12):
        for b in range(0, 12):
            for budget in range(1, 15):
                la, lb = a, b
                while la + lb > budget:
                    if la > lb:
                        la -= 1
                    else:
                        lb -= 1
                got = truncated_lengths(tf.constant([a]), tf.constant([b]), budget)
                assert (int(got[0][0]), int(got[1][0])) == (la, lb), (a, b, budget)


def test_single_segment_pad_to_longest_in_tf_data(minilm_dir):
    layer = kbert.BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), max_seq_length=8,
                                   pad_to_max_length=False)
    data = tf.data.Dataset.from_tensor_slices(["hello world", "a b c d e f g h i j k", ""])
    batches = list(data.batch(3).map(layer))
    out = batches[0]
    assert out["token_ids"].shape == (3, 8)  # the long one is truncated to 8
    np.testing.assert_array_equal(out["padding_mask"].numpy().sum(1), [4, 8, 2])
    assert out["token_ids"][2, :2].numpy().tolist() == [101, 102]
    short = layer(tf.constant(["hi", "ok"]))
    assert short["token_ids"].shape == (2, 3)


def test_in_tf_function_and_feeds_encoder(minilm_google_dir):
    layer = kbert.BertPreprocessor(os.path.join(minilm_google_dir, "vocab.txt"),
                                   max_seq_length=16)
    encoder = kbert.BertEncoder.from_google_checkpoint(minilm_google_dir)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def embed(texts):
        return encoder(layer(texts))["pooled_output"]

    assert embed(tf.constant(["hello there", "general kenobi"])).shape == (2, 384)
