"""tests/fresh_process.py: a test's child process has kbert and what it requires, and none of
the test extra's packages."""

import subprocess
import sys

from tests import fresh_process
from tests.limits import SUBPROCESS_TIMEOUT

FOUND = ("import importlib.util, sys\n"
         "print(*(importlib.util.find_spec(name) is not None for name in sys.argv[1:]))")


def _found(names, **kwargs):
    result = subprocess.run([sys.executable, "-c", FOUND, *names], capture_output=True,
                            text=True, timeout=SUBPROCESS_TIMEOUT,
                            env=fresh_process.environment(**kwargs))
    assert result.returncode == 0, result.stderr[-2000:]
    return dict(zip(names, (word == "True" for word in result.stdout.split()), strict=True))


def test_the_runtime_is_kbert_and_what_it_requires():
    runtime = fresh_process.runtime_distributions()
    assert {"kbert-keras", "tensorflow", "keras", "tensorflow-text", "keras-hub", "keras-nlp",
            "absl-py", "numpy"} <= runtime
    assert not {"scikit-learn", "scipy", "matplotlib", "torch", "pytest"} & runtime
    hidden = set(fresh_process.hidden_modules())
    assert {"sklearn", "scipy", "matplotlib", "IPython", "torch", "pytest"} <= hidden
    assert not {"tensorflow", "keras", "keras_hub", "tensorflow_text", "numpy", "absl", "kbert",
                "tests"} & hidden


def test_a_child_finds_the_runtime_but_not_the_test_extra():
    names = ("kbert", "tests.limits", "tensorflow", "keras_hub", "tensorflow_text", "sklearn",
             "scipy", "matplotlib", "torch", "pytest")
    assert _found(names) == {name: name in names[:5] for name in names}
    assert _found(["pytest", "sklearn"], allow=["pytest"]) == {"pytest": True, "sklearn": False}
    result = subprocess.run([sys.executable, "-c", "import sklearn"], capture_output=True,
                            text=True, timeout=SUBPROCESS_TIMEOUT,
                            env=fresh_process.environment())
    assert result.returncode == 1 and "ModuleNotFoundError" in result.stderr
