"""Runs a notebook of notebooks/ top to bottom in a fresh kernel, as a user would."""

import os

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks")


@pytest.fixture
def run_notebook(tmp_path, monkeypatch):
    """`run(name, env)`: executes notebooks/<name> with `env` set; returns its printed text.

    The kernel inherits the environment (each notebook's first cell reads its parameters from
    it) and runs in `tmp_path`. Fails on any cell error. The notebook is executed in memory: its
    committed file (with the outputs of `make notebooks`) is left as it is, and checked to be.
    """

    def run(name, env, timeout=180):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        path = os.path.join(NOTEBOOKS, name)
        with open(path, "rb") as f:
            committed = f.read()
        notebook = nbformat.reads(committed.decode("utf-8"), as_version=4)
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        with open(path, "rb") as f:
            assert f.read() == committed, f"{path} changed while the test ran it"
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
        errors = [o for o in outputs if o.output_type == "error"]
        assert not errors, errors
        return "".join(o.get("text", "") for o in outputs)

    return run
