"""The multi-label recipe through `tools/run_classifier.py --multi_label`, on the tiny release.

Scores are checked against scikit-learn applied to the probabilities the recipe wrote, so the
recipe's own metric code is not its own oracle.
"""

import csv
import json

import keras
import numpy as np
import pytest
import sklearn.metrics

import kbert
from kbert.tasks import configs
from kbert.tasks import multi_label
from tests.tools.runner import run_tool

# What the recipe reads, writes and resumes; the traced step has its own tests (tests/eager.py).
pytestmark = pytest.mark.usefixtures("eager_functions")

LABELS = ("news", "quote", "said")
# Texts of the tiny vocab; a label is there when its cue word is: "said" -> said, '"' -> quote,
# "the" -> news. Some rows have none, some all three.
TEXTS = ["he said that", '" it was "', "the a of", 'he said " it "', "the s was", "a to of",
         'the said " a "', "it is on", "he said it", '" with "', "the as at", "by has for"]


def _labels_of(text):
    words = text.split()
    return [label for label, cue in zip(LABELS, ("the", '"', "said"), strict=True)
            if cue in words]


def _write(path, rows, separator="|", labelled=True):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar=None,
                            quotechar=None)
        writer.writerow(["text", "labels"] if labelled else ["text"])
        for text in rows:
            writer.writerow([text, separator.join(_labels_of(text))] if labelled else [text])
    return str(path)


@pytest.fixture(name="files")
def files_fixture(tmp_path):
    return dict(train=_write(tmp_path / "train.tsv", TEXTS * 2),
                dev=_write(tmp_path / "dev.tsv", TEXTS[:8]),
                test=_write(tmp_path / "test.tsv", TEXTS[4:], labelled=False))


def _run(tiny_google_dir, files, output_dir, *args):
    return run_tool(
        "run_classifier.py", "--multi_label", f"--train_file={files['train']}",
        f"--dev_file={files['dev']}", f"--test_file={files['test']}", "--text_a_column=text",
        "--label_column=labels", f"--init_checkpoint={tiny_google_dir}",
        f"--output_dir={output_dir}", "--max_seq_length=12", "--train_batch_size=4",
        "--eval_batch_size=5", "--learning_rate=5e-3", "--num_train_epochs=3", *args)


def _table(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _matrix(rows, column):
    return np.array([[label in row[column].split("|") for label in LABELS] for row in rows])


def test_train_score_predict_and_score_again(tiny_google_dir, files, tmp_path):
    out = tmp_path / "out"
    result = _run(tiny_google_dir, files, out, "--do_train", "--do_eval", "--do_predict")
    assert result.returncode == 0, result.stderr[-3000:]
    settings = json.loads((out / "export_settings.json").read_text())
    assert settings["multi_label"] is True and settings["label_names"] == list(LABELS)
    thresholds = np.array(settings["thresholds"])
    assert thresholds.shape == (3,) and ((thresholds > 0) & (thresholds < 1)).all()

    # Dev scores: scikit-learn on the written probabilities and the saved thresholds.
    dev = _table(out / "dev_predictions.tsv")
    probabilities = np.array([[float(row[f"p_{label}"]) for label in LABELS] for row in dev])
    predicted = probabilities >= thresholds
    np.testing.assert_array_equal(_matrix(dev, "predicted"), predicted)
    np.testing.assert_array_equal(_matrix(dev, "gold"),
                                  [[label in _labels_of(t) for label in LABELS]
                                   for t in TEXTS[:8]])
    gold = _matrix(dev, "gold")
    results = json.loads((out / "eval_results.json").read_text())
    for average in ("micro", "macro"):
        expected = sklearn.metrics.f1_score(gold, predicted, average=average, zero_division=0)
        # The file's probabilities have 4 decimals; a threshold may sit between them.
        assert results["dev"][f"{average}_f1"] == pytest.approx(expected, abs=1e-6)
    assert set(results["dev"]["per_label"]) == set(LABELS)
    assert f"dev_micro_f1 = {results['dev']['micro_f1']}" in (
        out / "eval_results.txt").read_text()

    # Test predictions: unlabelled, every label with its probability.
    test = _table(out / "test_predictions.tsv")
    assert len(test) == len(TEXTS[4:]) and "gold" not in test[0]
    assert [f"p_{label}" for label in LABELS] == list(test[0])[-3:]

    # The model: a multi-label classifier, trained (the loss fell).
    model = keras.saving.load_model(str(out / "model.keras"))
    assert isinstance(model, kbert.BertClassifier) and model.multi_label
    with open(out / "training_log.csv", encoding="utf-8") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == 3 and losses[-1] < losses[0]

    # Scoring again without training: the saved thresholds, the same scores.
    again = _run(tiny_google_dir, files, out, "--do_eval", "--init_checkpoint=" +
                 str(out / "model.keras"))
    assert again.returncode == 0, again.stderr[-3000:]
    rescored = json.loads((out / "eval_results.json").read_text())
    assert rescored["dev"]["micro_f1"] == pytest.approx(results["dev"]["micro_f1"])


def test_label_columns_of_jsonl(tiny_google_dir, tmp_path):
    """One 0/1 key per label instead of one field of joined labels."""
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(
        {"text": text, **{label: int(label in _labels_of(text)) for label in LABELS}}) + "\n"
        for text in TEXTS), encoding="utf-8")
    result = run_tool(
        "run_classifier.py", "--multi_label", f"--train_file={path}", f"--dev_file={path}",
        "--text_a_column=text", f"--label_columns={','.join(LABELS)}",
        f"--init_checkpoint={tiny_google_dir}", f"--output_dir={tmp_path / 'out'}",
        "--max_seq_length=12", "--train_batch_size=4", "--num_train_epochs=1", "--do_train",
        "--do_eval")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _table(tmp_path / "out" / "dev_predictions.tsv")
    np.testing.assert_array_equal(_matrix(rows, "gold"), [[label in _labels_of(t) for label in
                                                          LABELS] for t in TEXTS])


@pytest.mark.parametrize(("args", "message"), [
    (["--task_name=MRPC", "--data_dir=glue"], "multi_label reads own data"),
    (["--regression"], "multi_label and regression exclude each other"),
    (["--label_separator="], "label_separator must not be empty"),
])
def test_bad_settings_are_refused_before_any_work(tiny_google_dir, files, tmp_path, args,
                                                  message):
    result = _run(tiny_google_dir, files if "--task_name=MRPC" not in args else {
        "train": "", "dev": "", "test": ""}, tmp_path / "out", "--do_train", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_a_dev_label_the_training_data_lacks_names_its_line(tiny_google_dir, files, tmp_path):
    with open(files["dev"], "a", encoding="utf-8") as f:
        f.write("he said\tsaid|sarcasm\n")
    result = _run(tiny_google_dir, files, tmp_path / "out", "--do_train", "--do_eval")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "dev.tsv:10" in result.stderr and "sarcasm" in result.stderr


def test_a_new_head_starts_at_each_labels_log_odds(tiny_google_dir, files, tmp_path):
    """A fresh sigmoid head's bias is log(p / (1 - p)) of each label's share of the training
    examples, so rare labels need not first climb down from p = 0.5."""
    config = configs.GlueConfig(
        multi_label=True, train_file=files["train"], text_a_column="text",
        label_column="labels", init_checkpoint=tiny_google_dir, output_dir=str(tmp_path),
        do_train=True, max_seq_length=12)
    recipe = multi_label.MultiLabelRecipe(config)
    source = recipe.open()
    data = recipe.read(recipe.data_files(source))
    model = recipe.build_model(source, data)
    np.testing.assert_array_equal(model.output_dense.bias.numpy(), 0)
    recipe.training(model, data)
    share = np.array([np.mean([label in _labels_of(t) for t in TEXTS]) for label in LABELS])
    np.testing.assert_allclose(model.output_dense.bias.numpy(), np.log(share / (1 - share)),
                               rtol=1e-5)
