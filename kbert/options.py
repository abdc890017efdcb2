"""One declaration per option: a config field holds its default, help, range and choices.

    train_batch_size: int = options.option(32, "Training batch size (global).",
                                           valid=ranges.at_least(1))

The run configs (`kbert.tasks.run_config` and the recipes' configs) declare every setting so;
the tools generate their absl flags from those fields (name, type, default, help, range,
choices), `ranges.check` validates a config built in Python against the same ranges, and
`documented` writes each config's "Args:" docstring section from the same help texts. A
field declared without `option` (a plain default) is a Python-only argument: it gets no flag.

This module imports no TensorFlow, so a tool can print its --help without starting it.
"""

import dataclasses
import types
import typing

from kbert import ranges

HELP = "help"
CHOICES = "choices"


def option(default, help, *, valid=None, choices=None):  # noqa: A002  (absl's word)
    """A dataclass field that is also a command-line flag.

    Args:
        default: the default value (None: unset).
        help: str. One or two sentences, as the flag's help and the docstring line.
        valid: `kbert.ranges.Range` of a number. Defaults to None (any value).
        choices: sequence of str. The values a string option may take.
    """
    metadata = {HELP: help}
    if valid is not None:
        metadata[ranges.KEY] = valid
    if choices is not None:
        metadata[CHOICES] = tuple(choices)
    return dataclasses.field(default=default, metadata=metadata)


_KEEP = object()


def same_as(cls, name, *, default=_KEEP, valid=_KEEP, choices=_KEEP):
    """The option `name` of the config class `cls` again, for another config that takes the
    same setting: the same help, and the same default, range and choices unless given (a
    narrower range, another default). tests/test_options.py lists where they differ."""
    field = cls.__dataclass_fields__[name]
    return option(field.default if default is _KEEP else default, field.metadata[HELP],
                  valid=ranges.of(cls).get(name) if valid is _KEEP else valid,
                  choices=field.metadata.get(CHOICES) if choices is _KEEP else choices)


def fields(cls):
    """The option fields of the dataclass `cls` (those declared with `option`), in order."""
    return [f for f in dataclasses.fields(cls) if HELP in f.metadata]


def check_choices(config):
    """Raises ValueError for the first string option of `config` outside its choices."""
    for f in fields(type(config)):
        value = getattr(config, f.name)
        if CHOICES in f.metadata and isinstance(value, str) and value not in f.metadata[CHOICES]:
            raise ValueError(f"{f.name} must be one of {', '.join(f.metadata[CHOICES])}, got "
                             f"{value!r}")


def _annotation(field):
    """A field's annotation, None removed; `object` for one that also takes objects."""
    annotation = field.type
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = kinds[0] if len(kinds) == 1 else object
    return annotation


def value_type(field):
    """The type of a field's values, None removed: `int | None` -> int, `tuple[str, ...]`
    -> tuple. `object` for a field that also takes objects (a strategy)."""
    annotation = _annotation(field)
    return typing.get_origin(annotation) or annotation


def item_type(field):
    """The type of the items of a tuple field: `tuple[int, ...]` -> int."""
    return typing.get_args(_annotation(field))[0]


def documented(cls):
    """Class decorator: appends an "Args:" section built from the option helps to the
    docstring (after the first paragraph's text), so a field's help is written once."""
    lines = []
    for f in fields(cls):
        default = "" if f.default is None else f" Defaults to {f.default!r}."
        lines.append(f"    {f.name}: {value_type(f).__name__}. {f.metadata[HELP]}{default}")
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n\nArgs:\n" + "\n".join(lines) + "\n"
    return cls
