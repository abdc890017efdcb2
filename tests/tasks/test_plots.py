"""kbert.tasks.plots draws what it is given: the right counts, epochs and bar heights."""

import matplotlib
import numpy as np
import pytest

from kbert.tasks import plots

matplotlib.use("Agg")


def test_training_log_plots_loss_and_the_dev_metric_per_epoch(tmp_path):
    log = tmp_path / "training_log.csv"
    log.write_text("dev_f1,epoch,loss,val_loss\n0.5,0,0.9,NA\n0.75,1,0.4,NA\n", "utf-8")
    figure = plots.plot_training_log(str(log), "dev_f1")
    (loss_x, loss_y), (f1_x, f1_y) = [ax.lines[0].get_data() for ax in figure.axes]
    assert list(loss_x) == list(f1_x) == [1, 2]  # 1-based epochs
    assert list(loss_y) == [0.9, 0.4] and list(f1_y) == [0.5, 0.75]
    with pytest.raises(ValueError, match=r"training_log.csv: expected .*'dev_accuracy'"):
        plots.plot_training_log(str(log), "dev_accuracy")


def test_training_log_epochs_without_a_dev_score_are_left_out_of_its_panel(tmp_path):
    log = tmp_path / "training_log.csv"  # SQuAD's parts: dev scored after every second one
    log.write_text("epoch,dev_f1,loss\n0,,0.9\n1,0.5,0.6\n2,,0.5\n3,0.75,0.4\n", "utf-8")
    (loss_x, loss_y), (f1_x, f1_y) = [
        ax.lines[0].get_data() for ax in plots.plot_training_log(str(log), "dev_f1").axes]
    assert list(loss_x) == [1, 2, 3, 4] and list(loss_y) == [0.9, 0.6, 0.5, 0.4]
    assert list(f1_x) == [2, 4] and list(f1_y) == [0.5, 0.75]


def test_confusion_matrix_counts_gold_rows_and_predicted_columns():
    figure = plots.plot_confusion_matrix([0, 0, 1, 1, 1, 2], [0, 1, 1, 1, 2, 2], "abc")
    counts = figure.axes[0].images[0].get_array()
    np.testing.assert_array_equal(counts, [[1, 1, 0], [0, 2, 1], [0, 0, 1]])
    assert [t.get_text() for t in figure.axes[0].texts] == list("110021001")
    with pytest.raises(ValueError, match="gold has"):
        plots.plot_confusion_matrix([0, 1], [0], "ab")


def test_bars_one_group_per_category_one_bar_per_series():
    figure = plots.plot_bars({"EM": {"what": 40.0, "who": 60.0}, "F1": {"what": 50.0, "who": 70.0}},
                             "by question word")
    ax = figure.axes[0]
    assert [round(p.get_height()) for p in ax.patches] == [40, 60, 50, 70]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["what", "who"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["EM", "F1"]
