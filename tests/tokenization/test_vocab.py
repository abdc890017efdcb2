"""Vocab: Google's ids, clear errors naming file and line, special ids, [unusedN] slots."""

import pytest

from kbert.tokenization import vocab as vocab_lib

SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


def test_real_vocab_ids_equal_googles(vocab_file, google_tokenizer):
    vocab = vocab_lib.load_vocab(vocab_file)
    assert len(vocab) == 30522
    assert vocab.ids == dict(google_tokenizer(True).vocab)
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
        0, 100, 101, 102, 103)
    assert len(vocab.unused_ids) == 994
    assert [vocab.tokens[i] for i in vocab.unused_ids[:3]] == [
        "[unused0]", "[unused1]", "[unused2]"]
    assert vocab.tokens[vocab.unused_ids[-1]] == "[unused993]"


def test_stripping_and_line_endings(tmp_path):
    path = write(tmp_path, "crlf.txt", SPECIALS.replace("\n", "\r\n") + "  hello \r\nwo\u2028rld")
    vocab = vocab_lib.load_vocab(path)
    assert vocab.tokens[5:] == ("hello", "wo\u2028rld")  # split at "\n" only, as tf.gfile


def test_write_round_trip(tmp_path):
    vocab = vocab_lib.Vocab([*SPECIALS.split(), "a", "##b"])
    vocab.write(tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == SPECIALS + "a\n##b\n"
    assert vocab_lib.load_vocab(tmp_path / "out.txt").tokens == vocab.tokens


@pytest.mark.parametrize("name, content, error, message", [
    ("dupe.txt", SPECIALS + "a\nb\na\n", ValueError,
     r"dupe.txt:8: duplicate token 'a' \(first on line 6\)"),
    ("latin1.txt", SPECIALS.encode() + b"ok\nbad\xe9\n", ValueError,
     r"latin1.txt:7: not UTF-8 \(unexpected end of data at byte 3 of the line\)"),
    ("empty_line.txt", SPECIALS + "a\n\nb\n", ValueError, r"empty_line.txt:7: empty token"),
    ("blank_line.txt", SPECIALS + "a\n \t\n", ValueError, r"blank_line.txt:7: empty token"),
    ("nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", ValueError,
     r"nomask.txt: missing special token\(s\) \[MASK\]"),
    ("bom.txt", "\ufeff" + SPECIALS, ValueError, r"bom.txt: missing special token\(s\) \[PAD\]"),
])
def test_errors_name_file_and_line(tmp_path, name, content, error, message):
    with pytest.raises(error, match=message):
        vocab_lib.load_vocab(write(tmp_path, name, content))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt: vocab file not found"):
        vocab_lib.load_vocab(tmp_path / "nope.txt")


def test_vocab_from_tokens_errors():
    with pytest.raises(ValueError, match=r"vocabulary: duplicate token 'a' \(ids 5 and 6\)"):
        vocab_lib.Vocab([*SPECIALS.split(), "a", "a"])
    with pytest.raises(ValueError, match="token 5 is empty"):
        vocab_lib.Vocab([*SPECIALS.split(), ""])


def test_added_tokens(tmp_path):
    path = write(tmp_path, "vocab.txt", SPECIALS)
    assert vocab_lib.load_added_tokens(path) == []
    write(tmp_path, vocab_lib.ADDED_TOKENS_FILE, "covid-19\n\n SARS-CoV-2 \n")
    assert vocab_lib.load_added_tokens(path) == ["covid-19", "SARS-CoV-2"]
