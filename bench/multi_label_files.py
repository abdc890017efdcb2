"""The files of the multi-label benchmark (`bench/multi_label.py`).

GoEmotions as released (`train.tsv`, `dev.tsv`, `test.tsv`: no header, `text<TAB>label
ids<TAB>comment id`, the ids comma-separated and indexing the lines of `emotions.txt`; some
texts CSV-quoted, so read with Python's default csv quoting as the GoEmotions code reads them)
becomes what a user gives `tools/run_classifier.py --multi_label`: a `.tsv` with the header
`text<TAB>labels`, the label names joined by `|`, read unquoted (kbert's `.tsv`: a `"` is a
character). Both sides write `<split>_predictions.tsv` with one probability column
`p_<label>` per label; `read_probabilities` reads them back by those names.
"""

import csv
import os
import re

import numpy as np

SEPARATOR = "|"
SPLITS = ("train", "dev", "test")
_LINE_BREAKS = re.compile(r"[\t\r\n]")  # would split a field or a row of an unquoted TSV


def label_names(data_dir):
    """GoEmotions' labels in id order: the lines of `emotions.txt` (no final newline)."""
    with open(os.path.join(data_dir, "emotions.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def read_goemotions(path):
    """[(text, [label id, ...])] of one GoEmotions split, in file order."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        for fields in reader:
            if len(fields) != 3:
                raise ValueError(f"{path}:{reader.line_num}: expected 3 tab-separated fields "
                                 f"(text, label ids, comment id), found {len(fields)}")
            rows.append((fields[0], [int(i) for i in fields[1].split(",")]))
    return rows


def convert(data_dir, work_dir, max_eval_examples=None):
    """Writes `work_dir/{train,dev,test}.tsv` in the user-facing layout.

    Args:
        max_eval_examples: int. Keep only the first this many dev and test rows (smoke runs).

    Returns:
        (label names, {"dev": labels, "test": labels}), labels int 0/1 [rows, label names]:
        the gold labels of the files written, from the release, not read back.
    """
    names = label_names(data_dir)
    gold = {}
    for split in SPLITS:
        rows = read_goemotions(os.path.join(data_dir, f"{split}.tsv"))
        if split != "train":
            rows = rows[:max_eval_examples]
            gold[split] = np.zeros((len(rows), len(names)), np.int32)
            for r, (_, ids) in enumerate(rows):
                gold[split][r, ids] = 1
        with open(os.path.join(work_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\tlabels\n")
            for text, ids in rows:
                f.write(f"{_LINE_BREAKS.sub(' ', text)}\t"
                        f"{SEPARATOR.join(names[i] for i in ids)}\n")
    return names, gold


def write_probabilities(path, texts, probabilities, names):
    """A predictions file as kbert's recipe writes it: `index`, `text_a`, then `p_<label>`
    per label, 4 decimals as kbert's class probabilities."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(["index", "text_a", *(f"p_{name}" for name in names)]) + "\n")
        for i, (text, row) in enumerate(zip(texts, probabilities, strict=True)):
            f.write("\t".join([str(i), _LINE_BREAKS.sub(" ", text),
                               *(f"{p:.4f}" for p in row)]) + "\n")


def read_probabilities(path, names):
    """The `p_<label>` columns of a predictions TSV, float64 [rows, names]; the other columns
    are ignored."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no predictions written")
    columns = [f"p_{name}" for name in names]
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, [])
        absent = [c for c in columns if c not in header]
        if absent:
            raise ValueError(f"{path}:1: header has no column(s) {', '.join(absent)}")
        where = [header.index(c) for c in columns]
        rows = []
        for fields in reader:
            if len(fields) != len(header):
                raise ValueError(f"{path}:{reader.line_num}: expected {len(header)} fields, "
                                 f"found {len(fields)}")
            rows.append([float(fields[i]) for i in where])
    return np.asarray(rows, np.float64).reshape(-1, len(names))
