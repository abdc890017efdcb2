"""notebooks/squad.ipynb runs top to bottom (tiny model, a few paragraphs) in a fresh kernel."""

import os

import keras
import nbformat
from nbclient import NotebookClient

import kbert
from tests.data.test_squad import EXCERPT

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "squad.ipynb")


def test_squad_notebook_runs(minilm_dir, tmp_path, monkeypatch):
    # A tiny random BERT with the real uncased vocab, so the text is tokenized for real.
    checkpoint = tmp_path / "tiny_google"
    config = kbert.BertConfig(
        vocab_size=30522, hidden_size=12, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=20, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=48, type_vocab_size=2,
        initializer_range=0.02)
    keras.utils.set_random_seed(0)
    kbert.save_google_checkpoint(kbert.BertEncoder(**config.encoder_kwargs()),
                                 str(checkpoint / "bert_model.ckpt"),
                                 vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    # The kernel inherits this environment: the notebook's first cell reads it.
    monkeypatch.setenv("KBERT_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("KBERT_SQUAD_FILE", os.path.abspath(EXCERPT))
    monkeypatch.setenv("KBERT_CHECKPOINT", str(checkpoint))
    monkeypatch.setenv("KBERT_WORK_DIR", str(tmp_path / "work"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "54 training questions, 13 held-out questions" in text
    assert "['nbest_predictions.json', 'predictions.json']" in text
    assert os.path.exists(tmp_path / "work" / "predictions.json")
