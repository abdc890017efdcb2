"""create_pretraining_data on real text with the real vocab: bytes, shards, resume, errors."""

import json
import os

import numpy as np
import pytest

from kbert.data.pretraining import instances
from kbert.data.pretraining import writer


def create(sample, out, vocab_file, **kwargs):
    kwargs.setdefault("config", instances.PretrainingDataConfig(dupe_factor=2))
    return writer.create_pretraining_data(
        sample, str(out), vocab_file, input_format="wikiextractor", progress=False, **kwargs)


def read_bytes(paths):
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.append(f.read())
    return out


def test_same_seed_same_bytes(wiki_sample, vocab_file, tmp_path):
    a = create(wiki_sample, tmp_path / "a" / "t.tfrecord@2", vocab_file)
    b = create(wiki_sample, tmp_path / "b" / "t.tfrecord@2", vocab_file)
    c = create(wiki_sample, tmp_path / "c" / "t.tfrecord@2", vocab_file, random_seed=1)
    assert sorted(a.values()) == sorted(b.values()) and sum(a.values()) > 500
    assert read_bytes(a) == read_bytes(b)
    assert read_bytes(a) != read_bytes(c)
    meta = json.loads((tmp_path / "a" / "t.tfrecord_meta.json").read_text())
    assert meta["num_instances"] == sum(a.values())
    assert meta["schema"]["input_ids"] == ["int64", 128]


def test_rerun_skips_complete_shards_and_resumes(wiki_sample, vocab_file, tmp_path,
                                                 monkeypatch):
    reference = create(wiki_sample, tmp_path / "ref" / "t.tfrecord@3", vocab_file)
    output = tmp_path / "run" / "t.tfrecord@3"
    real = instances.instance_batches
    calls = []

    def interrupted(*args, **kwargs):  # killed while making the second shard
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        yield from real(*args, **kwargs)

    monkeypatch.setattr(instances, "instance_batches", interrupted)
    with pytest.raises(KeyboardInterrupt):
        create(wiki_sample, output, vocab_file)
    monkeypatch.setattr(instances, "instance_batches", real)
    names = sorted(os.listdir(tmp_path / "run"))
    assert names == ["t.tfrecord-00000-of-00003", "t.tfrecord_meta.json"]  # no partial shard
    first = os.stat(tmp_path / "run" / names[0]).st_mtime_ns

    counts = create(wiki_sample, output, vocab_file)
    assert os.stat(tmp_path / "run" / names[0]).st_mtime_ns == first  # skipped
    assert read_bytes(counts) == read_bytes(reference)
    with pytest.raises(ValueError, match="other settings.*dupe_factor"):
        create(wiki_sample, output, vocab_file,
               config=instances.PretrainingDataConfig(dupe_factor=3))


def test_a_shard_damaged_after_a_complete_run_is_written_again(wiki_sample, vocab_file,
                                                               tmp_path, caplog):
    counts = create(wiki_sample, tmp_path / "t.tfrecord@2", vocab_file)
    shards = read_bytes(sorted(counts))
    with open(sorted(counts)[0], "r+b") as f:  # cut after the run: its sidecar says complete
        f.truncate(len(shards[0]) // 2)
    with caplog.at_level("WARNING", logger="absl"):
        assert create(wiki_sample, tmp_path / "t.tfrecord@2", vocab_file) == counts
    assert f"{sorted(counts)[0]}: {len(shards[0]) // 2} bytes, but it was written with " in (
        caplog.text)
    assert read_bytes(sorted(counts)) == shards


def test_clear_errors(wiki_sample, vocab_file, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt: vocab file not found"):
        create(wiki_sample, tmp_path / "o", str(tmp_path / "nope.txt"))
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        create(str(tmp_path / "missing*"), tmp_path / "o", vocab_file)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="the input is empty"):
        create(str(empty), tmp_path / "o", vocab_file)
    titles_only = tmp_path / "wiki_00"
    titles_only.write_text('<doc id="1" title="A">\nA\n\n</doc>\n<doc id="2" title="B">\nB\n'
                           "</doc>\n")
    with pytest.raises(ValueError, match="no document has any text"):
        create(str(titles_only), tmp_path / "out" / "t.tfrecord", vocab_file)
    assert not (tmp_path / "out").exists()  # nothing left behind, not even the directory
    # WikiExtractor's output read as Google's text format would train on its <doc> lines.
    # The check looks at every file: the first (plain text) passes, the second is named.
    plain = tmp_path / "plain.txt"
    plain.write_text("\nA sentence.\nAnother one.\n")
    with pytest.raises(ValueError, match=r"wiki_00:1: a WikiExtractor <doc \.\.\.> line, but "
                                         r"input_format is 'text'.*--input_format=wikiextractor"):
        writer.create_pretraining_data(f"{plain},{titles_only}", str(tmp_path / "out" / "t"),
                                       vocab_file, input_format="text", progress=False)
    assert not (tmp_path / "out").exists()


def test_batch_tokenizer_gives_full_tokenizers_ids(vocab_file, wiki_sample_text):
    from kbert import tokenization

    sentences = [
        "Plain ASCII, with punctuation (and digits 1234)!", "Σίσυφος ΣΊΣΥΦΟΣ aΣ b",
        "ﬁne ½ 6½ ³ ™ № …", "Straße İstanbul Ǆ", "tab\tand\x00nul\x7f", "中文字符 and カタカナ",
        "x" * 201, "é" * 60, "ａｂｃ１２３", "café naïve résumé", "",
    ]
    with open(wiki_sample_text, encoding="utf-8") as f:
        sentences += [line.strip() for line in f if not line.isascii()]
    tokenizer = writer.BatchTokenizer(vocab_file)
    ids, lengths = tokenizer(sentences)
    exact = tokenization.FullTokenizer(vocab_file).tokenize_ids(sentences)
    np.testing.assert_array_equal(lengths, exact.row_lengths().numpy())
    np.testing.assert_array_equal(ids, exact.flat_values.numpy())
