"""The import-layer contracts of setup.cfg hold (import-linter)."""

import os
import shutil
import subprocess
import sys


def test_import_contracts():
    root = os.path.join(os.path.dirname(__file__), "..")
    lint = shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    result = subprocess.run([lint], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
