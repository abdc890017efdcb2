"""The wheel as a user installs it: its commands on PATH, its kbert, run outside the checkout.

Builds the wheel from a copy of the package's files, installs it (--no-deps) into a fresh
virtual environment whose dependencies are this environment's (a .pth line: no network), and
runs the command from a directory outside the checkout, with no PYTHONPATH.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tests.limits import SUBPROCESS_TIMEOUT
from tests.tools.runner import ROOT

MRPC = os.path.join(ROOT, "tests", "fixtures", "glue", "MRPC")
# What the wheel is built from, besides kbert/ (setup.cfg's metadata reads README.md).
FILES = ("setup.cfg", "pyproject.toml", "README.md", "LICENSE")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group(__name__),  # the wheel built and installed once (setup.cfg)
    pytest.mark.skipif(importlib.util.find_spec("setuptools") is None,
                       reason="building the wheel needs setuptools in this environment"),
]


def _run(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                            timeout=SUBPROCESS_TIMEOUT, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """The bin/ directory of a fresh environment with the wheel installed."""
    work = tmp_path_factory.mktemp("installed")
    source = work / "source"
    shutil.copytree(os.path.join(ROOT, "kbert"), source / "kbert",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in FILES:
        shutil.copy(os.path.join(ROOT, name), source)
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", work / "dist", source, cwd=work)
    (wheel,) = (work / "dist").iterdir()
    _run(sys.executable, "-m", "venv", "--without-pip", work / "venv", cwd=work)
    bin_dir = work / "venv" / "bin"
    site = _run(bin_dir / "python", "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=work).strip()
    with open(os.path.join(site, "dependencies.pth"), "w", encoding="utf-8") as f:
        f.write(sysconfig.get_path("purelib") + "\n")
    _run(sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "-q",
         "--no-deps", wheel, cwd=work)
    return bin_dir


def test_the_installed_kbert_is_the_wheels(venv, tmp_path):
    location = _run(venv / "python", "-c", "import kbert; print(kbert.__file__)", cwd=tmp_path)
    assert location.startswith(str(venv.parent)), location


def test_a_command_answers_help_and_fine_tunes(venv, tiny_google_dir, tmp_path):
    """The real entry point of run_classifier trains, evaluates and predicts in a fresh
    process (the tool's other tests run it in-process, or kill it)."""
    assert "--output_dir:" in _run(venv / "kbert-run-classifier", "--help", cwd=tmp_path)
    _run(venv / "kbert-run-classifier", "--task_name=MRPC", f"--data_dir={MRPC}",
         f"--init_checkpoint={tiny_google_dir}", "--output_dir=out", "--do_train", "--do_eval",
         "--do_predict", "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
         "--max_train_examples=6", "--learning_rate=1e-3", cwd=tmp_path)
    out = tmp_path / "out"
    assert {"eval_results.txt", "eval_results.json", "train_results.json", "MRPC.tsv",
            "model.keras", "vocab.txt", "logs"} <= set(os.listdir(out))
    assert json.loads((out / "train_results.json").read_text())["examples"] == 6
    assert "dev_f1 = " in (out / "eval_results.txt").read_text()
    assert len((out / "MRPC.tsv").read_text().splitlines()) == 5
