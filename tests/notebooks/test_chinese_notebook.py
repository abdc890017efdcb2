"""notebooks/chinese.ipynb runs top to bottom (tiny model, fixture reviews) in the test process."""

import os
import re

import keras

import kbert
from tests.conftest import TINY_RELEASE_CONFIG

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "chinese",
                       "chnsenticorp_train_head.tsv")


def test_chinese_notebook_runs(run_notebook, minilm_dir, tmp_path):
    # ChnSentiCorp's layout from the fixture: 200 train reviews, 100 dev reviews with a qid.
    with open(FIXTURE, encoding="utf-8") as f:
        rows = f.read().splitlines()[1:]
    data = tmp_path / "ChnSentiCorp"
    data.mkdir()
    (data / "train.tsv").write_text("label\ttext_a\n" + "\n".join(rows[:200]) + "\n", "utf-8")
    (data / "dev.tsv").write_text("qid\tlabel\ttext_a\n" + "".join(
        f"{i}\t{row}\n" for i, row in enumerate(rows[200:])), "utf-8")
    # A tiny random BERT with the real uncased vocab (994 [unused] slots, few CJK characters).
    checkpoint = tmp_path / "tiny_google"
    config = kbert.BertConfig(**dict(TINY_RELEASE_CONFIG, vocab_size=30522,
                                     max_position_embeddings=48))
    keras.utils.set_random_seed(0)
    kbert.save_google_checkpoint(kbert.BertEncoder(**config.encoder_kwargs()),
                                 str(checkpoint / "bert_model.ckpt"),
                                 vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    text = run_notebook("chinese.ipynb", {
        "KBERT_NOTEBOOK_TINY": "1", "KBERT_CHNSENTICORP_DIR": str(data),
        "KBERT_CHECKPOINT": str(checkpoint), "KBERT_WORK_DIR": str(tmp_path / "work")})
    added = int(re.search(r"candidates, (\d+) added", text).group(1))
    assert 500 < added <= 994, text
    before = float(re.search(r"before: CJK characters (\S+)% known", text).group(1))
    after = float(re.search(r"after:  CJK characters (\S+)% known", text).group(1))
    assert before < 40 and after > 95, text  # 994 slots for about 1,450 missed characters
    assert "64 train reviews, 100 dev reviews" in text
    assert re.search(r"after: \[.*'净'", text)  # a character that was [UNK] before
    assert "dev accuracy: " in text and "served in a fresh process: " in text
    assert "vocab.txt" in text.split("vocab asset:")[1]
