"""Each option is declared once: every tool's flags are its config's fields, and a name means
the same in every tool."""

import dataclasses
import xml.etree.ElementTree as ET

import pytest

from kbert import options
from kbert import ranges
from kbert.tasks import configs
from tests.tools.runner import run_tool

TOOLS = {"run_classifier.py": configs.GlueConfig, "run_ner.py": configs.NerConfig,
         "run_squad.py": configs.SquadConfig, "run_pretraining.py": configs.PretrainingConfig}
# A recipe may re-declare a field to change its default, as Google's scripts differ: SQuAD's
# windows are 384 pieces, pretraining's come from its records. Nothing else may differ.
DEFAULT_OVERRIDES = {("SquadConfig", "max_seq_length"), ("PretrainingConfig", "max_seq_length")}
ABSL_TYPES = {bool: "bool", int: "int", float: "float", str: "string", tuple: "comma separated "
              "list of strings", object: "string"}


def _key_flags(tool):
    """{name: (type, default, help)} of the flags `tool` defines itself, from absl's XML."""
    result = run_tool(tool, "--helpxml")  # absl prints the XML, then exits with 1
    assert "</AllFlags>" in result.stdout, result.stderr[-2000:]
    root = ET.fromstring(result.stdout[result.stdout.index("<?xml"):])
    return {flag.findtext("name"): (flag.findtext("type"), flag.findtext("default"),
                                    flag.findtext("meaning"))
            for flag in root.iter("flag")
            if flag.findtext("file") == "kbert.cli." + tool.removesuffix(".py")}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_tools_flags_are_its_config_fields(tool):
    flags = _key_flags(tool)
    fields = options.fields(TOOLS[tool])
    assert set(flags) == {f.name for f in fields}
    for field in fields:
        kind, default, help_text = flags[field.name]
        choices = field.metadata.get(options.CHOICES)
        if choices:
            assert kind == "string enum" and help_text.endswith(field.metadata[options.HELP])
            assert help_text.startswith("<" + "|".join(choices) + ">"), field.name
        else:
            assert kind == ABSL_TYPES[options.value_type(field)], field.name
            assert help_text == field.metadata[options.HELP], field.name
        expected = field.default
        expected = ("" if expected is None else ",".join(expected) if isinstance(expected, tuple)
                    else str(expected).lower() if isinstance(expected, bool) else str(expected))
        assert default == expected, field.name


def test_a_name_means_the_same_in_every_config():
    seen = {}
    for cls in set(TOOLS.values()):
        for field in options.fields(cls):
            declared = (options.value_type(field), field.metadata[options.HELP].split(
                " Pretraining:")[0], ranges.of(cls).get(field.name))
            if field.name in seen:
                other, first = seen[field.name]
                if (cls.__name__, field.name) in DEFAULT_OVERRIDES or (
                        other.__name__, field.name) in DEFAULT_OVERRIDES:
                    assert declared[:2] == first[:2], field.name
                else:
                    assert declared == first, (field.name, cls.__name__, other.__name__)
                    assert field.default == dataclasses.fields(other)[[
                        f.name for f in dataclasses.fields(other)].index(field.name)].default
            else:
                seen[field.name] = (cls, declared)


def test_every_option_is_documented_in_its_config():
    for cls in set(TOOLS.values()):
        for field in options.fields(cls):
            assert f"    {field.name}: " in cls.__doc__, (cls.__name__, field.name)


def test_the_choices_are_the_librarys():
    from kbert.data import conll
    from kbert.data import corpus
    from kbert.data import pretraining
    from kbert.models.pretrainer import BertPretrainer
    from kbert.tasks import distribution

    assert set(configs.TAG_SCHEMES) == set(conll.TAG_SCHEMES)
    assert set(configs.NER_FORMATS) == set(conll.FORMATS)
    assert configs.INPUT_FORMATS[1:] == tuple(corpus.INPUT_FORMATS)
    assert tuple(pretraining.PAIR_TASKS) == configs.PAIR_TASKS
    assert tuple(BertPretrainer.HEADS) == configs.INIT_HEADS
    assert distribution.STRATEGIES is configs.STRATEGIES
    pretraining_ranges = ranges.of(pretraining.PretrainingDataConfig)
    for name, valid in ranges.of(configs.PretrainingConfig).items():
        if name in pretraining_ranges:
            assert valid == pretraining_ranges[name], name
