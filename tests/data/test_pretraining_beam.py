"""The Beam pipeline (extra `kbert[beam]`) in process; skipped without apache-beam."""

import os
import tempfile

import pytest

from kbert.data import records
from kbert.data.pretraining import instances
from kbert.data.pretraining import writer


def test_beam_writes_the_same_bytes_as_the_local_tool(wiki_sample, vocab_file, tmp_path,
                                                     monkeypatch):
    # Imported here, not at collection: only the worker that runs this test pays Beam's import.
    pytest.importorskip("apache_beam")
    from kbert.data.pretraining import beam_pipeline

    # Without a runner in the options nothing is fetched (Beam's DirectRunner downloads its
    # Prism binary from GitHub: the conftest's `no_network` fails that) and nothing is left in
    # the temporary directory.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))

    kwargs = dict(input_format="wikiextractor", num_shards=3,
                  config=instances.PretrainingDataConfig(dupe_factor=2))
    local = writer.create_pretraining_data(
        wiki_sample, str(tmp_path / "local" / "t.tfrecord"), vocab_file, progress=False,
        **kwargs)
    counts = beam_pipeline.create_pretraining_data_beam(
        wiki_sample, str(tmp_path / "beam" / "t.tfrecord"), vocab_file, **kwargs)
    assert sorted(os.path.basename(p) for p in counts) == sorted(
        os.path.basename(p) for p in local)
    for path, count in local.items():
        other = str(tmp_path / "beam" / os.path.basename(path))
        assert counts[other] == count
        with open(other, "rb") as a, open(path, "rb") as b:
            assert a.read() == b.read()
    meta = records.read_meta(str(tmp_path / "beam" / "t.tfrecord_meta.json"))
    assert meta["num_instances"] == sum(local.values())

    os.remove(tmp_path / "beam" / "t.tfrecord-00001-of-00003")  # a lost shard is redone
    again = beam_pipeline.create_pretraining_data_beam(
        wiki_sample, str(tmp_path / "beam" / "t.tfrecord"), vocab_file, **kwargs)
    assert again == counts
    assert os.listdir(tmp_path / "tmp") == []
