"""Progress of `fit`, `evaluate` and `predict` while they run: steps, steps/s and time left.

On a terminal, Keras' progress bar (with its ETA) and steps/s; elsewhere (a log file, a
batch job), one absl INFO line every `log_every_n_steps` steps (with examples/s, given the
batch size),

    epoch 1/3 step 200/1,250 (16%) 4.21 steps/s loss 0.4312 ETA 4m09s (epoch), 14m40s (run)

and one at the end of each epoch (or evaluate or predict run) with its logs and its time.
Both show only while absl shows INFO (`--verbosity`); `log_every_n_steps=0` leaves the end
lines only. Call `fit`, `evaluate` and `predict` with `verbose=0`, or Keras' own bar shows
too. Each process shows its own progress and runs no collective op, so every worker of a
distributed run may use these callbacks.
"""

import logging as python_logging
import sys
import time

import keras
import numpy as np
from absl import logging

from kbert import rates


class _Progress(keras.callbacks.Callback):
    """The settings both progress callbacks take (documented on each)."""

    def __init__(self, log_every_n_steps=100, examples_per_step=None, interactive=None):
        super().__init__()
        self.log_every_n_steps = _check_every(log_every_n_steps)
        self.examples_per_step = examples_per_step
        self.interactive = interactive


class TrainingProgress(_Progress):
    """Shows the progress of `model.fit`: Keras' bar on a terminal, else absl lines.

    Put it last in the callback list: its epoch line shows the epoch's logs as the callbacks
    before it left them (dev scores, ...). The run's ETA counts the epochs left, so a run
    resumed at a later epoch (a restored backup, `initial_epoch`) counts only its own.

    Args:
        log_every_n_steps: int. A line every this many steps; 0: the epoch lines only, and
            no bar. Defaults to 100.
        examples_per_step: int or None. The global batch size, for examples/s. Defaults to
            None (not shown).
        interactive: bool or None. Keras' progress bar (True) or absl lines (False); None:
            the bar when stdout is a terminal. Defaults to None.
    """

    def on_train_begin(self, logs=None):
        self._shown = _info_shown()
        self._bar = _bar_shown(self.log_every_n_steps, self.interactive)
        # This fit's steps, epoch-end work (dev scores, backups) included: for the run's ETA.
        self._meter = rates.Meter()
        self._done = 0  # steps of this fit before the current epoch

    def on_epoch_begin(self, epoch, logs=None):
        if not self._shown:
            return
        self._epoch, self._pass = epoch, _Pass(self.params.get("steps"),
                                               self.log_every_n_steps, self._bar)
        if self._bar:
            header = f"Epoch {epoch + 1}/{self.params['epochs']}"
            if self._done:  # a rate to go by
                header += f", ETA of the run {rates.format_duration(self._run_eta(0))}"
            print(header, flush=True)

    def on_train_batch_end(self, batch, logs=None):
        if not self._shown:
            return
        due = self._pass.advance(batch)
        self._meter.update(self._done + self._pass.step)
        if self._pass.bar:
            self._pass.update_bar(logs)
        elif due:
            # Both times left at the run's rate: the epoch's is never the longer.
            pass_eta = rates.seconds_left(self._pass.steps_left(), self._meter.rate())
            logging.info("epoch %d/%d %s %s%s ETA %s (epoch), %s (run)", self._epoch + 1,
                         self.params["epochs"], self._pass.count(),
                         _rates(self._pass.meter.lap(), self.examples_per_step),
                         _metrics(logs), rates.format_duration(pass_eta),
                         rates.format_duration(self._run_eta(self._pass.step)))

    def on_epoch_end(self, epoch, logs=None):
        if not self._shown:
            return
        self._done += self._pass.step
        if self._pass.bar:
            self._pass.finish_bar(logs)
            return
        run_eta = (f"; ETA {rates.format_duration(self._run_eta(self._pass.step))} (run)"
                   if epoch + 1 < self.params["epochs"] else "")
        logging.info("epoch %d/%d done: %s steps in %s, %s%s%s", epoch + 1,
                     self.params["epochs"], f"{self._pass.step:,}",
                     rates.format_duration(time.monotonic() - self._pass.start),
                     _rates(self._pass.meter.rate(), self.examples_per_step),
                     _metrics(logs), run_eta)

    def _run_eta(self, step):
        """Seconds left in this fit after `step` of the current epoch; None if unknown."""
        steps = self.params.get("steps")
        if steps is None:
            return None
        left = steps - step + (self.params["epochs"] - self._epoch - 1) * steps
        return rates.seconds_left(left, self._meter.rate())


class PredictionProgress(_Progress):
    """Shows the progress of `model.predict` and `model.evaluate`: Keras' bar on a terminal,
    else absl lines ("predict step 30/120 (25%) 240 examples 9.80 steps/s 78.4 examples/s
    ETA 9s"), and one line at the end with the time (and evaluate's metrics).

    Args:
        log_every_n_steps: int. A line every this many steps; 0: the end line only, and no
            bar. Defaults to 100.
        examples_per_step: int or None. The batch size, for evaluate's examples (predict
            counts the rows of its outputs). Defaults to None (not shown).
        interactive: bool or None. Keras' progress bar (True) or absl lines (False); None:
            the bar when stdout is a terminal. Defaults to None.
    """

    def on_predict_begin(self, logs=None):
        self._begin("predict")

    def on_test_begin(self, logs=None):
        self._begin("evaluate")

    def on_predict_batch_end(self, batch, logs=None):
        # The logs are this call's outputs, not metrics: only their rows count.
        self._rows += _output_rows(logs)
        self._batch_end(batch, None)

    def on_test_batch_end(self, batch, logs=None):
        self._batch_end(batch, logs)

    def on_predict_end(self, logs=None):
        self._end(None)

    def on_test_end(self, logs=None):
        self._end(logs)

    def _begin(self, label):
        self._shown = _info_shown()
        self._label, self._rows = label, 0
        self._pass = _Pass(self.params.get("steps"), self.log_every_n_steps,
                           _bar_shown(self.log_every_n_steps, self.interactive))

    def _batch_end(self, batch, logs):
        if not self._shown:
            return
        due = self._pass.advance(batch)
        if self._pass.bar:
            self._pass.update_bar(logs)
        elif due:
            eta = rates.seconds_left(self._pass.steps_left(), self._pass.meter.rate())
            examples = self._examples()
            logging.info("%s %s%s %s%s ETA %s", self._label, self._pass.count(),
                         f" {examples:,} examples" if examples else "",
                         self._rates(self._pass.meter.lap()), _metrics(logs),
                         rates.format_duration(eta))

    def _end(self, logs):
        if not self._shown:
            return
        if self._pass.bar:
            self._pass.finish_bar(logs)
            return
        examples = self._examples()
        logging.info("%s done: %s steps%s in %s, %s%s", self._label, f"{self._pass.step:,}",
                     f" ({examples:,} examples)" if examples else "",
                     rates.format_duration(time.monotonic() - self._pass.start),
                     self._rates(self._pass.meter.rate()), _metrics(logs))

    def _examples(self):
        """Examples done: predict's rows of outputs, evaluate's steps times
        `examples_per_step` (0 without it)."""
        if self._label == "predict":
            return self._rows
        return self._pass.step * (self.examples_per_step or 0)

    def _rates(self, steps_per_second):
        examples = self._examples()
        return _rates(steps_per_second, examples / self._pass.step if examples else None)


class _Pass:
    """One pass over the data (an epoch, an evaluate or predict run): the step it is at, its
    rate, its bar, and when a line is due.

    Args:
        steps: int or None. The steps of the pass; None if unknown.
        every: int. A line every this many steps; 0: none.
        bar: bool. Show Keras' progress bar.
    """

    def __init__(self, steps, every, bar):
        self.steps, self.every = steps, every
        self.step = self._shown = 0
        self.start = time.monotonic()
        self.meter = rates.Meter()
        # As Keras' ProgbarLogger: the logs are shown as given (Keras' running means).
        self.bar = keras.utils.Progbar(steps, stateless_metrics=set()) if bar else None

    def advance(self, batch):
        """Moves past the step of index `batch`; returns whether a line is due.

        With steps_per_execution N > 1, Keras calls back every N steps with the index of the
        last: the step is that index + 1, not a count of calls (at most `steps`: the last
        call of a pass may cover fewer than N).
        """
        self.step = batch + 1 if self.steps is None else min(batch + 1, self.steps)
        self.meter.update(self.step)
        if not self.every or self.step // self.every == self._shown // self.every:
            return False
        self._shown = self.step
        return True

    def steps_left(self):
        """Steps after the current one; None if unknown."""
        return None if self.steps is None else self.steps - self.step

    def count(self):
        """'step 200/1,250 (16%)', or 'step 200/?' when the number of steps is unknown."""
        if not self.steps:
            return f"step {self.step:,}/?"
        return f"step {self.step:,}/{self.steps:,} ({100 * self.step // self.steps}%)"

    def update_bar(self, logs):
        values = _numbers(logs)
        rate = self.meter.rate()
        if rate is not None:  # wall time over steps, without the first (tracing) step
            values.append(("steps/s", rate))
        self.bar.update(self.step, values, finalize=False)

    def finish_bar(self, logs):
        if self.bar.target is None:  # as Keras' ProgbarLogger: now the steps are known
            self.bar.target = self.step
        self.bar.update(self.step, _numbers(logs), finalize=True)


def _check_every(log_every_n_steps):
    if log_every_n_steps < 0:
        raise ValueError(f"log_every_n_steps must be >= 0, got {log_every_n_steps}")
    return log_every_n_steps


def _info_shown():
    """Whether absl shows INFO lines now (`--verbosity`, or its Python logger's level)."""
    return logging.get_absl_logger().isEnabledFor(python_logging.INFO)


def _bar_shown(log_every_n_steps, interactive):
    """Whether to show Keras' bar rather than absl lines."""
    if interactive is None:
        interactive = sys.stdout.isatty()
    return bool(log_every_n_steps) and interactive


def _rates(steps_per_second, examples_per_step):
    """'4.21 steps/s', and '134.7 examples/s' with the examples of a step."""
    text = f"{rates.format_rate(steps_per_second)} steps/s"
    if examples_per_step:
        examples = None if steps_per_second is None else steps_per_second * examples_per_step
        text += f" {rates.format_rate(examples, digits=1)} examples/s"
    return text


def _numbers(logs):
    """The numbers of Keras' logs, as (name, value) pairs."""
    return [(k, v) for k, v in (logs or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _metrics(logs):
    """' loss 0.4312 dev_f1 0.8812': the numbers of Keras' logs."""
    return "".join(f" {k} {v:.4g}" for k, v in _numbers(logs))


def _output_rows(outputs):
    """The examples of one predict call: the rows of its (flattened) outputs."""
    first = next(iter((outputs or {}).values()), None)
    return np.shape(first)[0] if np.ndim(first) else 1
