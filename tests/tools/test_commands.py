"""Every command of setup.cfg: a kbert.cli module, a tools/ entry point, a --help without
TensorFlow. The tool modules are read, not imported: importing one defines its flags in this
process (tests/tools/runner.py imports them afresh for each run and removes them after)."""

import ast
import configparser
import os
import re
import subprocess
import sys

import pytest

from tests import fresh_process
from tests.limits import SUBPROCESS_TIMEOUT
from tests.tools.runner import ROOT
from tests.tools.runner import TOOLS


def _commands():
    """{command: kbert.cli module name} of setup.cfg's console_scripts."""
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"))
    lines = config["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict(re.fullmatch(r"(\S+) = kbert\.cli\.(\w+):run", line).groups() for line in lines)


COMMANDS = _commands()


def _tool(module):
    """The syntax tree of kbert/cli/<module>.py."""
    with open(os.path.join(ROOT, "kbert", "cli", f"{module}.py"), encoding="utf-8") as f:
        return ast.parse(f.read())


@pytest.mark.parametrize(("command", "module"), sorted(COMMANDS.items()))
def test_a_command_is_named_after_its_tool_and_runs_from_a_clone(command, module):
    assert command == "kbert-" + module.replace("_", "-")
    defined = {node.name for node in _tool(module).body if isinstance(node, ast.FunctionDef)}
    defined |= {name.id for node in _tool(module).body if isinstance(node, ast.Assign)
                for target in node.targets for name in ast.walk(target)
                if isinstance(name, ast.Name)}
    assert "run" in defined  # `def run()`, or `..., run = config_flags.recipe_command(...)`
    with open(os.path.join(TOOLS, f"{module}.py"), encoding="utf-8") as f:
        assert f"from kbert.cli import {module}\n" in f.read()


# Runs a tool as `python tools/<name>.py` does, then prints the heavy modules it imported (the
# quiet start hides TensorFlow's import from `python -X importtime`).
_HELP = """import os, runpy, sys
sys.argv = [{path!r}, "--help"]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    status = e.code
print("imported:", *sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
sys.exit(status)
"""


@pytest.mark.parametrize("module", sorted(COMMANDS.values()))
def test_help_starts_no_tensorflow(module):
    code = _HELP.format(path=os.path.join(TOOLS, f"{module}.py"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT, env=fresh_process.environment())
    assert result.returncode == 0, result.stderr[-3000:]
    doc = ast.get_docstring(_tool(module), clean=False)
    assert result.stdout.startswith(doc.splitlines()[0]) and "\n  --" in result.stdout
    assert result.stdout.splitlines()[-1] == "imported:"


def _constants(module, *names):
    """{name: value} of the literal assignments to `names` in kbert/cli/<module>.py."""
    return {node.targets[0].id: ast.literal_eval(node.value) for node in _tool(module).body
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in names}


def test_expand_vocab_offers_the_modes_of_vocab_expansion():
    from kbert import vocab_expansion

    # The first of each is the flag's default.
    assert _constants("tool_configs", "MODES", "INITS") == {
        "MODES": vocab_expansion.MODES, "INITS": vocab_expansion.INITS}
    assert (vocab_expansion.MODES[0], vocab_expansion.INITS[0]) == (
        vocab_expansion.REPLACE_UNUSED, vocab_expansion.INIT_MEAN)


def test_extract_features_offers_every_pooling():
    from kbert.tasks import feature_extraction

    assert _constants("tool_configs", "POOLINGS") == {
        "POOLINGS": tuple(sorted(feature_extraction.POOLINGS))}
