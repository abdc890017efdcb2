"""Rates and times left, as progress lines show them: pure arithmetic and formatting.

Shared by the training callbacks (`kbert.tasks.progress`) and the pretraining-data writer
(`kbert.data.pretraining.writer`), which sit in layers that may not import each other.
"""

import math
import time


def format_duration(seconds):
    """A duration, to the second below an hour: "12s", "4m09s", "1h02m", "3d04h"; "?" for
    None (unknown)."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    minutes, seconds = divmod(max(0, round(seconds)), 60)
    if not minutes:
        return f"{seconds}s"
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes}m{seconds:02d}s"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h" if days else f"{hours}h{minutes:02d}m"


def format_rate(rate, digits=2):
    """`rate` with thousands separators and `digits` decimals; "?" for None (unknown)."""
    return "?" if rate is None else f"{rate:,.{digits}f}"


def seconds_left(remaining, rate):
    """Seconds to do `remaining` units at `rate` units per second: 0 with none left, None
    where either is unknown (None) or the rate is 0."""
    if remaining is None:
        return None
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate else None


class Meter:
    """Units done against wall time: the mean rate, and the rate since the previous lap.

    The first update's interval holds start-up (tracing and compiling a step, filling input
    buffers): both rates leave it out once a later update gives them an interval of their
    own, and include it until then.

    Args:
        done: int. Units done at the start. Defaults to 0.
        clock: callable returning seconds. Defaults to `time.monotonic`.
    """

    def __init__(self, done=0, clock=time.monotonic):
        self._clock = clock
        self._start = self._now = (done, clock())
        self._first = self._lap = None

    @property
    def done(self):
        """Units done at the latest update."""
        return self._now[0]

    def update(self, done):
        """Records that `done` units (in all, since before the start) are done now."""
        self._now = (done, self._clock())
        if self._first is None:
            self._first = self._lap = self._now

    def rate(self):
        """Units per second since the first update (since the start until a later one);
        None before any unit is done."""
        return _rate(self._first, self._now) or _rate(self._start, self._now)

    def lap(self):
        """Units per second since the previous lap (the first lap: since the first update),
        or since the start where no unit was done in that interval; starts a new lap."""
        rate = _rate(self._lap, self._now) or _rate(self._start, self._now)
        self._lap = self._now
        return rate


def _rate(since, now):
    """Units per second between two (done, seconds) points; None where no unit or no time
    passed."""
    if since is None or now[0] <= since[0] or now[1] <= since[1]:
        return None
    return (now[0] - since[0]) / (now[1] - since[1])
