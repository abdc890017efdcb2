"""A tool's flags, generated from its run config (`kbert.tasks.configs`).

    CONFIG_FLAGS = config_flags.define_config_flags(configs.GlueConfig)
    ...
    config = CONFIG_FLAGS.config()       # in main(): the flags' values as a GlueConfig

Every option field of the config (`kbert.options.option`) becomes one absl flag of the same
name, type, default and help; its range (`kbert.ranges`) is checked when the flags are parsed
and its choices make an enum flag. So a setting is declared once, in the config, and means the
same in every tool. Batch sizes are global, split over the replicas.

A config class names the options a tool must be given in `REQUIRED`, and may map other flag
names to options in `ALIASES` (`{"input_dir": "input"}`).
"""

import importlib
import sys

from absl import app
from absl import flags
from absl import logging

from kbert import options
from kbert.cli import command

# absl's DEFINE for each option type (`kbert.options.value_type`).
_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string, tuple: flags.DEFINE_list, object: flags.DEFINE_string}


class ConfigFlags:
    """The flags of one config class; `config()` builds the config from their values."""

    def __init__(self, config_class, holders):
        self.config_class, self.holders = config_class, holders

    def values(self):
        """{field name: flag value}, lists as tuples of the field's item type."""
        fields = {f.name: f for f in options.fields(self.config_class)}
        return {name: tuple(map(options.item_type(fields[name]), holder.value))
                if isinstance(holder.value, list) else holder.value
                for name, holder in self.holders.items()}

    def given(self):
        """The names of the options given on the command line."""
        return {name for name, holder in self.holders.items() if holder.present}

    def config(self, **overrides):
        """The config of the parsed flags; a ValueError of the config is a usage error, and
        so is an option given under two of its names."""
        for alias, name in getattr(self.config_class, "ALIASES", {}).items():
            # absl counts a value given through the alias on both flags.
            if flags.FLAGS[name].present > flags.FLAGS[alias].present > 0:
                raise app.UsageError(f"--{alias} is another name of --{name}; pass one of "
                                     "them, not both")
        try:
            return self.config_class(**{**self.values(), **overrides})
        except ValueError as e:
            raise app.UsageError(str(e)) from None


def define_config_flags(config_class, tool=None):
    """Defines a flag for every option field of `config_class`, as key flags of the tool
    module named `tool` (default: the caller; they show in its --help), and their range
    checks; returns `ConfigFlags`."""
    tool = tool or sys._getframe(1).f_globals["__name__"]
    # absl names a script's flags after sys.argv[0]; an imported tool after its module.
    module_name = sys.argv[0] if tool == "__main__" else tool
    holders = {}
    for field in options.fields(config_class):
        kind = options.value_type(field)
        choices = field.metadata.get(options.CHOICES)
        default = field.default
        if isinstance(default, tuple):
            default = [str(item) for item in default]
        if choices:
            holder = flags.DEFINE_enum(field.name, default, choices, field.metadata[options.HELP],
                                       module_name=module_name)
        else:
            holder = _DEFINE[kind](field.name, default, field.metadata[options.HELP],
                                   module_name=module_name)
        if kind is tuple and options.item_type(field) is int:
            flags.register_validator(field.name, _all_integers,
                                     message=f"{field.name} must be comma-separated integers, "
                                     "e.g. -1,-2")
        holders[field.name] = holder
    for alias, name in getattr(config_class, "ALIASES", {}).items():
        flags.DEFINE_alias(alias, name, module_name=module_name)
    for name in config_class.REQUIRED:
        flags.mark_flag_as_required(name)
    command.validate_ranges(config_class)
    return ConfigFlags(config_class, holders)


def _all_integers(items):
    """Whether every item of a list flag's value reads as an integer."""
    try:
        for item in items or ():
            int(item)
    except ValueError:
        return False
    return True


def recipe_command(config_class, recipe):
    """A recipe's tool: (its `ConfigFlags`, its `main(argv)`, its command `run()`).

    The flags are `config_class`'s; `main` builds the config from them and runs `recipe`
    ("module:function", imported only then: --help needs no TensorFlow), logging each step's
    results; `run` is the installed command's entry point (`command.run(main)`).
    """
    tool = sys._getframe(1).f_globals["__name__"]
    config_flags = define_config_flags(config_class, tool)

    def main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
        config = config_flags.config()
        module, function = recipe.split(":")
        results = getattr(importlib.import_module(module), function)(config)
        for step, result in results.items():
            logging.info("%s: %s", step, result)
        logging.info("Results written to %s", config.output_dir)

    # The tool's main: `command.run` shows the tool's docstring and flags for --help.
    main.__module__ = tool
    return config_flags, main, lambda: command.run(main)
