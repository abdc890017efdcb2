"""disk_cache: the character table and the tokenizer probe, computed once per machine."""

import os

import numpy as np
import pytest

from kbert.tokenization import char_table
from kbert.tokenization import disk_cache
from kbert.tokenization import shortcut


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KBERT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting(arrays):
    calls = []

    def compute():
        calls.append(1)
        return arrays
    return compute, calls


def test_computes_once_per_key_then_reads(cache):
    arrays = (np.arange(5, dtype=np.int32), np.array([7], np.int64))
    compute, calls = _counting(arrays)
    first = disk_cache.cached_arrays("t", "key one", compute)
    second = disk_cache.cached_arrays("t", "key one", compute)
    assert len(calls) == 1 and len(os.listdir(cache)) == 1
    for got in (first, second):
        assert [a.dtype for a in got] == [np.int32, np.int64]
        for a, b in zip(got, arrays, strict=True):
            np.testing.assert_array_equal(a, b)
    disk_cache.cached_arrays("t", "key two", compute)  # another key: computed again
    assert len(calls) == 2 and len(os.listdir(cache)) == 2


def test_damaged_file_is_recomputed_and_rewritten(cache):
    compute, calls = _counting((np.arange(3),))
    disk_cache.cached_arrays("t", "k", compute)
    (path,) = cache.iterdir()
    path.write_bytes(b"not an npz")
    np.testing.assert_array_equal(disk_cache.cached_arrays("t", "k", compute)[0], np.arange(3))
    np.testing.assert_array_equal(disk_cache.cached_arrays("t", "k", compute)[0], np.arange(3))
    assert len(calls) == 2


def test_off_or_unwritable_still_computes(tmp_path, monkeypatch):
    compute, calls = _counting((np.arange(2),))
    monkeypatch.setenv("KBERT_CACHE_DIR", "")
    disk_cache.cached_arrays("t", "k", compute)
    disk_cache.cached_arrays("t", "k", compute)
    assert len(calls) == 2 and not list(tmp_path.iterdir())
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("KBERT_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    np.testing.assert_array_equal(disk_cache.cached_arrays("t", "k", compute)[0], np.arange(2))


def test_char_table_from_the_cache_equals_the_computed_one(cache):
    computed = char_table.compute_char_table(True)
    for _ in range(2):  # written, then read back
        cached = char_table.build_char_table.__wrapped__(True)
        for a, b in zip(cached, computed, strict=True):
            assert a.dtype == b.dtype == np.int32
            np.testing.assert_array_equal(a, b)
    assert len(os.listdir(cache)) == 1


def test_probe_from_the_cache_equals_the_probe(cache):
    probed = shortcut.probe_safe_characters(False)
    assert len(probed) > 100 and all(type(cp) is int for cp in probed)
    assert shortcut.safe_characters.__wrapped__(False) == probed  # written
    assert shortcut.safe_characters.__wrapped__(False) == probed  # read back
    assert len([f for f in os.listdir(cache) if f.startswith("fast_tokenizer_safe")]) == 1
