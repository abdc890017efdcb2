"""Progress while fit, evaluate and predict run (steps, steps/s, time left), and its arithmetic."""

import logging as python_logging
import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import rates
from kbert.tasks import progress

# 40 rows in batches of 4: 10 steps an epoch.
X = np.random.default_rng(0).normal(size=(40, 3)).astype("float32")
Y = X.sum(axis=1, keepdims=True)


@pytest.fixture
def absl_lines(caplog):
    """absl's INFO lines from now on (--verbosity=0, the tools' default)."""
    caplog.set_level(python_logging.INFO, logger="absl")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "absl"]


def tiny_model(**compile_kwargs):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", **compile_kwargs)
    return model


def fit(model, callbacks, epochs=2, **kwargs):
    model.fit(X, Y, batch_size=4, epochs=epochs, verbose=0, callbacks=callbacks, **kwargs)


def test_format_duration():
    assert [rates.format_duration(s) for s in (0, 12.4, 59.6, 249, 3720, 3 * 86400 + 4 * 3600 + 99,
                                               -3)] == [
        "0s", "12s", "1m00s", "4m09s", "1h02m", "3d04h", "0s"]
    assert rates.format_duration(None) == rates.format_duration(math.inf) == "?"


def test_rates_and_seconds_left():
    assert rates.seconds_left(10, 2.0) == 5.0
    assert rates.seconds_left(0, None) == 0.0  # nothing left: no rate needed
    assert rates.seconds_left(None, 2.0) is None and rates.seconds_left(5, 0) is None
    assert rates.format_rate(1234.567) == "1,234.57" and rates.format_rate(None) == "?"
    assert rates.format_rate(2.25, digits=1) == "2.2"


def test_meter_leaves_out_the_first_interval():
    times = iter([0.0, 10.0, 12.0, 14.0])  # start, then three updates
    meter = rates.Meter(clock=lambda: next(times))
    meter.update(1)  # 10 s for the first step: tracing, compiling
    assert meter.rate() == 0.1 and meter.done == 1  # no later interval yet
    meter.update(5)
    assert meter.rate() == 2.0 and meter.lap() == 2.0  # (5 - 1) / (12 - 10)
    meter.update(11)
    assert meter.lap() == 3.0  # (11 - 5) / (14 - 12): since the previous lap
    assert meter.rate() == 2.5  # (11 - 1) / (14 - 10)


def test_training_lines_every_n_steps_and_at_each_epoch_end(absl_lines):
    def add_dev_score(epoch, logs):  # as kbert's DevScores, before the progress callback
        logs["dev_f1"] = 0.5 + epoch

    fit(tiny_model(), [keras.callbacks.LambdaCallback(on_epoch_end=add_dev_score),
                       progress.TrainingProgress(3, examples_per_step=4, interactive=False)])
    lines = absl_lines()
    steps = [line for line in lines if " step " in line]
    assert [re.search(r"epoch \d/2 step \d+/10 \(\d+%\)", line)[0] for line in steps] == [
        f"epoch {e}/2 step {s}/10 ({s}0%)" for e in (1, 2) for s in (3, 6, 9)]
    pattern = (r" [\d.,]+ steps/s [\d.,]+ examples/s loss [\d.e+-]+ "
               r"ETA \w+ \(epoch\), \w+ \(run\)$")
    assert all(re.search(pattern, line) for line in steps), steps
    ends = [line for line in lines if " done: " in line]
    assert len(ends) == 2 and len(lines) == 8, lines
    assert re.fullmatch(r"epoch 1/2 done: 10 steps in \w+, [\d.,]+ steps/s [\d.,]+ examples/s "
                        r"loss [\d.e+-]+ dev_f1 0.5; ETA \w+ \(run\)", ends[0]), ends[0]
    assert "dev_f1 1.5" in ends[1] and "ETA" not in ends[1]  # no epoch left


def test_zero_shows_the_epoch_lines_only(absl_lines, capsys):
    fit(tiny_model(), [progress.TrainingProgress(0, interactive=True)])
    assert [line[:16] for line in absl_lines()] == ["epoch 1/2 done: ", "epoch 2/2 done: "]
    assert capsys.readouterr().out == ""  # and no bar, even on a terminal


def test_interactive_shows_keras_bar_with_steps_per_second(absl_lines, capsys):
    fit(tiny_model(), [progress.TrainingProgress(3, interactive=True)])
    out = capsys.readouterr().out
    assert "Epoch 1/2\n" in out and "Epoch 2/2, ETA of the run " in out
    assert re.search(r"10/10\S* .* - loss: [\d.e+-]+ - steps/s: [\d.]+\n", out), out
    assert absl_lines() == []


def test_nothing_shows_below_info(caplog, capsys):
    caplog.set_level(python_logging.WARNING, logger="absl")  # --verbosity=-1
    for interactive in (True, False):
        fit(tiny_model(), [progress.TrainingProgress(1, interactive=interactive)])
        model = tiny_model()
        model.predict(X, verbose=0, callbacks=[progress.PredictionProgress(
            1, interactive=interactive)])
    # Progress is absl's (TensorFlow's own warnings, such as retracing, are not its to hide).
    assert capsys.readouterr().out == ""
    assert [r for r in caplog.records if r.name == "absl"] == []


def test_resumed_run_counts_its_own_epochs(absl_lines):
    fit(tiny_model(), [progress.TrainingProgress(5, interactive=False)], initial_epoch=1)
    lines = absl_lines()
    assert len(lines) == 3 and all(line.startswith("epoch 2/2 ") for line in lines), lines


def test_steps_per_execution_shows_the_true_steps(absl_lines):
    # Keras calls back after steps 4, 8 and 10 (the last call runs 2 steps).
    fit(tiny_model(steps_per_execution=4), [progress.TrainingProgress(3, interactive=False)],
        epochs=1)
    assert [re.search(r"step \d+/10", line)[0] for line in absl_lines()[:-1]] == [
        "step 4/10", "step 8/10", "step 10/10"]


@pytest.mark.filterwarnings("ignore:Your input ran out of data")  # how Keras finds the end
def test_unknown_steps_have_no_eta(absl_lines):
    data = tf.data.Dataset.from_generator(
        lambda: ((X[i:i + 4], Y[i:i + 4]) for i in range(0, 40, 4)),
        output_signature=(tf.TensorSpec([None, 3]), tf.TensorSpec([None, 1])))
    tiny_model().fit(data, epochs=1, verbose=0, shuffle=False,
                     callbacks=[progress.TrainingProgress(3, interactive=False)])
    lines = absl_lines()
    assert re.search(r"^epoch 1/1 step 3/\? [\d.,]+ steps/s loss \S+ ETA \? \(epoch\), "
                     r"\? \(run\)$", lines[0]), lines


def test_prediction_and_evaluation_progress(absl_lines):
    model = tiny_model(metrics=["mae"])
    model.predict(X, batch_size=4, verbose=0,
                  callbacks=[progress.PredictionProgress(3, interactive=False)])
    lines = absl_lines()
    assert len(lines) == 4, lines
    assert re.fullmatch(r"predict step 3/10 \(30%\) 12 examples [\d.,]+ steps/s "
                        r"[\d.,]+ examples/s ETA \w+", lines[0]), lines[0]
    assert re.fullmatch(r"predict done: 10 steps \(40 examples\) in \w+, [\d.,]+ steps/s "
                        r"[\d.,]+ examples/s", lines[-1]), lines[-1]
    model.evaluate(X, Y, batch_size=4, verbose=0, callbacks=[
        progress.PredictionProgress(5, examples_per_step=4, interactive=False)])
    lines = absl_lines()[4:]
    assert re.match(r"evaluate step 5/10 \(50%\) 20 examples .* loss \S+ mae \S+ ETA",
                    lines[0]), lines
    assert re.match(r"evaluate done: 10 steps \(40 examples\) .* loss \S+ mae \S+$",
                    lines[-1]), lines


def test_negative_interval_is_refused():
    with pytest.raises(ValueError, match="log_every_n_steps must be >= 0, got -1"):
        progress.TrainingProgress(-1)
