"""The valid range of each numeric config field, declared once in the field's metadata.

    train_batch_size: int = ranges.field(32, ranges.at_least(1))

`check(config)`, called by the config's `__post_init__`, raises one ValueError naming the
field and its range ("train_batch_size must be >= 1, got 0"); `of(cls)` gives every field's
`Range`, which the tools hand to absl so that a bad flag fails when it is parsed. A subclass
that re-declares a field only to change its default keeps the base class's range. A field
whose range depends on another field (NER's window_stride) is checked by hand in its
`__post_init__`.
"""

import dataclasses
import math

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


def field(default, valid):
    """A dataclass field with `default` whose values must lie in `valid` (None always may)."""
    return dataclasses.field(default=default, metadata={KEY: valid})


def of(cls):
    """{field name: `Range`} of a dataclass, base classes' ranges included."""
    found = {}
    for klass in reversed(cls.__mro__):
        for f in getattr(klass, "__dataclass_fields__", {}).values():
            if KEY in f.metadata:
                found[f.name] = f.metadata[KEY]
    return found


def check(config):
    """Raises ValueError for the first field of `config` outside its range."""
    for name, valid in of(type(config)).items():
        value = getattr(config, name)
        if value is not None and value not in valid:
            raise ValueError(f"{name} must be {valid}, got {value}")
