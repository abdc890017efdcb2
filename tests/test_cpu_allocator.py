"""Importing kbert chooses TensorFlow's pooling CPU allocator and a top pad for glibc's malloc,
unless the user chose.

What they save (page faults, step time) depends on the machine, so it is measured by
`bench/cpu_allocator.py` and `bench/malloc_top_pad.py` and recorded in BENCHMARKS.md; here
only the settings.
"""

import ast
import importlib
import os
import pathlib

import pytest

import kbert
from kbert import cpu_allocator


@pytest.mark.parametrize("chosen, expected", [(None, "true"), ("false", "false"),
                                              ("true", "true")])
def test_the_pooling_allocator_is_chosen_unless_the_user_chose(monkeypatch, chosen, expected):
    if chosen is None:
        monkeypatch.delenv(cpu_allocator.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(cpu_allocator.ENV_VAR, chosen)
    importlib.reload(cpu_allocator)
    assert os.environ[cpu_allocator.ENV_VAR] == expected


def test_kbert_sets_it_before_tensorflow_starts():
    """kbert's first import sets the variable, and imports nothing that could start TensorFlow
    (which reads the variable once, when it makes its first tensor)."""
    init = ast.parse(pathlib.Path(kbert.__file__).read_text(encoding="utf-8"))
    first_import = next(node for node in init.body if isinstance(node, ast.ImportFrom))
    assert [alias.name for alias in first_import.names] == ["cpu_allocator"]
    allocator = ast.parse(pathlib.Path(cpu_allocator.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(allocator)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert imported == {"ctypes", "os"}


class RecordingLibc:
    """Stands in for the C library: records `mallopt` calls and answers as glibc does."""

    def __init__(self, accepts=True):
        self.calls, self.accepts = [], accepts

    def mallopt(self, option, value):
        self.calls.append((option, value))
        return int(self.accepts)


@pytest.mark.parametrize("environ, expected", [
    ({}, 64 << 20),
    ({"KBERT_MALLOC_TOP_PAD": "1048576"}, 1 << 20),
    ({"KBERT_MALLOC_TOP_PAD": "0"}, 0),
    ({"MALLOC_TOP_PAD_": "0"}, 0),
    ({"MALLOC_MMAP_THRESHOLD_": "131072"}, 0),
    ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.top_pad=4096"}, 0),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, 0),
    ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, 64 << 20),
])
def test_the_top_pad_is_set_unless_the_user_chose(environ, expected):
    libc = RecordingLibc()
    assert cpu_allocator.set_malloc_top_pad(environ, libc) == expected
    # The mmap threshold first: setting the pad turns glibc's dynamic one off.
    assert libc.calls == ([(cpu_allocator.M_MMAP_THRESHOLD, 32 << 20),
                           (cpu_allocator.M_TOP_PAD, expected)] if expected else [])


def test_a_refused_top_pad_is_reported_as_none():
    assert cpu_allocator.set_malloc_top_pad({}, RecordingLibc(accepts=False)) == 0


@pytest.mark.parametrize("value", ["64M", "-1", ""])
def test_a_bad_top_pad_names_the_variable(value):
    with pytest.raises(ValueError, match=f"KBERT_MALLOC_TOP_PAD={value!r}: expected a number"):
        cpu_allocator.set_malloc_top_pad({"KBERT_MALLOC_TOP_PAD": value}, RecordingLibc())


def test_the_process_c_library_takes_the_pad_on_glibc():
    """On glibc, the real `mallopt` accepts the pad (M_TOP_PAD is its option -2); elsewhere
    kbert leaves the C library alone."""
    try:
        on_glibc = bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, OSError, ValueError):
        on_glibc = False
    assert cpu_allocator.set_malloc_top_pad({}) == (64 << 20 if on_glibc else 0)
