"""Wrong inputs to the tokenizer, the preprocessor and a vocab that does not fit the model."""

import numpy as np
import pytest
import tensorflow as tf

from kbert.tokenization import BertPreprocessor
from kbert.tokenization import FullTokenizer
from kbert.tokenization import check_vocab_size
from kbert.tokenization import load_vocab
from tests.conftest import TINY_VOCAB


@pytest.fixture
def tiny_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    return str(path)


def test_tokenizer_says_what_it_takes(tiny_vocab_file):
    with pytest.raises(TypeError, match=r"FullTokenizer needs vocab_file, the path of a "
                                        r"vocab.txt \(or a kbert Vocab\); got None"):
        FullTokenizer(None)
    tokenizer = FullTokenizer(tiny_vocab_file)
    with pytest.raises(TypeError, match=r"tokenize takes one str \(or UTF-8 bytes\), got None"):
        tokenizer.tokenize(None)
    with pytest.raises(TypeError, match="got int;"):
        tokenizer.tokenize(123)
    with pytest.raises(TypeError, match="got an int32 EagerTensor"):
        tokenizer.tokenize_with_offsets(tf.constant(5))
    with pytest.raises(TypeError, match="expected text .* got an int32 EagerTensor"):
        tokenizer.tokenize_ids(tf.constant([1, 2]))
    with pytest.raises(TypeError, match="expected text .* got list"):
        tokenizer.tokenize_ids([None, "the"])
    assert tokenizer.tokenize("the said") == tokenizer.tokenize(tf.constant("the said")) == [
        "the", "said"]


def test_preprocessor_pair_needs_room_for_both_texts(tiny_vocab_file):
    short = BertPreprocessor(tiny_vocab_file, max_seq_length=4)
    with pytest.raises(ValueError, match=r"max_seq_length=4 cannot hold a text pair: \[CLS\] A "
                                         r"\[SEP\] B \[SEP\] needs at least 5"):
        short((tf.constant(["the"]), tf.constant(["said"])))
    # A single text still fits, and 5 holds one piece of each.
    assert short(tf.constant(["the said"]))["token_ids"].numpy().tolist() == [[2, 5, 14, 3]]
    pair = BertPreprocessor(tiny_vocab_file, max_seq_length=5)(
        (tf.constant(["the the"]), tf.constant(["said said"])))
    assert pair["token_ids"].numpy().tolist() == [[2, 5, 3, 14, 3]]
    assert pair["segment_ids"].numpy().tolist() == [[0, 0, 0, 1, 1]]
    with pytest.raises(ValueError, match="got a int32 tensor; texts must be strings"):
        short(tf.constant([3]))


def test_preprocessor_ids_stay_inside_the_vocab(tiny_vocab_file):
    ids = BertPreprocessor(tiny_vocab_file, max_seq_length=16)(
        tf.constant(["He said, \"the ünknown wörds' tested as-is\"", ""]))["token_ids"].numpy()
    assert ids.min() >= 0 and ids.max() < len(TINY_VOCAB)
    assert np.any(ids == 1)  # [UNK], the id of every piece the vocab lacks


def test_vocab_size_must_match_the_model(tiny_vocab_file, tmp_path):
    check_vocab_size(tiny_vocab_file, len(TINY_VOCAB))
    with pytest.raises(ValueError, match=rf"{tiny_vocab_file}: 31 tokens, but the model "
                                         r"\(ckpt\) has vocab_size=30 embedding rows — pass the "
                                         r"vocab.txt .* or add the new tokens with "
                                         r"tools/expand_vocab.py"):
        check_vocab_size(tiny_vocab_file, 30, "ckpt")
    with pytest.raises(ValueError, match=r"31 tokens, but the model has vocab_size=40 "
                                         r"embedding rows — pass the vocab.txt the checkpoint "
                                         r"was trained with \(--vocab_file\)$"):
        check_vocab_size(load_vocab(tiny_vocab_file), 40)
