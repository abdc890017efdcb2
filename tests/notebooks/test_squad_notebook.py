"""notebooks/squad.ipynb runs top to bottom (tiny model, a few paragraphs) in the test process."""

import os

import keras

import kbert
from tests.data.test_squad import EXCERPT


def test_squad_notebook_runs(run_notebook, minilm_dir, tmp_path):
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
    text = run_notebook("squad.ipynb", {
        "KBERT_NOTEBOOK_TINY": "1", "KBERT_SQUAD_FILE": os.path.abspath(EXCERPT),
        "KBERT_CHECKPOINT": str(checkpoint), "KBERT_WORK_DIR": str(tmp_path / "work")})
    assert "54 training questions, 13 held-out questions" in text
    assert "['nbest_predictions.json', 'predictions.json']" in text
    assert os.path.exists(tmp_path / "work" / "predictions.json")
