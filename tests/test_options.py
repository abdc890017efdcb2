"""Each option is declared once: every tool's flags are its config's fields, and a name means
the same in every tool."""

import collections
import xml.etree.ElementTree as ET

import pytest

from kbert import options
from kbert import ranges
from kbert.cli import tool_configs
from kbert.tasks import configs
from tests.tools.runner import run_tool

TOOLS = {"run_classifier.py": configs.GlueConfig, "run_ner.py": configs.NerConfig,
         "run_squad.py": configs.SquadConfig, "run_pretraining.py": configs.PretrainingConfig,
         "create_pretraining_data.py": tool_configs.CreatePretrainingDataConfig,
         "extract_features.py": tool_configs.FeatureExtractionConfig,
         "expand_vocab.py": tool_configs.VocabExpansionConfig,
         "export_saved_model.py": tool_configs.ExportConfig,
         "convert_checkpoint.py": tool_configs.ConversionConfig,
         "demo.py": tool_configs.DemoConfig}
# A config may take another's option with another default, range or choices
# (`options.same_as`), as Google's scripts differ; its type and help stay the same. Nothing
# else may differ.
OVERRIDES = {
    ("SquadConfig", "max_seq_length"),  # run_squad.py's windows are 384 pieces
    ("PretrainingConfig", "max_seq_length"),  # from the records; [CLS] a [SEP] b [SEP]
    ("CreatePretrainingDataConfig", "max_seq_length"),  # [CLS] a [SEP] b [SEP]
    ("PretrainingConfig", "max_predictions_per_seq"),  # from the records
    ("CreatePretrainingDataConfig", "input_format"),  # raw text only
    ("DemoConfig", "output_dir"),  # `make demo` writes demo_output/
}
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
    cls = TOOLS[tool]
    flags = _key_flags(tool)
    fields = options.fields(cls)
    aliases = getattr(cls, "ALIASES", {})
    assert set(flags) == {f.name for f in fields} | set(aliases)
    assert set(cls.REQUIRED) <= {f.name for f in fields}
    for alias, name in aliases.items():
        assert flags[alias][2] == f"Alias for --{name}.", alias
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
        expected = ("" if expected is None else ",".join(map(str, expected))
                    if isinstance(expected, tuple) else str(expected).lower()
                    if isinstance(expected, bool) else str(expected))
        assert default == expected, field.name


def _declarations():
    """{option name: {config class name: (type, help, default, range, choices)}} of every
    option of every tool's config."""
    found = collections.defaultdict(dict)
    for cls in TOOLS.values():
        valid = ranges.of(cls)
        for field in options.fields(cls):
            found[field.name][cls.__name__] = (
                options.value_type(field), field.metadata[options.HELP], field.default,
                valid.get(field.name), field.metadata.get(options.CHOICES))
    return found


def test_a_name_means_the_same_in_every_config():
    declarations = _declarations()
    assert all(config in declarations[name] for config, name in OVERRIDES)
    for name, by_config in declarations.items():
        assert len({declared[:2] for declared in by_config.values()}) == 1, (name, by_config)
        plain = {declared for config, declared in by_config.items()
                 if (config, name) not in OVERRIDES}
        assert len(plain) == 1, (name, by_config)
        for config, declared in by_config.items():
            if (config, name) in OVERRIDES:  # listed only where it does differ
                assert declared not in plain, (config, name)


def test_every_option_is_documented_in_its_config():
    for cls in set(TOOLS.values()):
        for field in options.fields(cls):
            assert f"    {field.name}: " in cls.__doc__, (cls.__name__, field.name)


def test_the_choices_are_the_librarys():
    from kbert import bridges
    from kbert.data import conll
    from kbert.data import corpus
    from kbert.data import word_segmentation
    from kbert.data.pretraining import instances
    from kbert.models.pretrainer import BertPretrainer
    from kbert.tasks import precision
    from kbert.tasks import strategies

    assert set(configs.TAG_SCHEMES) == set(conll.TAG_SCHEMES)
    assert set(configs.NER_FORMATS) == set(conll.FORMATS)
    assert configs.INPUT_FORMATS[1:] == tuple(corpus.INPUT_FORMATS)
    assert tuple(instances.PAIR_TASKS) == configs.PAIR_TASKS
    assert tuple(BertPretrainer.HEADS) == configs.INIT_HEADS
    assert strategies.STRATEGIES is configs.STRATEGIES
    assert precision.PRECISIONS is configs.PRECISIONS
    assert tuple(bridges.FORMATS) == tool_configs.FORMATS
    assert tuple(word_segmentation.SEGMENTERS) == tool_configs.SEGMENTERS
    pretraining_ranges = ranges.of(instances.PretrainingDataConfig)
    for cls in (configs.PretrainingConfig, tool_configs.CreatePretrainingDataConfig):
        for name, valid in ranges.of(cls).items():
            if name in pretraining_ranges:
                assert valid == pretraining_ranges[name], (cls.__name__, name)
