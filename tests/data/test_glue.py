"""GLUE readers on fixtures in the real file layouts, and the generic CSV/TSV/JSONL reader."""

import json
import logging
import os

import numpy as np
import pytest

from kbert.data import glue

GLUE_DIR = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue")
DIRS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP",
        "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI", "ax": "diagnostic"}


def read(task, split, **kwargs):
    return glue.read_glue(os.path.join(GLUE_DIR, DIRS[task]), task, split, **kwargs)


@pytest.mark.parametrize("task", sorted(glue.GLUE_TASKS))
def test_every_split_of_every_task_reads(task):
    spec = glue.GLUE_TASKS[task]
    tests = {split for split, _, _ in spec.test_files}
    for split in spec.splits:
        errors = "warn" if (task, split) == ("qqp", "train") else "raise"
        examples = read(task, split, errors=errors)
        assert len(examples) > 0
        assert all(text.strip() for text in examples.text_a)
        paired = (spec.labelled or spec.unlabelled).text_b is not None
        assert (examples.text_b is not None) == paired
        if split in tests:
            assert examples.label is None
        elif spec.labels is glue.REGRESSION:
            assert examples.label.dtype == np.float32
        else:
            assert examples.label.dtype == np.int32
            assert examples.label.min() >= 0 and examples.label.max() < len(spec.labels)


def test_mrpc_bom_and_literal_quotes():
    train = read("mrpc", "train")
    assert len(train) == 8
    # The BOM does not leak into the first row, and quotes are kept, never parsed.
    assert train.text_a[0] == ('Amrozi accused his brother, whom he called "the witness", of '
                               'deliberately distorting his evidence.')
    assert train.text_b[6].startswith('"Saddam\'s daughters')
    assert train.text_b[6].endswith('the schools," he told The Sun.')
    assert train.label.tolist() == [1, 0, 1, 0, 1, 1, 1, 0]
    dev = read("mrpc", "dev")
    assert dev.text_a[-1].startswith('"Sanitation is poor... there could be typhoid')
    test = read("mrpc", "test")
    assert test.index == ("0", "1", "2", "3") and test.label is None


def test_column_layouts():
    cola = read("cola", "train")  # no header: source, label, mark, sentence
    assert cola.text_a[2] == "They drank the pub." and cola.label.tolist() == [1, 1, 0, 1]
    assert read("cola", "test").text_a[0] == "Bill whistled past the house."
    sst = read("sst2", "dev")
    assert sst.text_a[0] == "it 's a charming and often affecting journey . "  # trailing space kept
    stsb = read("stsb", "train")
    assert stsb.label.tolist() == pytest.approx([5.0, 3.8, 3.8])
    assert stsb.text_b[0] == "An air plane is taking off." and stsb.label_names is None
    mnli = read("mnli", "dev_matched")  # gold_label is the last of six label columns
    assert mnli.label.tolist() == [2, 0] and mnli.label_names == glue.GLUE_TASKS["mnli"].labels
    assert read("mnli", "train").label.tolist() == [2, 1, 1, 0]
    assert read("qnli", "train").label.tolist() == [1, 1, 0]
    assert read("wnli", "train").label.tolist() == [0, 1]
    qqp_test = read("qqp", "test")
    assert qqp_test.text_b == ("Why are rockets and boosters painted white?",)
    assert read("ax", "test").index == ("0", "1")


def test_malformed_row_names_file_and_line(caplog):
    with pytest.raises(ValueError, match=r"QQP/train\.tsv:4: expected 6 tab-separated fields, "
                                         r"found 4"):
        read("qqp", "train")
    examples = read("qqp", "train", errors="warn")
    assert len(examples) == 3 and examples.label.tolist() == [0, 1, 1]


def test_unknown_label_names_file_and_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tmaybe\n")
    with pytest.raises(ValueError, match=r"train\.tsv:3: unknown label 'maybe'"):
        glue.read_glue(str(tmp_path), "RTE", "train")


def test_task_names_and_splits():
    assert glue.get_task("SST-2") is glue.get_task("sst2") is glue.get_task("Sst_2")
    assert glue.get_task("STS-B").num_classes == 1 and glue.get_task("MNLI").num_classes == 3
    with pytest.raises(ValueError, match="Unknown GLUE task 'glue'"):
        glue.get_task("glue")
    with pytest.raises(ValueError, match="MRPC has no split 'dev_matched'"):
        read("mrpc", "dev_matched")
    with pytest.raises(FileNotFoundError, match="train.tsv: not found"):
        glue.read_glue(GLUE_DIR, "mrpc", "train")


def test_sample_is_seeded_and_keeps_file_order():
    train = read("mrpc", "train")
    a, b = train.sample(5, seed=1), train.sample(5, seed=1)
    assert a.text_a == b.text_a and a.label.tolist() == b.label.tolist()
    positions = [train.text_a.index(text) for text in a.text_a]
    assert positions == sorted(positions) and len(a) == 5
    assert train.sample(100) is train and train.sample(None) is train


def test_generic_csv_with_quoted_fields(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text('id,review,stars\n7,"Great, really great",good\n8,"He said ""meh""",bad\n'
                    "9,fine,good\n", encoding="utf-8")
    examples = glue.read_classification_file(str(path), text_a="review", label="stars", index="id")
    assert examples.text_a == ("Great, really great", 'He said "meh"', "fine")
    assert examples.label_names == ("bad", "good") and examples.label.tolist() == [1, 0, 1]
    assert examples.index == ("7", "8", "9") and examples.text_b is None


def test_generic_tsv_pairs_regression_and_bom(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text('\ufeffa\tb\tscore\n"x\t"y"\t0.5\nq\tr\t2\n', encoding="utf-8")
    examples = glue.read_classification_file(str(path), text_a="a", text_b="b", label="score",
                                             regression=True)
    assert examples.text_a == ('"x', "q") and examples.text_b == ('"y"', "r")
    assert examples.label.tolist() == [0.5, 2.0] and examples.label_names is None


def test_generic_jsonl_and_malformed_lines(tmp_path):
    path = tmp_path / "data.jsonl"
    rows = [{"text": "good", "label": 1}, {"text": "bad", "label": 0}, "not json",
            {"text": "no label"}, {"text": "odd", "label": 7}]
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    with pytest.raises(ValueError, match=r"data\.jsonl:3: not valid JSON"):
        glue.read_classification_file(str(path), text_a="text", label="label",
                                      label_names=["0", "1"])
    examples = glue.read_classification_file(str(path), text_a="text", label="label",
                                             label_names=["0", "1"], errors="warn")
    assert examples.text_a == ("good", "bad") and examples.label.tolist() == [1, 0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[4]) + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: unknown label '7'"):
        glue.read_classification_file(str(bad), text_a="text", label="label",
                                      label_names=["0", "1"])


def test_jsonl_text_must_be_a_string_and_a_label_a_scalar(tmp_path, caplog):
    # str() of a JSON number, array or object would be trained on as the text: an error at
    # its line; a JSON number or bool label is its str(), as CSV would give it.
    path = tmp_path / "data.jsonl"
    rows = [{"text": "good", "pair": "a", "label": True},
            {"text": 5, "pair": "b", "label": False},
            {"text": "fine", "pair": ["a", "b"], "label": True},
            {"text": "ok", "pair": "x", "label": [1]},
            {"text": {"body": "x" * 100}, "pair": "y", "label": 1},
            {"text": "kept", "pair": "z", "label": 1}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"data\.jsonl:2: 'text' holds 5, a JSON number; "
                                         r"expected a string of text"):
        glue.read_classification_file(str(path), text_a="text", label="label")
    with caplog.at_level(logging.WARNING):
        examples = glue.read_classification_file(str(path), text_a="text", text_b="pair",
                                                 label="label", errors="warn")
    assert examples.text_a == ("good", "kept") and examples.text_b == ("a", "z")
    assert examples.label_names == ("1", "False", "True") and examples.label.tolist() == [2, 0]
    assert ("data.jsonl:3: 'pair' holds [\"a\", \"b\"], a JSON array; expected a string"
            in caplog.text)
    assert ("data.jsonl:4: 'label' holds [1], a JSON array; expected a string or a number"
            in caplog.text)
    assert ("data.jsonl:5: 'text' holds {\"body\": \"" + "x" * 47 + "..., a JSON object"
            in caplog.text)  # cut to 60 characters


def test_labels_that_differ_only_in_whitespace_are_refused(tmp_path):
    # "pos" and "pos " would be two classes, each with part of the positive rows.
    path = tmp_path / "train.csv"
    path.write_text('text,label\ngood,pos\nbad,neg\nfine,"pos "\nmeh,neg\n')
    with pytest.raises(ValueError, match=r"train\.csv: labels 'pos' and 'pos ' differ only in "
                                         r"surrounding whitespace"):
        glue.read_classification_file(str(path), text_a="text", label="label")
    kept = glue.read_classification_file(str(path), text_a="text", label="label",
                                         label_names=["neg", "pos"], errors="skip")
    assert kept.text_a == ("good", "bad", "meh") and kept.label.tolist() == [1, 0, 0]


def test_generic_unlabelled_and_missing_columns(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text("sentence\nhello\nworld\n")
    examples = glue.read_classification_file(str(path), text_a="sentence")
    assert examples.label is None and examples.index == ("0", "1")
    with pytest.raises(ValueError, match=r"test\.csv:1: header has no column\(s\) 'label'"):
        glue.read_classification_file(str(path), text_a="sentence", label="label")
    bad = tmp_path / "short.csv"
    bad.write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValueError, match=r"short\.csv:3: expected 2 fields, found 1"):
        glue.read_classification_file(str(bad), text_a="a", text_b="b")
    # A spreadsheet's semicolon-separated ".csv", a comma-separated ".tsv": the hint says so.
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text("text;label\ngood;pos\n")
    with pytest.raises(ValueError, match=r"found \['text;label'\] — the file looks "
                                         r"semicolon-separated; save it comma-separated"):
        glue.read_classification_file(str(semicolons), text_a="text", label="label")
    commas = tmp_path / "commas.tsv"
    commas.write_text("text,label\ngood,pos\n")
    with pytest.raises(ValueError, match=r"looks comma-separated; save it tab-separated"):
        glue.read_classification_file(str(commas), text_a="text", label="label")
    with pytest.raises(ValueError, match=r"found \['text;label'\]$"):  # no such column at all
        glue.read_classification_file(str(semicolons), text_a="review", label="label")
