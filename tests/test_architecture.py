"""The import-layer contracts of setup.cfg hold (import-linter)."""

import os
import shutil
import subprocess
import sys

from tests.limits import SUBPROCESS_TIMEOUT


def test_import_contracts():
    root = os.path.join(os.path.dirname(__file__), "..")
    lint = shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    result = subprocess.run([lint], cwd=root, capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
