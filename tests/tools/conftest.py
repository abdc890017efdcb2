"""The tools import this checkout's kbert (not an installed one) and their sibling modules."""

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Tests that import a tool in-process find its sibling modules (_cli, _flags) as it does.
sys.path.insert(0, os.path.join(ROOT, "tools"))


@pytest.fixture(autouse=True)
def checkout_on_pythonpath(monkeypatch):
    # `python tools/x.py` puts tools/ first on sys.path, not the repository root.
    paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
