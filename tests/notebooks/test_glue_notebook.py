"""notebooks/glue.ipynb runs top to bottom (tiny model, 8 examples) in the test process."""

import os

MRPC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue", "MRPC")


def test_glue_notebook_runs(run_notebook, tiny_google_dir, tmp_path):
    text = run_notebook("glue.ipynb", {
        "KBERT_NOTEBOOK_TINY": "1", "KBERT_GLUE_DIR": os.path.abspath(MRPC),
        "KBERT_CHECKPOINT": tiny_google_dir, "KBERT_WORK_DIR": str(tmp_path)})
    assert "8 train pairs, 5 dev pairs" in text and "reloaded BertClassifier" in text
    assert os.path.exists(tmp_path / "mrpc_classifier.keras")
