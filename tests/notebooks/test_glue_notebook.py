"""notebooks/glue.ipynb runs top to bottom (tiny model, 8 examples) in a fresh kernel."""

import os

import nbformat
from nbclient import NotebookClient

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "glue.ipynb")
MRPC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue", "MRPC")


def test_glue_notebook_runs(tiny_google_dir, tmp_path, monkeypatch):
    # The kernel inherits this environment: the notebook's first cell reads it.
    monkeypatch.setenv("KBERT_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("KBERT_GLUE_DIR", os.path.abspath(MRPC))
    monkeypatch.setenv("KBERT_CHECKPOINT", tiny_google_dir)
    monkeypatch.setenv("KBERT_WORK_DIR", str(tmp_path))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "8 train pairs, 5 dev pairs" in text and "reloaded BertClassifier" in text
    assert os.path.exists(tmp_path / "mrpc_classifier.keras")
