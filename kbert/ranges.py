"""The valid range of each numeric config field, declared once in the field's metadata.

    train_batch_size: int = ranges.field(32, ranges.at_least(1))

`check(config)`, called by the config's `__post_init__`, raises one ValueError naming the
field and its range ("train_batch_size must be >= 1, got 0"); `of(cls)` gives every field's
`Range`, which the tools hand to absl so that a bad flag fails when it is parsed. A float
field declared without a range gets `FINITE`: no float option takes nan or inf. A subclass
that re-declares a field only to change its default keeps the base class's range. A field
whose range depends on another field (NER's window_stride) is checked by hand in its
`__post_init__`.
"""

import dataclasses
import math
import typing

KEY = "range"  # the field-metadata key


@dataclasses.dataclass(frozen=True)
class Range:
    """A closed, open or half-open interval; None leaves that side unbounded.

    Args:
        low, high: number or None. The bounds.
        low_open, high_open: bool. The bound itself is outside. Default to False.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value):
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self):
        if self.low is None and self.high is None:
            return "a finite number"
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {self.high}"
        return (f"in {'(' if self.low_open else '['}{self.low}, "
                f"{self.high}{')' if self.high_open else ']'}")


def at_least(low):
    """[low, inf)."""
    return Range(low)


def above(low):
    """(low, inf)."""
    return Range(low, low_open=True)


def between(low, high, *, low_open=False):
    """[low, high], or (low, high] with `low_open`."""
    return Range(low, high, low_open=low_open)


# The seeds `keras.utils.set_random_seed` takes (numpy's).
SEED = between(0, 2**32 - 1)
# The longest sequence a pretraining setting takes: BERT has 512 positions, long-context
# encoders up to 8192; more only exhausts memory (a [pieces, length] array per chunk).
MAX_SEQ_LENGTH = 8192
# Any number but nan and inf: the range of a float field declared without one.
FINITE = Range()


def field(default, valid):
    """A dataclass field with `default` whose values must lie in `valid` (None always may)."""
    return dataclasses.field(default=default, metadata={KEY: valid})


def of(cls):
    """{field name: `Range`} of a dataclass, base classes' ranges included; `FINITE` for a
    float field declared without one."""
    found = {}
    for klass in filter(dataclasses.is_dataclass, reversed(cls.__mro__)):
        for f in dataclasses.fields(klass):
            if KEY in f.metadata:
                found[f.name] = f.metadata[KEY]
            elif _is_float(f.type) and f.name not in found:
                found[f.name] = FINITE
    return found


def _is_float(annotation):
    """Whether a field annotation is float, or float | None."""
    return annotation is float or float in typing.get_args(annotation)


def check(config):
    """Raises ValueError for the first field of `config` outside its range."""
    for name, valid in of(type(config)).items():
        value = getattr(config, name)
        if value is not None and value not in valid:
            raise ValueError(f"{name} must be {valid}, got {value}")
