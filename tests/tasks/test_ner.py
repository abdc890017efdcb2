"""The NER recipe end to end on the CoNLL fixtures and a tiny Google checkpoint."""

import json
import os

import keras
import pytest

import kbert
from kbert.data import conll
from kbert.models.token_classifier import BertTokenClassifier
from kbert.tasks import ner
from kbert.tasks import ner_metrics
from tests.tasks.test_glue import assert_google_checkpoint
from tests.tasks.test_glue import assert_kept_epoch
from tests.tasks.test_glue import scripted_dev_scores

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conll")


def config(output_dir, **kwargs):
    defaults = dict(train_file=os.path.join(FIXTURES, "train.txt"),
                    dev_file=os.path.join(FIXTURES, "dev.txt"),
                    test_file=os.path.join(FIXTURES, "test.txt"),
                    max_seq_length=16, train_batch_size=8, eval_batch_size=4,
                    learning_rate=1e-3, num_train_epochs=1)
    return ner.NerConfig(output_dir=str(output_dir), **{**defaults, **kwargs})


class Interrupt(keras.callbacks.Callback):
    """Stops the first fit after its first epoch, as a killed job would."""

    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


def test_train_resume_evaluate_predict(tiny_google_dir, tmp_path, monkeypatch):
    out = tmp_path / "ner"
    run = config(out, init_checkpoint=tiny_google_dir, num_train_epochs=2, do_train=True,
                 do_eval=True, do_predict=True, keep_best_epoch=False)
    # Interrupted after epoch 1 (the backup is written before the interrupting callback) ...
    monkeypatch.setattr(keras.callbacks, "TensorBoard", lambda *a, **k: Interrupt())
    with pytest.raises(KeyboardInterrupt):
        ner.run_ner(run)
    assert os.path.isdir(out / "backup")
    monkeypatch.undo()
    # ... the same run again resumes at epoch 2 and finishes.
    results = ner.run_ner(run)
    train = results["train"]
    assert train["epochs_this_run"] == 1 and train["sentences"] == 13
    windows = train["windows"]
    assert windows > 13  # max_seq_length 16 splits the longer sentences
    assert train["steps"] >= 2 * -(-windows // 8)
    assert train["kept"] == "last" and train["kept_epoch"] == 2
    assert not os.path.exists(out / "backup")
    log = (out / "training_log.csv").read_text().splitlines()
    assert "dev_f1" in log[0] and len(log) == 3  # header, epoch 1, epoch 2
    assert "dev_entity" not in log[0] and "val_" not in log[0]  # real columns only
    assert (out / "labels.txt").read_text().split() == list(
        conll.label_vocabulary(conll.read_ner_file(os.path.join(FIXTURES, "train.txt"))))
    dev = results["eval"]["dev"]
    assert dev["sentences"] == 6 and 0 <= dev["f1"] <= 1 and 0 <= dev["word_accuracy"] <= 1
    # The scores are those of the written predictions.
    written = [[line.split() for line in block.splitlines()] for block in
               (out / "dev_predictions.txt").read_text().strip().split("\n\n")]
    assert len(written) == 6 and all(len(row) == 3 for s in written for row in s)
    gold = [[row[1] for row in s] for s in written]
    predicted = [[row[2] for row in s] for s in written]
    assert ner_metrics.entity_scores(gold, predicted)["f1"] == dev["f1"]
    assert gold[0][:3] == ["O", "O", "B-ORG"]  # BIO, from the file's IOB1
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert f"dev_f1 = {dev['f1']}" in lines and f"global_step = {train['steps']}" in lines
    assert any(line.startswith("test_f1 = ") for line in lines)
    assert json.loads((out / "eval_results.json").read_text())["dev"]["f1"] == dev["f1"]
    test_lines = (out / "test_predictions.txt").read_text().strip().split("\n\n")
    assert len(test_lines) == 5 and test_lines[0].splitlines()[0].startswith("SOCCER O ")
    # The tagger in Google's format too (kbert's `cls/ner/*` layout, issue 20).
    n = len(train["labels"])
    assert_google_checkpoint(out, {"cls/ner/output_weights": (n, 12), "cls/ner/output_bias": (n,)},
                             lambda path: BertTokenClassifier.from_google_checkpoint(path, n))
    # Evaluating again later reads output_dir/model.keras, labels.txt and vocab.txt.
    again = ner.run_ner(config(out, do_eval=True))
    assert again["eval"]["dev"]["f1"] == dev["f1"]


def test_crf_on_two_column_bmes_data(tiny_google_dir, tmp_path):
    resume = os.path.join(FIXTURES, "resume.char.bmes")
    results = ner.run_ner(config(tmp_path, train_file=resume, dev_file=resume, test_file=None,
                                 data_format="two_column", use_crf=True,
                                 init_checkpoint=tiny_google_dir, do_train=True, do_eval=True,
                                 evaluate_every_epoch=False, max_train_examples=2))
    assert results["train"]["use_crf"] and results["train"]["sentences"] == 2
    assert "best_epoch" not in results["train"]
    model = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert model.use_crf and model.num_labels == len(results["train"]["labels"])
    assert results["eval"]["dev"]["sentences"] == 3
    n = model.num_labels
    assert_google_checkpoint(tmp_path, {
        "cls/ner/output_weights": (n, 12), "cls/ner/output_bias": (n,),
        "cls/ner/crf/transitions": (n, n), "cls/ner/crf/start_transitions": (n,),
        "cls/ner/crf/end_transitions": (n,)},
        lambda path: BertTokenClassifier.from_google_checkpoint(path, n, use_crf=True))


def test_config_validation(tiny_google_dir, tmp_path):
    with pytest.raises(ValueError, match="At least one of do_train"):
        config(tmp_path)
    with pytest.raises(ValueError, match="do_eval needs dev_file"):
        config(tmp_path, dev_file=None, do_eval=True)
    with pytest.raises(ValueError, match="must be a whole number"):
        config(tmp_path, do_train=True, num_train_epochs=1.5)
    with pytest.raises(ValueError, match="data_format must be one of"):
        config(tmp_path, do_train=True, data_format="tsv")
    with pytest.raises(ValueError, match="init_checkpoint is required"):
        ner.run_ner(config(tmp_path, do_train=True))
    with pytest.raises(ValueError, match="max_seq_length=32 is longer than the model's "
                                         "max_position_embeddings=16"):
        ner.run_ner(config(tmp_path, do_train=True, init_checkpoint=tiny_google_dir,
                           max_seq_length=32))
    with pytest.raises(FileNotFoundError, match="model.keras: not found"):
        ner.run_ner(config(tmp_path, do_eval=True))


def test_the_best_epoch_is_kept(tiny_google_dir, tmp_path, monkeypatch):
    snapshots = scripted_dev_scores(monkeypatch, [0.5, 0.3])  # drops in the last epoch
    out = tmp_path / "ner"
    results = ner.run_ner(config(out, init_checkpoint=tiny_google_dir, num_train_epochs=2,
                                 do_train=True, do_eval=True, test_file=None))
    assert results["train"]["best_epoch"] == 1 and results["train"]["kept_epoch"] == 1
    assert_kept_epoch(out, snapshots, 1, BertTokenClassifier)


def test_one_epoch_scores_dev_once(tiny_google_dir, tmp_path, monkeypatch):
    calls = []
    original = ner.predict_windows
    monkeypatch.setattr(ner, "predict_windows",
                        lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    results = ner.run_ner(config(tmp_path, init_checkpoint=tiny_google_dir, do_train=True,
                                 do_eval=True, test_file=None, max_train_examples=4))
    assert len(calls) == 1  # the epoch's dev predictions are the final evaluation's
    written = (tmp_path / "dev_predictions.txt").read_text().strip().split("\n\n")
    predicted = [[line.split()[2] for line in block.splitlines()] for block in written]
    gold = [[line.split()[1] for line in block.splitlines()] for block in written]
    assert ner_metrics.entity_scores(gold, predicted)["f1"] == results["eval"]["dev"]["f1"]


def test_document_context_and_overlapping_windows(tiny_google_dir, tmp_path):
    results = ner.run_ner(config(tmp_path, init_checkpoint=tiny_google_dir, do_train=True,
                                 do_eval=True, do_predict=True, evaluate_every_epoch=False,
                                 document_context=True, window_stride=5))
    train = results["train"]
    assert train["document_context"] and train["window_stride"] == 5
    # The longer sentences of the fixture take overlapping windows: more than consecutive.
    consecutive = conll.featurize(conll.read_ner_file(os.path.join(FIXTURES, "train.txt")),
                                  kbert.FullTokenizer(os.path.join(tiny_google_dir,
                                                                   "vocab.txt")), 16)
    assert train["windows"] > len(consecutive)
    # One prediction per word of every target sentence, no more.
    for split, path in (("dev", "dev.txt"), ("test", "test.txt")):
        gold = conll.read_ner_file(os.path.join(FIXTURES, path))
        written = (tmp_path / f"{split}_predictions.txt").read_text().strip().split("\n\n")
        assert [[line.split()[0] for line in block.splitlines()] for block in written] == [
            list(s.words) for s in gold]
    with pytest.raises(ValueError, match=r"window_stride must be in \[1, max_seq_length - 2"):
        config(tmp_path, do_train=True, window_stride=15)


def test_document_context_without_docstart_is_one_document(tmp_path, caplog):
    resume = os.path.join(FIXTURES, "resume.char.bmes")
    run = config(tmp_path, train_file=resume, data_format="two_column", do_train=True,
                 document_context=True)
    with caplog.at_level("WARNING"):
        sentences = ner.read_sentences(run, resume)
    assert {s.document for s in sentences} == {0}
    assert "one document (no -DOCSTART- lines" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        # One -DOCSTART-, at the top: one document.
        ner.read_sentences(config(tmp_path, do_train=True, document_context=True),
                           os.path.join(FIXTURES, "train.txt"))
    assert "one document" in caplog.text
