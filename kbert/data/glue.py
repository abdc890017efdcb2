"""GLUE and user classification data: one task table, one TSV reader, one generic reader.

Every GLUE task is a row of `GLUE_TASKS` (a `TaskSpec`: where text, label and index sit in
its files, its labels and its official metric), read by `read_glue`; there is no per-task
class. `read_classification_file` reads a user's CSV, TSV or JSON-lines file by column names
(its `read_records` is shared with `kbert.data.multi_label`). Both return `Examples`, the
columns the tf.data pipeline (`kbert.data.pipeline`) tokenizes.

GLUE files are read as GLUE's own loaders do: tab-separated with `csv.QUOTE_NONE` (MRPC and
SST-2 sentences contain literal `"` characters, which must not open a quoted field), UTF-8 with
an optional byte-order mark (MRPC's files start with one). A row with the wrong number of
fields or an unknown label is an error that names `file:line`, and so are bytes that are not
UTF-8; a file with no usable row is an error. Fields may be of any length (csv's default
limit of 131,072 characters is lifted).
"""

import csv
import dataclasses
import json
import math
import os
import typing

import numpy as np
from absl import logging

from kbert import text_files

REGRESSION = None  # `TaskSpec.labels` of a regression task (STS-B)
# Skipped rows logged one by one; the rest are counted in the summary line.
_LOGGED_PROBLEMS = 10
# csv's field limit (131,072 characters by default) would stop a long document; the largest
# value every platform's C long holds lifts it.
_CSV_FIELD_LIMIT = 2**31 - 1
# What a JSON-lines field that has the wrong type holds, in an error message.
_JSON_KINDS = {int: "number", float: "number", bool: "bool", list: "array", dict: "object"}


class Layout(typing.NamedTuple):
    """Where an example's fields sit in the rows of one GLUE TSV file.

    Args:
        text_a: int. Column of the first text. Negative counts from the end.
        text_b: int or None. Column of the second text of a pair task.
        label: int or None. Column of the label; None for an unlabelled (test) file.
        index: int or None. Column of the example id written to test predictions; None uses
            the 0-based data row number.
        header: bool. Whether the first line names the columns; its width is then the width
            of every row.
        width: int or None. Fields per row of a file without a header (CoLA train and dev).
    """

    text_a: int
    text_b: int | None = None
    label: int | None = None
    index: int | None = None
    header: bool = True
    width: int | None = None


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One GLUE task, as data.

    Args:
        name: str. GLUE's name, also the file name of test predictions (`MRPC.tsv`).
        labels: tuple of str, or `REGRESSION` (None) for a real-valued score. The order is
            Google's run_classifier.py `get_labels()` order, so class ids match its heads.
        metric: str. A key of `kbert.tasks.glue_metrics.METRICS`.
        labelled: `Layout` of the train and dev files.
        unlabelled: `Layout` of the test files.
        dev_files: tuple of (split, file name). Evaluated splits; MNLI has two.
        test_files: tuple of (split, file name, prediction name). Predicted splits.
            Defaults to GLUE's one `test.tsv`, its predictions named after the task.
        train_file: str or None. None for a task with no training data (AX).
    """

    name: str
    labels: tuple[str, ...] | None
    metric: str
    labelled: Layout | None
    unlabelled: Layout
    dev_files: tuple[tuple[str, str], ...] = (("dev", "dev.tsv"),)
    test_files: tuple[tuple[str, str, str], ...] | None = None
    train_file: str | None = "train.tsv"

    def __post_init__(self):
        if self.test_files is None:
            object.__setattr__(self, "test_files", (("test", "test.tsv", self.name),))

    @property
    def num_classes(self):
        """Width of the model output: the number of labels, or 1 for regression."""
        return 1 if self.labels is REGRESSION else len(self.labels)

    @property
    def splits(self):
        """Dict of split name -> file name, for every split this task has."""
        splits = {"train": self.train_file} if self.train_file else {}
        splits.update(self.dev_files)
        splits.update((split, file) for split, file, _ in self.test_files)
        return splits


_NLI = ("entailment", "not_entailment")
_MNLI = ("contradiction", "entailment", "neutral")
# index, sentence1, sentence2, label: QNLI, RTE, WNLI and the AX diagnostic.
_PAIR = Layout(text_a=1, text_b=2, label=-1)
_PAIR_TEST = Layout(text_a=1, text_b=2, index=0)


def _same_text_columns(text_a, text_b, label):
    """The layouts of a pair task whose test files hold the texts where its labelled files
    do, with an index first in place of the label."""
    return {"labelled": Layout(text_a=text_a, text_b=text_b, label=label),
            "unlabelled": Layout(text_a=text_a, text_b=text_b, index=0)}


# Columns as in the files of GLUE's download script, read by Google's run_classifier.py and
# TF Model Garden's classifier_data_lib.py processors.
GLUE_TASKS = {
    "cola": TaskSpec(
        "CoLA", ("0", "1"), "matthews_corrcoef",
        labelled=Layout(text_a=3, label=1, header=False, width=4),
        unlabelled=Layout(text_a=1, index=0)),
    "sst2": TaskSpec(
        "SST-2", ("0", "1"), "accuracy",
        labelled=Layout(text_a=0, label=1), unlabelled=Layout(text_a=1, index=0)),
    "mrpc": TaskSpec("MRPC", ("0", "1"), "f1_accuracy", **_same_text_columns(3, 4, label=0)),
    "stsb": TaskSpec("STS-B", REGRESSION, "pearson_spearman",
                     **_same_text_columns(7, 8, label=-1)),
    "qqp": TaskSpec(
        "QQP", ("0", "1"), "f1_accuracy",
        labelled=Layout(text_a=3, text_b=4, label=5),
        unlabelled=Layout(text_a=1, text_b=2, index=0)),
    "mnli": TaskSpec(
        "MNLI", _MNLI, "accuracy", **_same_text_columns(8, 9, label=-1),
        dev_files=(("dev_matched", "dev_matched.tsv"), ("dev_mismatched", "dev_mismatched.tsv")),
        test_files=(("test_matched", "test_matched.tsv", "MNLI-m"),
                    ("test_mismatched", "test_mismatched.tsv", "MNLI-mm"))),
    "qnli": TaskSpec(
        "QNLI", _NLI, "accuracy", labelled=_PAIR, unlabelled=_PAIR_TEST),
    "rte": TaskSpec(
        "RTE", _NLI, "accuracy", labelled=_PAIR, unlabelled=_PAIR_TEST),
    "wnli": TaskSpec(
        "WNLI", ("0", "1"), "accuracy", labelled=_PAIR, unlabelled=_PAIR_TEST),
    # The diagnostic set (glue_data/diagnostic/diagnostic.tsv) has no training data: it is
    # predicted with a model fine-tuned on MNLI, hence MNLI's labels.
    "ax": TaskSpec(
        "AX", _MNLI, "accuracy", labelled=None, unlabelled=_PAIR_TEST, dev_files=(),
        test_files=(("test", "diagnostic.tsv", "AX"),), train_file=None),
}


@dataclasses.dataclass(frozen=True)
class Examples:
    """The examples of one split, as columns.

    Attributes:
        text_a: tuple of str [examples].
        text_b: tuple of str [examples], or None for single-text tasks.
        label: np.ndarray [examples]: int32 class ids into `label_names`, or float32 scores
            when `label_names` is None; for multi-label data (`kbert.data.multi_label`)
            float32 0/1 [examples, labels], one column per name. None when the file has no
            labels.
        index: tuple of str [examples]. Example ids (GLUE's `index` column, else the 0-based
            data row number), as written to test predictions.
        label_names: tuple of str, or None for regression.
        source: str. The file read, for messages.
    """

    text_a: tuple
    text_b: tuple | None
    label: np.ndarray | None
    index: tuple
    label_names: tuple | None
    source: str = ""

    def __len__(self):
        return len(self.text_a)

    def subset(self, indices):
        """The examples at `indices` (a sequence of int), in that order."""
        indices = list(indices)
        pick = lambda column: None if column is None else tuple(column[i] for i in indices)  # noqa: E731
        return dataclasses.replace(
            self, text_a=pick(self.text_a), text_b=pick(self.text_b), index=pick(self.index),
            label=None if self.label is None else self.label[np.asarray(indices, dtype=np.int64)])

    def sample(self, count, seed=0):
        """A random subset of `count` examples (all of them if fewer), in file order."""
        if count is None or count >= len(self):
            return self
        rng = np.random.default_rng(seed)
        return self.subset(np.sort(rng.choice(len(self), size=count, replace=False)))


def get_task(name):
    """Looks up a GLUE task: "MRPC", "sst-2", "SST2", "sts_b" ... (case, `-` and `_` ignored)."""
    key = name.lower().replace("-", "").replace("_", "")
    if key not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {name!r}; known: "
                         f"{', '.join(spec.name for spec in GLUE_TASKS.values())}")
    return GLUE_TASKS[key]


def read_glue(data_dir, task, split, errors="raise"):
    """Reads one split of a GLUE task from its standard TSV directory.

    Args:
        data_dir: str. The task's directory (e.g. `glue_data/MRPC`).
        task: str or `TaskSpec`. A task name (see `get_task`) or a spec.
        split: str. "train", a dev split ("dev"; MNLI: "dev_matched", "dev_mismatched") or a
            test split ("test"; MNLI: "test_matched", "test_mismatched").
        errors: str. "raise" on the first malformed row (default), "warn": log each one
            with `file:line` and skip it, or "skip": skip it unlogged.

    Returns:
        `Examples`; `label` is None for test splits.
    """
    spec = get_task(task) if isinstance(task, str) else task
    if split not in spec.splits:
        raise ValueError(f"{spec.name} has no split {split!r}; it has {sorted(spec.splits)}")
    path = os.path.join(data_dir, spec.splits[split])
    is_test = split in {s for s, _, _ in spec.test_files}
    layout = spec.unlabelled if is_test else spec.labelled
    parse_label = _label_parser(spec.labels)
    rows, problems = [], []
    for line, fields, width in _tsv_rows(path, layout, f"{spec.name}'s {split} file"):
        try:
            if len(fields) != width:
                raise ValueError(f"expected {width} tab-separated fields, found {len(fields)}")
            label = None if layout.label is None else parse_label(fields[layout.label])
        except ValueError as e:
            report(path, line, e, errors, problems)
            continue
        index = fields[layout.index] if layout.index is not None else str(len(rows))
        text_b = None if layout.text_b is None else fields[layout.text_b]
        rows.append((fields[layout.text_a], text_b, label, index))
    summarize(path, problems, len(rows), errors)
    return _examples(rows, layout.text_b is not None, layout.label is not None, spec.labels,
                     path)


def read_classification_file(path, text_a, text_b=None, label=None, index=None,
                             label_names=None, regression=False, errors="raise",
                             file_format=None):
    """Reads a user's classification or regression data by column name.

    Args:
        path: str. A `.csv` (standard quoting: `"a, b"` is one field), `.tsv` (no quoting, as
            GLUE) or `.jsonl` file (one JSON object per line: texts JSON strings, a label a
            string, number or bool). CSV and TSV need a header line.
        text_a: str. Column (or JSON key) of the first text.
        text_b: str. Column of the second text of a pair task. Defaults to None.
        label: str. Column of the label; None for unlabelled data. Defaults to None.
        index: str. Column of the example id. Defaults to the 0-based data row number.
        label_names: sequence of str. The classes, in class-id order. Defaults to the sorted
            distinct labels of this file (pass them explicitly so dev and test agree with train).
        regression: bool. Labels are real numbers. Defaults to False.
        errors: str. "raise" (default), "warn" (log `file:line`, skip the row) or "skip"
            (skip it unlogged: a file read twice logs once).
        file_format: str. "csv", "tsv" or "jsonl". Defaults to the file's extension.

    Returns:
        `Examples`.
    """
    raw, problems = read_records(
        path, [c for c in (text_a, text_b, label, index) if c is not None], errors,
        file_format)
    if label is not None and not regression and label_names is None:
        label_names = sorted({str(r[label]) for _, r in raw  # "": a malformed row
                              if not isinstance(r[label], (list, dict))} - {""})
        _check_distinct_labels(path, label_names)
    names = REGRESSION if regression else tuple(str(n) for n in label_names or ())
    parse_label = _label_parser(names)
    rows = []
    for line, record in raw:
        try:
            value = None if label is None else parse_label(scalar_field(record, label))
            row = (text_field(record, text_a),
                   None if text_b is None else text_field(record, text_b), value,
                   scalar_field(record, index) if index is not None else str(len(rows)))
        except ValueError as e:
            report(path, line, e, errors, problems)
            continue
        rows.append(row)
    summarize(path, problems, len(rows), errors)
    return _examples(rows, text_b is not None, label is not None, names, path)


def read_records(path, columns, errors="raise", file_format=None):
    """The rows of a user's CSV, TSV or JSON-lines file that hold every one of `columns`.

    The reading of `read_classification_file`, shared with the readers of other label
    layouts (`kbert.data.multi_label`). A row that cannot be split, is not a JSON object or
    lacks a column (or holds JSON null in it) is a problem: raised, or skipped (see `report`).

    Args:
        path: str. A `.csv`, `.tsv` or `.jsonl` file (see `read_classification_file`).
        columns: sequence of str. Columns (JSON keys) every row must hold.
        errors: str. "raise", "warn" or "skip" (see `read_classification_file`).
        file_format: str. "csv", "tsv" or "jsonl". Defaults to the file's extension.

    Returns:
        (records, problems): records, a list of (line number, dict of column -> value: str in
        CSV and TSV, any JSON value in JSONL); problems, the messages of the rows skipped, to
        pass on to `report` and `summarize`.
    """
    file_format = file_format or os.path.splitext(path)[1].lstrip(".").lower()
    if file_format not in ("csv", "tsv", "jsonl"):
        raise ValueError(f"{path}: unknown format {file_format!r}; use .csv, .tsv or .jsonl")
    lines = _jsonl_records(path) if file_format == "jsonl" else _table_records(
        path, columns, file_format)
    records, problems = [], []
    for line, record in lines:
        try:
            if isinstance(record, str):  # a problem found while splitting the line
                raise ValueError(record)
            if not isinstance(record, dict):
                raise ValueError("expected a JSON object")
            absent = [c for c in columns if record.get(c) is None]
            if absent:
                raise ValueError(f"missing field(s) {', '.join(map(repr, absent))}")
            records.append((line, record))
        except ValueError as e:
            report(path, line, e, errors, problems)
    return records, problems


def text_field(record, column):
    """The text in `column` of a row from `read_records`: a str. A JSON number, bool, array or
    object there raises ValueError (its `str()` would be trained on as if it were the text)."""
    return _typed_field(record, column, str, "a string of text")


def scalar_field(record, column):
    """The label or id in `column` of a row from `read_records`, as str: a string, or a JSON
    number or bool (`1`, `true`) as its `str()`. An array or object raises ValueError."""
    return str(_typed_field(record, column, (str, int, float), "a string or a number"))


def _typed_field(record, column, types, expected):
    value = record[column]
    if not isinstance(value, types):
        kind = _JSON_KINDS.get(type(value), type(value).__name__)
        raise ValueError(f"{column!r} holds {_json_excerpt(value)}, a JSON {kind}; "
                         f"expected {expected}")
    return value


def report(path, line, error, errors, problems):
    """Raises for a malformed row, or adds it to `problems` (logged with errors="warn")."""
    message = f"{path}:{line}: {error}"
    if errors == "raise":
        raise ValueError(f"{message} — fix the row, or skip malformed rows with "
                         "errors='warn' (run_classifier.py --skip_bad_rows)")
    if errors not in ("warn", "skip"):
        raise ValueError(f"errors must be 'raise', 'warn' or 'skip', got {errors!r}")
    if errors == "warn" and len(problems) < _LOGGED_PROBLEMS:
        logging.warning("skipping malformed row: %s", message)
    problems.append(message)


def summarize(path, problems, kept, errors):
    """Logs the skipped rows' count (errors="warn"); raises if no row is left."""
    if not kept and problems:
        raise ValueError(f"{path}: none of its {len(problems)} data row(s) is usable; the "
                         f"first: {problems[0]}")
    if not kept:
        raise ValueError(f"{path}: no data rows (an empty file, or a header only)")
    if problems and errors == "warn":
        logging.warning("%s: skipped %d malformed row(s), kept %d%s", path, len(problems), kept,
                        f" (the first {_LOGGED_PROBLEMS} logged above)"
                        if len(problems) > _LOGGED_PROBLEMS else "")



# ---------------------------------------------------------------------------------------------


def _tsv_rows(path, layout, what):
    """Yields (line number, fields, expected width) for each data row of a GLUE TSV; `what`
    names the file in the error for a header with too few columns for `layout`."""
    with _open(path) as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        width = layout.width
        if layout.header:
            header = next(reader, [])  # the header names the columns
            width, columns = len(header), _columns(layout)
            needed = (max([c + 1 for c, _ in columns if c >= 0], default=0)
                      + max([-c for c, _ in columns if c < 0], default=0))
            if header and width < needed:
                where = ", ".join(f"{name} in column {c + 1}" if c >= 0 else
                                  f"{name} in column {-c} from the end" for c, name in columns)
                raise ValueError(f"{path}:1: the header has {width} column(s) {header}; "
                                 f"{what} has at least {needed}: {where}")
        for fields in reader:
            if fields == [] or fields == [""]:
                continue  # a blank line, e.g. at the end of the file
            yield reader.line_num, fields, width


def _columns(layout):
    """[(column, name)] of the fields `layout` reads, in column order (negative: from the
    end, last)."""
    named = [(getattr(layout, name), name) for name in ("index", "text_a", "text_b", "label")]
    return sorted(((c, name) for c, name in named if c is not None),
                  key=lambda item: (item[0] < 0, item[0]))


def _table_records(path, wanted, file_format):
    quoting = csv.QUOTE_MINIMAL if file_format == "csv" else csv.QUOTE_NONE
    delimiter = "," if file_format == "csv" else "\t"
    with _open(path) as f:
        reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file — expected a header line, then data rows")
        repeated = sorted({c for c in wanted if header.count(c) > 1})
        if repeated:
            raise ValueError(f"{path}:1: column(s) {', '.join(map(repr, repeated))} named more "
                             f"than once in the header {header} — rename the other one(s)")
        absent = [c for c in wanted if c not in header]
        if absent:
            raise ValueError(f"{path}:1: header has no column(s) {', '.join(map(repr, absent))}"
                             f"; found {header}"
                             f"{_separator_hint(header, wanted, delimiter, file_format)}")
        for fields in reader:
            if fields == [] or fields == [""]:
                continue
            if len(fields) != len(header):
                yield reader.line_num, f"expected {len(header)} fields, found {len(fields)}"
                continue
            yield reader.line_num, dict(zip(header, fields, strict=True))


def _separator_hint(header, wanted, delimiter, file_format):
    """A hint when the header splits into the wanted columns at another separator (a
    semicolon-separated ".csv", as spreadsheets in some locales save it, or a tab)."""
    for separator, name in ((";", "semicolon"), ("\t", "tab"), (",", "comma"), ("|", "bar")):
        if separator != delimiter and set(wanted) <= set(delimiter.join(header).split(separator)):
            expected = "comma" if delimiter == "," else "tab"
            return (f" — the file looks {name}-separated; save it {expected}-separated, as "
                    f"{file_format} is read")
    return ""


def _jsonl_records(path):
    with _open(path) as f:
        for line_number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield line_number, json.loads(line)
            except json.JSONDecodeError as e:
                yield line_number, f"not valid JSON ({e.msg})"


def _check_distinct_labels(path, label_names):
    """Raises ValueError if two labels of a file differ only in surrounding whitespace
    ("pos" and "pos "): each would silently become a class of its own."""
    by_stripped = {}
    for name in label_names:
        by_stripped.setdefault(name.strip(), []).append(name)
    clashes = [names for names in by_stripped.values() if len(names) > 1]
    if clashes:
        raise ValueError(f"{path}: labels {' and '.join(map(repr, clashes[0]))} differ only in "
                         "surrounding whitespace, so they would be different classes — fix "
                         "the file, or give the classes (labels, run_classifier.py --labels): "
                         "a row with another label is then malformed")


def _json_excerpt(value, limit=60):
    """`value` as JSON, cut to `limit` characters for an error message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _open(path):
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    # utf-8-sig drops a leading byte-order mark (MRPC), which would otherwise join the first
    # header name; newline="" lets csv see "\r\n" line ends.
    return text_files.open_text(path)


def _label_parser(labels):
    if labels is REGRESSION:
        def parse(text):
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"label {text!r} is not a number") from None
            if not math.isfinite(value):
                raise ValueError(f"label {text!r}: a regression label must be a finite number")
            return value
        return parse
    ids = {name: i for i, name in enumerate(labels)}

    def parse(text):
        if not text:
            raise ValueError("empty label")
        if text not in ids:
            raise ValueError(f"unknown label {text!r}; expected one of {list(labels)}")
        return ids[text]
    return parse


def _examples(rows, paired, labelled, label_names, path):
    columns = zip(*rows, strict=True) if rows else ((),) * 4
    text_a, text_b, labels, index = (tuple(column) for column in columns)
    dtype = np.float32 if label_names is REGRESSION else np.int32
    return Examples(
        text_a=text_a, text_b=text_b if paired else None,
        label=np.asarray(labels, dtype=dtype) if labelled else None, index=index,
        label_names=label_names, source=path)
