"""Pictures of a fine-tuning run for the notebooks: curves, confusion matrices, bar charts.

Needs matplotlib (the `notebooks` extra). Each function returns a matplotlib `Figure` made with
`pyplot`, so a notebook shows it once, at the end of the cell.
"""

import csv

import matplotlib.pyplot as plt
import numpy as np


def plot_training_log(path, metric):
    """Training loss and a dev score per epoch, from a recipe's `training_log.csv`.

    Args:
        path: str. A CSV with one row per epoch and `epoch` (0-based), `loss` and `metric`
            columns, as `kbert.tasks.epoch_callbacks.TrainingLog` or Keras' `CSVLogger`
            writes it; an epoch whose `metric` cell is empty or NA is left out of its panel.
        metric: str. The column of the dev score, e.g. "dev_f1".

    Returns:
        `Figure` with two panels: loss and `metric` against the epoch (1-based).
    """
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not any(row.get(metric) not in (None, "", "NA") for row in rows) or "loss" not in rows[0]:
        raise ValueError(f"{path}: expected rows with 'epoch', 'loss' and {metric!r} columns, "
                         f"got {len(rows)} rows with columns {list(rows[0]) if rows else []}")
    epochs = [int(row["epoch"]) + 1 for row in rows]
    figure, axes = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    for ax, column in zip(axes, ("loss", metric), strict=True):
        scored = [(int(row["epoch"]) + 1, float(row[column])) for row in rows
                  if row[column] not in ("", "NA")]  # unscored epochs: empty (Keras: NA)
        ax.plot(*zip(*scored, strict=True), "o-")
        ax.set(xlabel="epoch", xticks=epochs, title=column)
    return figure


def plot_confusion_matrix(gold, predicted, label_names):
    """Counts of (gold, predicted) class pairs as a heat map with the counts written in.

    Args:
        gold: sequence of int. Gold class ids.
        predicted: sequence of int. Predicted class ids, as many as `gold`.
        label_names: sequence of str. The class names in id order.

    Returns:
        `Figure`; rows are gold classes, columns predicted ones.
    """
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    if gold.shape != predicted.shape:
        raise ValueError(f"gold has {gold.shape} labels but predicted has {predicted.shape}")
    counts = np.zeros((len(label_names),) * 2, dtype=np.int64)
    np.add.at(counts, (gold, predicted), 1)
    figure, ax = plt.subplots(figsize=(4.5, 3.8), layout="constrained")
    ax.imshow(counts, cmap="Blues")
    for (row, column), count in np.ndenumerate(counts):
        ax.text(column, row, str(count), ha="center", va="center",
                color="white" if count > counts.max() / 2 else "black")
    ticks = range(len(label_names))
    ax.set(xticks=ticks, yticks=ticks, xticklabels=label_names, yticklabels=label_names,
           xlabel="predicted", ylabel="gold", title=f"{len(gold)} examples")
    return figure


def plot_bars(series, title, ylabel=None):
    """A grouped bar chart: one group per category, one bar per series, values written on top.

    Args:
        series: dict of series name -> dict of category -> float. Every series has the same
            categories, e.g. `{"EM": {"what": 41.0, "who": 52.3}, "F1": {...}}`.
        title: str.
        ylabel: str. Defaults to None.

    Returns:
        `Figure`.
    """
    categories = list(next(iter(series.values())))
    width = 0.8 / len(series)
    figure, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(categories) * len(series)), 3.2),
                              layout="constrained")
    for i, (name, values) in enumerate(series.items()):
        bars = ax.bar(np.arange(len(categories)) + (i - (len(series) - 1) / 2) * width,
                      [values[c] for c in categories], width, label=name)
        ax.bar_label(bars, fmt="%.3g", fontsize=8)
    ax.set(xticks=np.arange(len(categories)), xticklabels=categories, title=title,
           ylabel=ylabel)
    if len(series) > 1:
        ax.legend(fontsize=8)
    return figure
