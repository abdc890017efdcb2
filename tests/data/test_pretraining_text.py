"""The raw-text pipeline against Google's create_pretraining_data.py and kbert's offline tool.

All three read the same real text (the committed WikiExtractor excerpt in Google's
sentence-per-line format) with the real uncased vocab; the pipeline's 10 epochs stand for
dupe_factor 10. Their random streams differ, so the statistics are compared, within the
tolerances of tests/data/test_pretraining_google.py.
"""

import numpy as np
import pytest
import tensorflow as tf

from kbert.data.pretraining import instances
from kbert.data.pretraining import record_input
from kbert.data.pretraining import text_input
from kbert.data.pretraining import writer
from tests.data import test_pretraining_google as google_test

# On one worker (setup.cfg), so Google's generator runs once.
pytestmark = pytest.mark.xdist_group(__name__)

SEQ, PREDICTIONS = google_test.SEQ, google_test.PREDICTIONS


def pipeline(text, vocab_file, epochs, **kwargs):
    """All instances of `epochs` passes, in order, as numpy arrays with Google's names."""
    ds = text_input.text_instances(text, vocab_file, 1024, epochs=epochs,
                                         drop_remainder=False, **kwargs)
    batches = list(ds.as_numpy_iterator())
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


@pytest.fixture(scope="module")
def generated(pretraining_record_files, wiki_sample_text, vocab_file):
    """{"plain"|"wwm": (google, offline kbert, pipeline)}, and "sop": the pipeline's SOP."""
    files = pretraining_record_files
    result = {name: (google_test.read(files["google"][name]),
                     google_test.read(files["kbert"][name]),
                     pipeline(wiki_sample_text, vocab_file, 10,
                              config=instances.PretrainingDataConfig(
                                  do_whole_word_mask=name == "wwm")))
              for name in ("plain", "wwm")}
    result["sop"] = pipeline(wiki_sample_text, vocab_file, 10, pair_task="sop")
    return result


@pytest.mark.slow
@pytest.mark.parametrize("name", ["plain", "wwm"])
def test_statistics_match_googles_and_the_offline_tools(generated, vocab_file, name):
    mask_id = writer.load_vocab_tokens(vocab_file).index("[MASK]")
    google, offline, online = (google_test.statistics(r, mask_id) for r in generated[name])
    assert google["instances"] > 4000
    for other in (google, offline):
        assert abs(online["instances"] / other["instances"] - 1) < 0.05
        assert abs(online["random_next"] - other["random_next"]) < 0.03
        assert abs(online["predictions"] / other["predictions"] - 1) < 0.05
        assert abs(online["lengths"].mean() / other["lengths"].mean() - 1) < 0.03
        assert google_test.ks_distance(online["lengths"], other["lengths"]) < 0.05
    for key, rate in (("mask", 0.8), ("same", 0.1), ("random", 0.1)):
        assert abs(online[key] - rate) < 0.02, key


@pytest.mark.slow
def test_whole_word_spans_match_googles(generated, vocab_file):
    vocab = writer.load_vocab_tokens(vocab_file)
    is_continuation = np.array([t.startswith("##") for t in vocab])
    google, _, online = generated["wwm"]
    assert count_partly_masked_words(online, vocab) == 0
    assert count_partly_masked_words(generated["plain"][2], vocab) > 100  # no whole words
    # Pieces per masked word (word-initial pieces among the predictions) as Google's.
    spans = [1 / (1 - is_continuation[r["masked_lm_ids"][r["masked_lm_weights"] > 0]].mean())
             for r in (google, online)]
    assert abs(spans[1] / spans[0] - 1) < 0.03


@pytest.mark.slow
def test_sentence_order_labels_balance_as_next_sentence_labels(generated):
    # Both label 1 for one-sentence chunks and half of the rest (ALBERT's rule).
    sop = generated["sop"]["next_sentence_labels"].mean()
    assert abs(sop - generated["plain"][0]["next_sentence_labels"].mean()) < 0.03


@pytest.mark.slow
@pytest.mark.parametrize("name", ["plain", "wwm"])
def test_no_special_token_or_padding_is_predicted(generated, vocab_file, name):
    vocab = writer.load_vocab_tokens(vocab_file)
    records = generated[name][2]
    valid = records["masked_lm_weights"] > 0
    assert not np.isin(records["masked_lm_ids"][valid],
                       [vocab.index(t) for t in ("[CLS]", "[SEP]", "[PAD]")]).any()
    lengths = records["input_mask"].sum(axis=1, keepdims=True)
    positions = records["masked_lm_positions"]
    assert ((positions > 0) & (positions < lengths))[valid].all()
    assert (positions[~valid] == 0).all() and (records["masked_lm_ids"][~valid] == 0).all()
    # Positions ascend and are unique within a row.
    assert (np.diff(np.where(valid, positions, SEQ), axis=1) > 0)[valid[:, 1:]].all()


def count_partly_masked_words(records, vocab):
    """Words (a piece and its "##" pieces) with some but not all pieces predicted."""
    is_continuation = np.array([t.startswith("##") for t in vocab])
    special = {vocab.index("[CLS]"), vocab.index("[SEP]")}
    original = records["input_ids"].copy()
    valid = records["masked_lm_weights"] > 0
    original[np.nonzero(valid)[0], records["masked_lm_positions"][valid]] = (
        records["masked_lm_ids"][valid])
    split = 0
    for row in range(len(original)):
        masked = set(records["masked_lm_positions"][row][valid[row]].tolist())
        word_of, words = {}, 0
        for i in range(1, int(records["input_mask"][row].sum())):
            if original[row, i] in special:
                continue
            if not (word_of and is_continuation[original[row, i]]):
                words += 1
            word_of[i] = words
        masked_words = {word_of[i] for i in masked}
        split += sum(1 for i, w in word_of.items() if w in masked_words and i not in masked)
    return split


SMALL = instances.PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10)


def test_same_seed_same_masks_new_masks_every_epoch(wiki_sample, vocab_file):
    def run(seed, epochs=2):
        return pipeline(wiki_sample, vocab_file, epochs, config=SMALL, seed=seed,
                        input_format="wikiextractor", shuffle_buffer=0)

    first, again, other, one_epoch = run(1), run(1), run(2), run(1, epochs=1)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name], err_msg=name)
    assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])
    # Epoch 2 pairs and masks anew: the same text, other instances and other masks.
    n = len(one_epoch["input_ids"])
    np.testing.assert_array_equal(first["input_ids"][:n], one_epoch["input_ids"])
    epoch1, epoch2 = first["masked_lm_positions"][:n], first["masked_lm_positions"][n:]
    rows = min(len(epoch1), len(epoch2))
    assert abs(len(epoch2) / n - 1) < 0.1
    assert (epoch1[:rows] != epoch2[:rows]).any(axis=1).mean() > 0.9


def test_in_graph_masking_follows_googles_count_and_rates(vocab_file):
    vocab = instances.MaskingVocab.from_tokens(writer.load_vocab_tokens(vocab_file))
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 41, 300)
    tokens = np.where(np.arange(40)[None, :] < lengths[:, None],
                      rng.integers(1000, 2000, (300, 40)), 0).astype(np.int32)
    tokens[:, 0] = vocab.cls_id
    tokens[np.arange(300), lengths - 1] = vocab.sep_id
    candidates = (tokens != 0) & (tokens != vocab.cls_id) & (tokens != vocab.sep_id)
    config = instances.PretrainingDataConfig(max_seq_length=40, max_predictions_per_seq=5,
                                               mask_token_rate=1.0, random_token_rate=0.0)
    out = text_input.mask_batch(
        tf.constant(tokens), tf.constant(candidates), tf.constant(lengths, tf.int32), config,
        vocab, tf.constant(vocab.is_continuation), tf.constant([3, 4], tf.int64))
    # Google: min(max_predictions, max(1, round(len(tokens) * 0.15))), [CLS]/[SEP] counted.
    expected = [min(5, max(1, round(n * 0.15)), n - 2) for n in lengths.tolist()]
    np.testing.assert_array_equal(out["masked_lm_weights"].numpy().sum(axis=1), expected)
    valid = out["masked_lm_weights"].numpy() > 0
    ids, positions = out["input_ids"].numpy(), out["masked_lm_positions"].numpy()
    np.testing.assert_array_equal(np.take_along_axis(ids, positions, 1)[valid], vocab.mask_id)
    np.testing.assert_array_equal(out["masked_lm_ids"].numpy()[valid],
                                  np.take_along_axis(tokens, positions, 1)[valid])
    unchanged = np.ones_like(ids, bool)
    np.put_along_axis(unchanged, np.where(valid, positions, 0), False, axis=1)
    unchanged[:, 0] = True
    np.testing.assert_array_equal(ids[unchanged], tokens[unchanged])


def test_pairing_tasks_on_known_documents():
    # Ten 3-token sentences per document; offsets tell which sentence a span covers.
    documents = instances.TokenizedDocuments.from_lists(
        [[[d * 100 + s] * 3 for s in range(10)] for d in range(20)])
    config = instances.PretrainingDataConfig(max_seq_length=20, short_seq_prob=0.0,
                                               dupe_factor=1)
    for task in instances.PAIR_TASKS:
        a_start, a_end, b_start, b_end, label = instances.shuffled_spans(
            documents, config, np.random.default_rng(0), task)
        same_document = a_start // 30 == b_start // 30
        if task == "nsp":
            assert 0.3 < label.mean() < 0.7
            np.testing.assert_array_equal(b_start[~label], a_end[~label])
            assert not same_document[label].any()
        else:  # no random next segment: every chunk here has more than one sentence
            assert same_document.all()
            follows, swapped = b_start == a_end, a_start == b_end
            np.testing.assert_array_equal(follows, ~label)
            np.testing.assert_array_equal(swapped, label)
            assert 0.3 < label.mean() < 0.7 if task == "sop" else not label.any()


def test_workers_read_their_own_byte_range(wiki_sample, vocab_file):
    contexts = [tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
                for i in range(2)]
    parts = [pipeline(wiki_sample, vocab_file, 1, config=SMALL, input_format="wikiextractor",
                      pair_task="none", input_context=c) for c in contexts]
    whole = pipeline(wiki_sample, vocab_file, 1, config=SMALL, input_format="wikiextractor",
                     pair_task="none")
    # Each worker pairs its own documents only: the openings of the instances (before
    # masking) of the two workers share nothing, and together they are about one reader's.
    def a_tokens(records):
        original = records["input_ids"].copy()
        valid = records["masked_lm_weights"] > 0
        original[np.nonzero(valid)[0], records["masked_lm_positions"][valid]] = (
            records["masked_lm_ids"][valid])
        return set(map(tuple, original[:, :8]))

    assert a_tokens(parts[0]).isdisjoint(a_tokens(parts[1]))
    total = len(parts[0]["input_ids"]) + len(parts[1]["input_ids"])
    assert abs(total / len(whole["input_ids"]) - 1) < 0.05


def test_writes_records_that_pretraining_dataset_reads(wiki_sample, vocab_file, tmp_path):
    config = instances.PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10,
                                               dupe_factor=2)
    path = str(tmp_path / "text.tfrecord")
    count = text_input.write_text_records(wiki_sample, path, vocab_file, config=config,
                                                input_format="wikiextractor", seed=5,
                                                batch_size=1024)
    expected = pipeline(wiki_sample, vocab_file, 2, config=config, seed=5,
                        input_format="wikiextractor", shuffle_buffer=0)
    assert count == len(expected["input_ids"])
    ds = record_input.pretraining_dataset(path, batch_size=count, shuffle=False,
                                               repeat=False)
    inputs, labels, weights = next(iter(ds))
    np.testing.assert_array_equal(inputs["token_ids"], expected["input_ids"])
    np.testing.assert_array_equal(inputs["mask_positions"], expected["masked_lm_positions"])
    np.testing.assert_array_equal(labels["mlm_logits"], expected["masked_lm_ids"])
    np.testing.assert_array_equal(labels["nsp_logits"], expected["next_sentence_labels"][:, 0])


def test_dataset_feeds_the_pretrainer_shapes(wiki_sample, vocab_file):
    ds = text_input.pretraining_text_dataset(
        wiki_sample, vocab_file, 8, config=SMALL, input_format="wikiextractor",
        pair_task="none")
    inputs, labels, weights = next(iter(ds))
    assert {k: (v.dtype, tuple(v.shape)) for k, v in inputs.items()} == {
        "token_ids": (tf.int32, (8, 64)), "segment_ids": (tf.int32, (8, 64)),
        "padding_mask": (tf.int32, (8, 64)), "mask_positions": (tf.int32, (8, 10))}
    assert sorted(labels) == sorted(weights) == ["mlm_logits"]
    with pytest.raises(ValueError, match="pair_task"):
        text_input.pretraining_text_dataset(wiki_sample, vocab_file, 8, pair_task="mlm")


def test_the_pipeline_needs_no_autograph(wiki_sample, vocab_file, kbert_autograph_conversions):
    """Reading, tokenizing, pairing, masking and renaming branch on Python values only."""
    ds = text_input.pretraining_text_dataset(wiki_sample, vocab_file, 8, config=SMALL,
                                             input_format="wikiextractor")
    inputs, _, _ = next(iter(ds))
    assert inputs["token_ids"].shape == (8, 64)
    assert kbert_autograph_conversions == []


def test_input_without_text_fails_instead_of_waiting(vocab_file, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty.txt: no document with text"):
        next(iter(text_input.pretraining_text_dataset(str(empty), vocab_file, 4)))
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt: missing special token\(s\) \[MASK\]"):
        text_input.pretraining_text_dataset(str(empty), str(bad_vocab), 4)
