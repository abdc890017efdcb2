"""notebooks/ner.ipynb runs top to bottom (tiny model, fixture sentences) in a fresh kernel."""

import os

import nbformat
from nbclient import NotebookClient

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "ner.ipynb")
CONLL = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conll")


def test_ner_notebook_runs(tiny_google_dir, tmp_path, monkeypatch):
    # The kernel inherits this environment: the notebook's first cell reads it.
    monkeypatch.setenv("KBERT_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("KBERT_CONLL_DIR", os.path.abspath(CONLL))
    monkeypatch.setenv("KBERT_CHECKPOINT", tiny_google_dir)
    monkeypatch.setenv("KBERT_WORK_DIR", str(tmp_path))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "8 train sentences, 6 dev sentences" in text
    assert "dev entity F1 " in text and "reloaded BertTokenClassifier with CRF" in text
    assert os.path.exists(tmp_path / "ner_tagger.keras")
