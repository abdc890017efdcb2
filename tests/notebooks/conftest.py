"""Runs a notebook of notebooks/ top to bottom, in this process or in a fresh kernel.

`run_notebook` executes the code cells in order in this test process, in one namespace, as a
kernel would: TensorFlow and kbert are already imported here, so a notebook costs its own work
and not a kernel's start and imports (~10 s each on a 2-core VM); a Python process the notebook
starts (`subprocess.run([sys.executable, ...])`) is forked from the test worker's warm server
(tests/warm_process.py), ~5 s less each. One test
(`test_vocab_expansion_notebook.py`) runs its notebook in a real Jupyter kernel instead
(`run_notebook_in_kernel`), the path `make notebooks` takes for every notebook.
"""

import contextlib
import io
import os
import subprocess
import sys

import keras
import matplotlib
import nbformat
import pytest
from nbclient import NotebookClient

from tests import fresh_process
from tests import warm_process

NOTEBOOKS = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks")


def _read(name):
    """The notebook `name` and its committed bytes."""
    path = os.path.join(NOTEBOOKS, name)
    with open(path, "rb") as f:
        committed = f.read()
    return path, committed, nbformat.reads(committed.decode("utf-8"), as_version=4)


def _assert_unchanged(path, committed):
    with open(path, "rb") as f:
        assert f.read() == committed, f"{path} changed while the test ran it"


@pytest.fixture
def run_notebook(tmp_path, monkeypatch):
    """`run(name, env)`: executes notebooks/<name> in this process; returns its printed text.

    The environment gets `env` (each notebook's first cell reads its parameters from it) and
    the working directory is `tmp_path`, as `run_notebook_in_kernel` gives a kernel. A cell's
    exception fails the test, naming the cell. The committed file is left as it is, and
    checked to be. Keras starts from a fresh session and its dtype policy is put back after.
    """

    def run(name, env):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(subprocess, "run", _python_forked(subprocess.run))
        path, committed, notebook = _read(name)
        keras.backend.clear_session(free_memory=False)
        namespace = {"__name__": "__main__"}
        printed = io.StringIO()
        backend = matplotlib.get_backend()
        matplotlib.use("Agg")  # no display; the figures are only drawn
        try:
            with contextlib.redirect_stdout(printed):
                for index, cell in enumerate(notebook.cells):
                    if cell.cell_type != "code":
                        continue
                    code = compile(cell.source, f"{name}, code cell {index}", "exec")
                    exec(code, namespace)  # noqa: S102  (the notebook is the test's input)
        finally:
            import matplotlib.pyplot as plt

            plt.close("all")
            matplotlib.use(backend)
            keras.mixed_precision.set_global_policy("float32")
        _assert_unchanged(path, committed)
        return printed.getvalue()

    return run


def _python_forked(run):
    """`subprocess.run` whose `[sys.executable, ...]` children fork from the warm server, in
    the environment of a test's child process; any other program runs as before."""

    def forked_run(args, **kwargs):
        if not (isinstance(args, list) and args[:1] == [sys.executable]):
            return run(args, **kwargs)
        return warm_process.run(args, warm_process.environment(), **kwargs)

    return forked_run


@pytest.fixture
def run_notebook_in_kernel(tmp_path, monkeypatch):
    """`run(name, env)`: as `run_notebook`, but in a fresh Jupyter kernel, as a user runs it.
    The kernel hides no package, but a lookup of another host ends it (tests/network_guard.py)."""

    def run(name, env, timeout=180):
        kernel = fresh_process.environment({fresh_process.HIDDEN_MODULES_VARIABLE: "", **env})
        for key in ("PYTHONPATH", fresh_process.HIDDEN_MODULES_VARIABLE, *env):
            monkeypatch.setenv(key, kernel[key])
        path, committed, notebook = _read(name)
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        _assert_unchanged(path, committed)
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
        errors = [o for o in outputs if o.output_type == "error"]
        assert not errors, errors
        return "".join(o.get("text", "") for o in outputs)

    return run
