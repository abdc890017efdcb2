"""Importing kbert chooses TensorFlow's pooling CPU allocator, unless the user chose one.

What the pooling allocator saves (page faults, step time) depends on the machine, so it is
measured by `bench/cpu_allocator.py` and recorded in BENCHMARKS.md; here only the setting.
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
    assert imported == {"os"}
