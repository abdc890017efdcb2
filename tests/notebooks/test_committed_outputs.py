"""The committed notebooks hold the outputs of a real run (`make notebooks`), fit to read."""

import os
import re

import nbformat
import pytest

from tests.notebooks.conftest import NOTEBOOKS

# The plots each notebook draws (issue 26): at least this many images.
IMAGES = {"glue": 2, "ner": 2, "squad": 2, "vocab_expansion": 1, "chinese": 4}
MACHINE_PATH = re.compile(r"/(work|tmp|root|home|Users|private)/")
MAX_FILE_BYTES = 1_500_000


def output_texts(output):
    """Every text an output holds: stream text, tracebacks, non-image display data."""
    texts = [output.get("text", ""), *output.get("traceback", [])]
    texts += [value if isinstance(value, str) else str(value)
              for mime, value in output.get("data", {}).items() if not mime.startswith("image/")]
    return texts


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_committed_notebook_shows_a_real_run(name):
    path = os.path.join(NOTEBOOKS, f"{name}.ipynb")
    assert os.path.getsize(path) < MAX_FILE_BYTES
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    first = notebook.cells[0]
    assert first.cell_type == "markdown" and "run-info" in first.metadata.get("tags", []), first
    assert re.search(r"`make notebooks` on \d{4}-\d\d-\d\d \d\d:\d\d UTC: .+ CPU cores.*"
                     r"minutes of wall time", first.source), first.source

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [i for i, cell in enumerate(code) if not cell.outputs] == []
    outputs = [output for cell in code for output in cell.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    texts = [text for output in outputs for text in output_texts(output)]
    assert not [t for t in texts if "Traceback (most recent call last)" in t]
    assert any(t.startswith("budget: ") for t in texts)  # the parameters cell says it
    leaks = [m.group(0) for text in texts for m in [MACHINE_PATH.search(text)] if m]
    assert leaks == [], leaks
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= IMAGES[name]
