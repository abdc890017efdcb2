"""notebooks/ner.ipynb runs top to bottom (tiny model, fixture sentences) in the test process."""

import os

CONLL = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conll")


def test_ner_notebook_runs(run_notebook, tiny_google_dir, tmp_path):
    text = run_notebook("ner.ipynb", {
        "KBERT_NOTEBOOK_TINY": "1", "KBERT_CONLL_DIR": os.path.abspath(CONLL),
        "KBERT_CHECKPOINT": tiny_google_dir, "KBERT_WORK_DIR": str(tmp_path)})
    assert "8 train sentences, 6 dev sentences" in text
    assert "dev entity F1 " in text and "reloaded BertTokenClassifier with CRF" in text
    assert os.path.exists(tmp_path / "ner_tagger.keras")
