import numpy as np
import pytest

from kbert.data.pretraining import instances as instances_lib

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CLS, SEP, MASK = 2, 3, 4
OFFSET = len(SPECIAL)  # token id = OFFSET + its index in the flat array: decodable


def make_vocab(size=4000, continuation_from=None):
    tokens = SPECIAL + [f"w{i}" for i in range(OFFSET, size)]
    if continuation_from is not None:
        tokens[continuation_from:] = [f"##{i}" for i in range(continuation_from, size)]
    return instances_lib.MaskingVocab.from_tokens(tokens)


def synthetic_documents(seed, num_documents=30):
    """Documents of 1..12 sentences of 1..25 tokens; the ids count up from OFFSET."""
    rng = np.random.default_rng(seed)
    documents, next_id = [], OFFSET
    for _ in range(num_documents):
        document = []
        for length in rng.integers(1, 26, rng.integers(1, 13)):
            document.append(list(range(next_id, next_id + length)))
            next_id += length
        documents.append(document)
    return instances_lib.TokenizedDocuments.from_lists(documents)


def instances(documents, config, vocab, seed, batch_size=4096):
    batches = list(instances_lib.create_instances(documents, config, vocab,
                                                np.random.default_rng(seed), batch_size))
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def restore(out):
    """The unmasked tokens: masked positions given back their labels."""
    tokens = out["input_ids"].astype(np.int64).copy()
    valid = out["masked_lm_weights"] > 0
    rows = np.nonzero(valid)[0]
    tokens[rows, out["masked_lm_positions"][valid]] = out["masked_lm_ids"][valid]
    return tokens


def test_truncation_lengths_match_googles_loop():
    def google(len_a, len_b, max_num_tokens):  # truncate_seq_pair, lengths only
        while len_a + len_b > max_num_tokens:
            if len_a > len_b:
                len_a -= 1
            else:
                len_b -= 1
        return len_a, len_b

    grid = np.array([(a, b, m) for a in range(1, 40) for b in range(1, 40) for m in (2, 5, 37)])
    got = instances_lib._truncated_lengths(grid[:, 0], grid[:, 1], grid[:, 2])
    expected = np.array([google(a, b, m) for a, b, m in grid]).T
    np.testing.assert_array_equal(np.stack(got), expected)


def test_instances_keep_googles_invariants():
    documents = synthetic_documents(0)
    doc_of = np.repeat(np.arange(documents.num_documents),
                       np.diff(documents.sentence_splits[documents.document_splits]))
    vocab = make_vocab()
    config = instances_lib.PretrainingDataConfig(max_seq_length=40, max_predictions_per_seq=5,
                                               dupe_factor=3)
    out = instances(documents, config, vocab, seed=1, batch_size=100)
    original = restore(out)
    lengths = out["input_mask"].sum(axis=1)
    assert len(lengths) > 100
    for row, n in enumerate(lengths):
        tokens, segments = original[row], out["segment_ids"][row]
        np.testing.assert_array_equal(out["input_mask"][row], np.arange(40) < n)
        seps = np.flatnonzero(tokens == SEP)
        assert tokens[0] == CLS and len(seps) == 2 and seps[1] == n - 1
        np.testing.assert_array_equal(segments, (np.arange(40) > seps[0]) & (np.arange(40) < n))
        assert not tokens[n:].any()
        flat_a, flat_b = tokens[1:seps[0]] - OFFSET, tokens[seps[0] + 1:n - 1] - OFFSET
        assert len(flat_a) and len(flat_b) and len(flat_a) + len(flat_b) <= 37
        # A and B are runs of consecutive tokens, each inside one document.
        assert (np.diff(flat_a) == 1).all() and (np.diff(flat_b) == 1).all()
        doc_a, doc_b = doc_of[flat_a], doc_of[flat_b]
        assert (doc_a == doc_a[0]).all() and (doc_b == doc_b[0]).all()
        if out["next_sentence_labels"][row, 0]:
            assert doc_b[0] != doc_a[0]
        else:
            assert doc_b[0] == doc_a[0] and flat_b[0] > flat_a[-1]
        # Masked LM: Google's count, sorted unique positions that are never [CLS]/[SEP]/pad.
        count = int((out["masked_lm_weights"][row] > 0).sum())
        assert count == min(5, max(1, round(n * 0.15)))
        positions = out["masked_lm_positions"][row]
        assert (np.diff(positions[:count]) > 0).all() and not positions[count:].any()
        assert not out["masked_lm_ids"][row, count:].any()
        assert not set(positions[:count]) & {0, seps[0], n - 1}
        np.testing.assert_array_equal(out["masked_lm_ids"][row, :count],
                                      tokens[positions[:count]])
        replaced = out["input_ids"][row, positions[:count]]
        assert ((replaced == MASK) | (replaced == tokens[positions[:count]])
                | ((replaced >= 0) & (replaced < vocab.size))).all()
        unmasked = np.setdiff1d(np.arange(40), positions[:count])
        np.testing.assert_array_equal(out["input_ids"][row, unmasked], tokens[unmasked])
    assert 0.3 < out["next_sentence_labels"].mean() < 0.7


def test_replacement_rates_are_80_10_10():
    documents = synthetic_documents(1, num_documents=300)
    config = instances_lib.PretrainingDataConfig(max_seq_length=64, dupe_factor=4)
    out = instances(documents, config, make_vocab(), seed=2)
    valid = out["masked_lm_weights"] > 0
    at = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], axis=1)[valid]
    labels = out["masked_lm_ids"][valid]
    assert valid.sum() > 20000
    assert abs((at == MASK).mean() - 0.8) < 0.01
    assert abs(((at == labels) & (at != MASK)).mean() - 0.1) < 0.01
    assert abs(((at != labels) & (at != MASK)).mean() - 0.1) < 0.01


@pytest.mark.parametrize("mask_rate, random_rate", [(1.0, 0.0), (0.0, 0.0), (0.0, 1.0)])
def test_pinned_rates_give_exact_ids(mask_rate, random_rate):
    # masked_lm_prob 1.0 with room for every position: all A and B tokens are predicted.
    documents = synthetic_documents(2)
    vocab = make_vocab()

    def run(mask_token_rate, random_token_rate):
        config = instances_lib.PretrainingDataConfig(
            max_seq_length=24, max_predictions_per_seq=24, masked_lm_prob=1.0, dupe_factor=2,
            mask_token_rate=mask_token_rate, random_token_rate=random_token_rate)
        return instances(documents, config, vocab, seed=3)

    plain, out = run(0.0, 0.0), run(mask_rate, random_rate)
    # Same draws whatever the rates: same spans and positions; (0, 0) changes no token.
    np.testing.assert_array_equal(restore(plain), plain["input_ids"])
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "segment_ids"):
        np.testing.assert_array_equal(out[name], plain[name])
    tokens = plain["input_ids"]
    predicted = (tokens != CLS) & (tokens != SEP) & (plain["input_mask"] > 0)
    np.testing.assert_array_equal((plain["masked_lm_weights"] > 0).sum(axis=1),
                                  predicted.sum(axis=1))
    if mask_rate == 1.0:
        np.testing.assert_array_equal(out["input_ids"], np.where(predicted, MASK, tokens))
    elif random_rate == 1.0:
        np.testing.assert_array_equal(out["input_ids"][~predicted], tokens[~predicted])
        assert (out["input_ids"][predicted] != tokens[predicted]).mean() > 0.99
    else:
        np.testing.assert_array_equal(out["input_ids"], tokens)


def words_of(tokens, length, is_continuation):
    """Google's whole-word grouping: a "##" piece joins the previous candidate's word."""
    words = []
    for i in range(1, length - 1):
        if tokens[i] == SEP:
            continue
        if words and is_continuation[tokens[i]]:
            words[-1].append(i)
        else:
            words.append([i])
    return words


def test_whole_word_masking_never_splits_a_word():
    rng = np.random.default_rng(4)
    vocab = make_vocab(continuation_from=2000)
    documents = []
    for _ in range(40):
        document = []
        for _ in range(rng.integers(1, 8)):
            sentence = []
            for _ in range(rng.integers(1, 12)):
                sentence.append(int(rng.integers(OFFSET, 2000)))
                sentence.extend(rng.integers(2000, 4000, rng.integers(0, 4)).tolist())
            document.append(sentence)
        documents.append(document)
    documents = instances_lib.TokenizedDocuments.from_lists(documents)
    config = instances_lib.PretrainingDataConfig(max_seq_length=48, max_predictions_per_seq=7,
                                               dupe_factor=5, do_whole_word_mask=True)
    out = instances(documents, config, vocab, seed=5)
    original = restore(out)
    multi_piece = 0
    for row, n in enumerate(out["input_mask"].sum(axis=1)):
        masked = set(out["masked_lm_positions"][row][out["masked_lm_weights"][row] > 0])
        assert len(masked) <= min(7, max(1, round(n * 0.15)))
        for word in words_of(original[row], n, vocab.is_continuation):
            covered = masked & set(word)
            assert not covered or covered == set(word), (row, word, masked)
            multi_piece += len(covered) > 1
    assert multi_piece > 50


def test_same_seed_same_instances_other_seed_other_masks():
    documents, vocab = synthetic_documents(3), make_vocab()
    config = instances_lib.PretrainingDataConfig(max_seq_length=32, dupe_factor=2)
    a, b = instances(documents, config, vocab, 7), instances(documents, config, vocab, 7)
    c = instances(documents, config, vocab, 8)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert not np.array_equal(a["masked_lm_positions"], c["masked_lm_positions"][:len(a)])
