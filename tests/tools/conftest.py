"""The tools import this checkout's kbert (not an installed one)."""

import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(autouse=True)
def checkout_on_pythonpath(monkeypatch):
    # `python tools/x.py` puts tools/ first on sys.path, not the repository root.
    paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
