"""Marks the modules named in $KBERT_TEST_HIDDEN_MODULES absent from this process: `import`
raises ModuleNotFoundError and `importlib.util.find_spec` returns None, as if their packages
were not installed (tests/fresh_process.py says why)."""

import os
import sys

for _name in filter(None, os.environ.get("KBERT_TEST_HIDDEN_MODULES", "").split(",")):
    sys.modules.setdefault(_name, None)
