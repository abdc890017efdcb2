"""Marks the modules named in $KBERT_TEST_HIDDEN_MODULES absent from this process: `import`
raises ModuleNotFoundError and `importlib.util.find_spec` returns None, as if their packages
were not installed (tests/fresh_process.py says why); exits with status 97 at a lookup of a
host other than this machine's (tests/network_guard.py); and freezes the heap at exit."""

import atexit
import gc
import os
import sys

from tests import network_guard

# At exit the interpreter collects every object once more: ~1.5 s for what TensorFlow's import
# made. Frozen first (as kbert's commands freeze it once TensorFlow starts), ~0.2 s. Registered
# first, so it runs after every other exit handler.
atexit.register(gc.freeze)

for _name in filter(None, os.environ.get("KBERT_TEST_HIDDEN_MODULES", "").split(",")):
    sys.modules.setdefault(_name, None)


network_guard.install(network_guard.exit_at)
