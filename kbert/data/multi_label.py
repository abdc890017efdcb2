"""Multi-label classification data: any number of labels per text, from CSV, TSV or JSON lines.

The files are read as `kbert.data.glue.read_classification_file` reads them (its
`read_records`: formats, quoting, `file:line` errors, errors="raise"/"warn"/"skip"). The labels
of a row come in one of two layouts:

    label_column="labels", label_separator="|"      label_columns=["toxic", "insult"]
    text,labels                                      text,toxic,insult
    you fool,toxic|insult                            you fool,1,1
    thanks,                                          thanks,0,0

An empty label field means no label (a valid row); in JSON lines the field may also be a list
of strings. Either way the row becomes a 0/1 vector over `label_names`.
"""

import numpy as np

from kbert.data import glue

# Cell values of a `label_columns` column (compared after `strip().lower()`; JSON true/false
# and 0/1 arrive as Python bools and ints, whose str() lower-cases to the same).
_CELLS = {"0": 0.0, "1": 1.0, "false": 0.0, "true": 1.0}


def read_multi_label_file(path, text_a, text_b=None, *, label_column=None,
                          label_separator="|", label_columns=None, label_names=None,
                          errors="raise", file_format=None) -> glue.Examples:
    """Reads a user's multi-label classification data by column name.

    Args:
        path: str. A `.csv`, `.tsv` or `.jsonl` file, as `read_classification_file` reads.
        text_a: str. Column (or JSON key) of the first text.
        text_b: str. Column of the second text of a pair task. Defaults to None.
        label_column: str. One column holding a row's labels joined by `label_separator`
            (`toxic|insult`; empty: no label; whitespace around each name is stripped), or in
            JSON lines a list of str. Defaults to None.
        label_separator: str. Joins the labels in `label_column`. Defaults to "|".
        label_columns: sequence of str. One 0/1 column per label ("true"/"false" too).
            Defaults to None. Give `label_column` or `label_columns`, or neither for
            unlabelled data.
        label_names: sequence of str. The labels in id order (pass train's to dev and test so
            they agree). Defaults to the sorted distinct labels of the file for
            `label_column`, or the names of `label_columns` in their order; with
            `label_columns` they name the columns, one each.
        errors: str. "raise" (default), "warn" (log `file:line`, skip the row) or "skip"
            (skip it unlogged). A label outside `label_names` or a cell that is not 0/1 is
            such an error.
        file_format: str. "csv", "tsv" or "jsonl". Defaults to the file's extension.

    Returns:
        `glue.Examples`: `label` float32 0/1 [examples, labels] (None when unlabelled),
        `label_names` a tuple of str (None when unlabelled and none are given), `index` the
        0-based data row number.
    """
    if label_column is not None and label_columns is not None:
        raise ValueError("give label_column (one column of separated labels) or "
                         "label_columns (one 0/1 column per label), not both")
    if label_columns is not None:
        if isinstance(label_columns, str) or not label_columns:
            raise ValueError(f"label_columns must be a non-empty sequence of column names, "
                             f"got {label_columns!r}")
        label_columns = tuple(label_columns)
        repeated = sorted({c for c in label_columns if label_columns.count(c) > 1})
        if repeated:
            raise ValueError(f"label_columns repeat {repeated}")
    if label_column is not None and not label_separator:
        raise ValueError("label_separator must be a non-empty str")
    labelled = label_column is not None or label_columns is not None
    names = None if label_names is None else _names(label_names)
    if label_columns is not None and names is not None and len(names) != len(label_columns):
        raise ValueError(f"{len(names)} label_names for {len(label_columns)} label_columns: "
                         f"{list(names)} for {list(label_columns)}")
    columns = [c for c in (text_a, text_b, label_column) if c is not None]
    records, problems = glue.read_records(path, columns + list(label_columns or ()), errors,
                                          file_format)
    # With the names known, a row's labels become its 0/1 vector at once, so that errors
    # are found in file order; else they are the sorted names found, and vectors after.
    ids = None if names is None else {name: i for i, name in enumerate(names)}
    rows = []  # (text_a, text_b, 0/1 vector, or label names while `ids` is None)
    for line, record in records:
        try:
            texts = (glue.text_field(record, text_a),
                     None if text_b is None else glue.text_field(record, text_b))
            if label_column is None:
                labels = None if label_columns is None else _cells(record, label_columns)
            else:
                labels = _split(record[label_column], label_separator)
                labels = labels if ids is None else _vector(labels, ids)
        except ValueError as e:
            glue.report(path, line, e, errors, problems)
            continue
        rows.append((*texts, labels))
    if label_column is not None and ids is None:
        names = _names(sorted({name for _, _, labels in rows for name in labels}))
        ids = {name: i for i, name in enumerate(names)}
        rows = [(a, b, _vector(labels, ids)) for a, b, labels in rows]
    if label_column is not None and rows and not names:
        raise ValueError(f"{path}: no labels in column {label_column!r}; pass label_names")
    if label_columns is not None and names is None:
        names = label_columns
    glue.summarize(path, problems, len(rows), errors)
    return glue.Examples(
        text_a=tuple(row[0] for row in rows),
        text_b=None if text_b is None else tuple(row[1] for row in rows),
        label=np.stack([row[2] for row in rows]) if labelled else None,
        index=tuple(str(i) for i in range(len(rows))), label_names=names, source=path)


def _names(label_names):
    if isinstance(label_names, str):
        raise TypeError("label_names must be a sequence of str, not one str")
    names = tuple(str(name) for name in label_names)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"label_names repeat {duplicates}")
    return names


def _split(value, separator):
    """The label names of one cell: separated text, or a JSON list of str."""
    if isinstance(value, list):
        if not all(isinstance(name, str) for name in value):
            raise ValueError(f"labels {value!r}: expected a list of str")
        names = [name.strip() for name in value]
    elif isinstance(value, str):
        names = [name.strip() for name in value.split(separator)] if value.strip() else []
    else:
        raise ValueError(f"labels {value!r}: expected a str of {separator!r}-separated labels "
                         f"or a list of str")
    if "" in names:
        raise ValueError(f"empty label name in {value!r}")
    return names


def _vector(labels, ids):
    """The 0/1 vector of `labels` (names) over `ids` (name -> column)."""
    vector = np.zeros(len(ids), np.float32)
    for name in labels:
        if name not in ids:
            raise ValueError(f"unknown label {name!r}; expected one of {list(ids)}")
        vector[ids[name]] = 1.0
    return vector


def _cells(record, columns):
    """The 0/1 vector of one row's `label_columns`."""
    vector = np.zeros(len(columns), np.float32)
    for i, column in enumerate(columns):
        value = record[column]
        cell = (_CELLS.get(str(value).strip().lower())
                if isinstance(value, (str, bool, int)) else None)
        if cell is None:
            raise ValueError(f"column {column!r}: {value!r} is not 0/1 (or true/false)")
        vector[i] = cell
    return vector
