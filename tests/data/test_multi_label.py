"""The multi-label reader: separated labels or 0/1 columns, in CSV, TSV and JSON lines."""

import json
import logging

import numpy as np
import pytest

from kbert.data import multi_label


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def read(path, text_a="text", **kwargs):
    return multi_label.read_multi_label_file(path, text_a, **kwargs)


def test_separated_labels_in_csv(tmp_path):
    path = write(tmp_path, "train.csv", 'text,labels\n"you, fool",toxic | insult\nthanks,\n'
                                        "meh,obscene\nbad,insult|toxic|insult\n")
    examples = read(path, label_column="labels")
    assert examples.text_a == ("you, fool", "thanks", "meh", "bad")
    assert examples.text_b is None and examples.index == ("0", "1", "2", "3")
    # Names default to the file's distinct labels, sorted; an empty field is no label.
    assert examples.label_names == ("insult", "obscene", "toxic")
    assert examples.label.dtype == np.float32 and examples.label.shape == (4, 3)
    np.testing.assert_array_equal(examples.label, [[1, 0, 1], [0, 0, 0], [0, 1, 0], [1, 0, 1]])
    # Given names set the column order; another separator.
    tsv = write(tmp_path, "dev.tsv", 'a\tb\tlabels\n"x\ty\ttoxic;obscene\n')
    dev = read(tsv, text_a="a", text_b="b", label_column="labels", label_separator=";",
               label_names=["toxic", "insult", "obscene"])
    assert dev.text_a == ('"x',) and dev.text_b == ("y",)
    assert dev.label_names == ("toxic", "insult", "obscene")
    np.testing.assert_array_equal(dev.label, [[1, 0, 1]])


def test_jsonl_lists_strings_and_columns(tmp_path):
    rows = [{"text": "a", "labels": ["toxic", " insult"], "toxic": True, "insult": 1},
            {"text": "b", "labels": "", "toxic": "false", "insult": 0},
            {"text": "c", "labels": "insult", "toxic": " TRUE ", "insult": "0"}]
    path = write(tmp_path, "data.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    by_list = read(path, label_column="labels")
    assert by_list.label_names == ("insult", "toxic")
    np.testing.assert_array_equal(by_list.label, [[1, 1], [0, 0], [1, 0]])
    by_columns = read(path, label_columns=["toxic", "insult"])
    assert by_columns.label_names == ("toxic", "insult")
    np.testing.assert_array_equal(by_columns.label, [[1, 1], [0, 0], [1, 0]])
    renamed = read(path, label_columns=["toxic", "insult"], label_names=["T", "I"])
    assert renamed.label_names == ("T", "I")


def test_unlabelled(tmp_path):
    path = write(tmp_path, "test.csv", "text\nhello\n")
    examples = read(path)
    assert examples.label is None and examples.label_names is None
    assert read(path, label_names=["a", "b"]).label_names == ("a", "b")


def test_bad_rows_name_file_line_and_value(tmp_path, caplog):
    path = write(tmp_path, "train.csv", "text,labels,toxic\nok,toxic,1\nodd,spam,yes\n"
                                        "two,,0\nempty,toxic||insult,0\n")
    with pytest.raises(ValueError, match=r"train\.csv:3: unknown label 'spam'; expected one "
                                         r"of \['toxic'\]"):
        read(path, label_column="labels", label_names=["toxic"])
    with pytest.raises(ValueError, match=r"train\.csv:3: column 'toxic': 'yes' is not 0/1"):
        read(path, label_columns=["toxic"])
    with pytest.raises(ValueError, match=r"train\.csv:5: empty label name in 'toxic\|\|insult'"):
        read(path, label_column="labels")
    with caplog.at_level(logging.WARNING):
        kept = read(path, label_column="labels", label_names=["toxic"], errors="warn")
    assert kept.text_a == ("ok", "two") and "train.csv:3: unknown label 'spam'" in caplog.text
    np.testing.assert_array_equal(kept.label, [[1], [0]])
    assert read(path, label_columns=["toxic"], errors="skip").text_a == ("ok", "two", "empty")
    jsonl = write(tmp_path, "bad.jsonl", json.dumps({"text": "x", "labels": [1]}) + "\n"
                  + json.dumps({"text": "y", "labels": 2.0, "toxic": 0.5}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: labels \[1\]: expected a list of str"):
        read(jsonl, label_column="labels")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: missing field\(s\) 'toxic'"):
        read(jsonl, label_columns=["toxic"])
    numeric = write(tmp_path, "numeric.jsonl", json.dumps({"text": 12, "labels": ["a"]}) + "\n"
                    + json.dumps({"text": "y", "labels": ["b"]}) + "\n")
    with pytest.raises(ValueError, match=r"numeric\.jsonl:1: 'text' holds 12, a JSON number"):
        read(numeric, label_column="labels")
    assert read(numeric, label_column="labels", errors="skip").text_a == ("y",)


def test_argument_errors(tmp_path):
    path = write(tmp_path, "train.csv", "text,labels\nx,\n")
    with pytest.raises(ValueError, match="not both"):
        read(path, label_column="labels", label_columns=["labels"])
    with pytest.raises(ValueError, match="non-empty sequence"):
        read(path, label_columns="labels")
    with pytest.raises(ValueError, match=r"1 label_names for 2 label_columns"):
        read(path, label_columns=["text", "labels"], label_names=["a"])
    with pytest.raises(ValueError, match=r"label_names repeat \['a'\]"):
        read(path, label_column="labels", label_names=["a", "a"])
    with pytest.raises(ValueError, match=r"label_columns repeat \['labels'\]"):
        read(path, label_columns=["labels", "labels"])
    with pytest.raises(ValueError, match=r"train\.csv: no labels in column 'labels'; pass "
                                         r"label_names"):
        read(path, label_column="labels")
    with pytest.raises(ValueError, match=r"train\.csv:1: header has no column\(s\) 'tags'"):
        read(path, label_column="tags")
    with pytest.raises(ValueError, match=r"errors must be"):
        read(write(tmp_path, "x.csv", "text,labels\nx,b\n"), label_column="labels",
             label_names=["a"], errors="ignore")
