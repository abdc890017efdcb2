"""The environment of a test's fresh Python process: what a user's install of kbert has.

The test environment also holds the test extra's packages (scikit-learn, SciPy, matplotlib,
IPython, PyTorch, ...). Keras imports some of them on its own when they are installed (its
scikit-learn wrapper and its plotting utilities): ~2 s of a fresh process's ~5 s start. A child
started with `environment()` finds none of the modules of a distribution outside kbert's
declared dependencies (recursively, extras left out): `fresh_process_site/sitecustomize.py`
marks them absent in `sys.modules`, as Python documents for blocking an import. So a tool, an
export or `import kbert` runs as in a user's `pip install kbert-keras`, and a kbert module that
imported a test-only package fails here as it would there.
"""

import functools
import importlib.metadata
import os
import re

from packaging.requirements import Requirement

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fresh_process_site")
HIDDEN_MODULES_VARIABLE = "KBERT_TEST_HIDDEN_MODULES"
DISTRIBUTION = "kbert-keras"
# Modules that are this checkout's own, whatever an installed distribution also ships.
_NEVER_HIDDEN = frozenset({"kbert", "tests", "tools", "bench"})


def environment(env=None, allow=()):
    """`os.environ` for a child process: this checkout first on PYTHONPATH, then the site that
    hides the test-only packages, then `env` on top.

    Args:
        env: dict or None. Variables set for the child only.
        allow: sequence of distribution names the child may import besides kbert's
            dependencies, with their own (e.g. "pytest", "bert-tensorflow" for an oracle).

    Returns:
        dict.
    """
    paths = [ROOT, SITE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths),
            HIDDEN_MODULES_VARIABLE: ",".join(hidden_modules(tuple(allow))), **(env or {})}


@functools.cache
def hidden_modules(allow=()):
    """The top-level modules that only distributions outside `runtime_distributions(allow)`
    provide, sorted."""
    allowed = runtime_distributions(allow)
    providers = importlib.metadata.packages_distributions()
    return tuple(sorted(
        module for module, distributions in providers.items()
        if module.isidentifier() and module not in _NEVER_HIDDEN
        and not any(_key(d) in allowed for d in distributions)))


@functools.cache
def runtime_distributions(allow=()):
    """kbert's distribution, those it requires and theirs (extras left out), the `allow`ed ones
    with theirs, and a virtual environment's own installer (pip, setuptools, wheel): a set of
    normalised names."""
    names, pending = set(), [DISTRIBUTION, "pip", "setuptools", "wheel", *allow]
    while pending:
        name = _key(pending.pop())
        if name in names:
            continue
        names.add(name)
        try:
            requirements = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requirements:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return frozenset(names)


def _key(name):
    """A distribution name normalised as PEP 503 does."""
    return re.sub(r"[-_.]+", "-", name).lower()
