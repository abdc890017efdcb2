"""The documentation site builds in strict mode, and its API reference covers `kbert.__all__`.

Strict mode turns every MkDocs warning into a failure: a link to a page or anchor that does not
exist, a `::: kbert.NAME` that mkdocstrings cannot resolve, a docstring whose arguments do not
match the signature, a snippet (BENCHMARKS.md, CHANGELOG.md) that is missing. The build reads
the notebooks as committed and does not execute them, so it takes seconds.
"""

import os
import re
import subprocess
import sys

import pytest

import kbert
from tests.limits import SUBPROCESS_TIMEOUT

# On one worker (setup.cfg), so the site is built once.
pytestmark = pytest.mark.xdist_group(__name__)

ROOT = os.path.join(os.path.dirname(__file__), "..")
API_PAGE = os.path.join(ROOT, "docs", "api.md")
NOTEBOOKS = sorted(name for name in os.listdir(os.path.join(ROOT, "notebooks"))
                   if name.endswith(".ipynb"))
DIRECTIVE = re.compile(r"^::: kbert\.(\w+)\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as `make docs` builds it, into a temporary directory."""
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    return site_dir


def test_api_reference_lists_every_public_name_once():
    with open(API_PAGE, encoding="utf-8") as f:
        documented = DIRECTIVE.findall(f.read())
    assert len(documented) == len(set(documented)), "docs/api.md lists a name twice"
    assert set(documented) == set(kbert.__all__), (
        f"docs/api.md vs kbert.__all__: missing {sorted(set(kbert.__all__) - set(documented))}, "
        f"not exported {sorted(set(documented) - set(kbert.__all__))}")


def test_site_builds_strict_with_every_page(site):
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in kbert.__all__:
        assert f'id="kbert.{name}"' in api, f"the API page has no entry for kbert.{name}"
    benchmarks = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert "Current results" in benchmarks and "--8&lt;--" not in benchmarks
    for notebook in NOTEBOOKS:
        page = (site / "notebooks" / notebook[:-len(".ipynb")] / "index.html").read_text(
            encoding="utf-8")
        assert "data:image/png" in page, f"{notebook} rendered without its plots"


def test_every_notebook_is_on_the_site():
    # docs/notebooks/ holds links to ../notebooks/, which MkDocs cannot read from outside docs/.
    assert sorted(os.listdir(os.path.join(ROOT, "docs", "notebooks"))) == NOTEBOOKS
