"""Runs a tool of tools/ as a user does, in this process or in a fresh one.

`run_tool` executes `tools/<name>` (which runs its `kbert.cli` module) as `__main__` in the
test's own process, with its absl flags parsed from the argument list, and returns what a
subprocess would: the exit status and the text written to stdout and stderr. TensorFlow and
Keras are imported once per test worker instead of once per run, so most tool tests take a
second or two instead of ten. Its `tf.function`s run eagerly unless the test asks for the
traced step (`eager=False`); tests/eager.py says why.

`run_tool_in_subprocess` is the real entry point (`python tools/<name> ...`) in a process of its
own: one smoke test per tool uses it, and so do the tests that need a process (a kill, devices
configured before TensorFlow starts). That process is forked from a server that has imported
TensorFlow (tests/warm_process.py); `fresh=True` starts it afresh instead, for what only
TensorFlow's own start shows (its C++ start-up lines on file descriptor 2).
"""

import contextlib
import dataclasses
import gc
import io
import logging as std_logging
import os
import re
import runpy
import subprocess
import sys
import warnings
from unittest import mock

import keras
from absl import app
from absl import flags
from absl import logging

from tests import fresh_process
from tests import warm_process
from tests.eager import functions_run_eagerly
from tests.limits import SUBPROCESS_TIMEOUT

ROOT = fresh_process.ROOT
TOOLS = os.path.join(ROOT, "tools")
# The modules that define flags or read sys.argv when imported, imported afresh each run: the
# package kbert.cli and its modules (the package too, or `from kbert.cli import run_ner` would
# find the last run's module as its attribute).
_TOOL_MODULES = re.compile(r"^kbert\.cli(\.|$)")
# absl's --help, --helpfull and --helpxml: defined once per process (absl guards it), so they
# must be there before a run records which flags it defines and removes after.
app.define_help_flags()


@dataclasses.dataclass
class ToolResult:
    """What a finished tool run left: as `subprocess.CompletedProcess`, text mode."""

    returncode: int
    stdout: str
    stderr: str
    heap_freezes: int = 0  # the tool's gc.freeze() calls: counted, not done (see run_tool)


def run_tool(name, *args, env=None, eager=True):
    """Runs `tools/<name> *args` in this process.

    Args:
        name: str. The tool's file name, e.g. "run_classifier.py".
        *args: the command-line arguments (converted with str).
        env: dict or None. Environment variables set for the run only.
        eager: bool. Run `tf.function`s eagerly; False traces them, as a user's run does
            (for what only the traced step shows, such as XLA).

    Returns:
        `ToolResult`.
    """
    path = os.path.join(TOOLS, name)
    argv = [path, *map(str, args)]
    stdout, stderr = io.StringIO(), io.StringIO()
    returncode = 0
    # A command freezes its process's heap once TensorFlow has started (kbert/cli/command.py);
    # here that would keep this worker's garbage of the moment out of every later collection.
    with _process_state_of_a_fresh_run(stderr), functions_run_eagerly(eager), \
            mock.patch.dict(os.environ, env or {}), mock.patch.object(sys, "argv", argv), \
            mock.patch.object(sys, "path", [TOOLS, *sys.path]), \
            mock.patch.object(gc, "freeze") as freeze, \
            contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            returncode = e.code if isinstance(e.code, int) else int(e.code is not None)
    return ToolResult(returncode, stdout.getvalue(), stderr.getvalue(), freeze.call_count)


@contextlib.contextmanager
def _process_state_of_a_fresh_run(stderr):
    """This process's logging, flags and Keras state as a fresh process of a tool has them,
    absl's lines going to `stderr`; put back as they were after the run."""
    python_handler = logging.get_absl_handler().python_handler
    saved_stream = python_handler.stream
    flags_before, parsed_before = set(flags.FLAGS), flags.FLAGS.is_parsed()
    # absl.app.run turns INFO logging on when it first parses flags in a process (verbosity
    # left at its default); later runs in this process get the same from the default. The
    # flag is first put back to its default: saving a SavedModel in this process sets it
    # (TensorFlow's `AutoTrackable` sets absl's verbosity and restores it by assignment),
    # after which a new default would not apply and the run would show no INFO line.
    flags.FLAGS["verbosity"].unparse()
    verbosity_default = flags.FLAGS["verbosity"].default
    flags.FLAGS.set_default("verbosity", logging.INFO)
    # A fresh process starts with no Keras state: names, seeds and the dtype policy as new.
    # (free_memory=False: its gc.collect() costs ~0.3 s a run; Python collects as it goes.)
    keras.backend.clear_session(free_memory=False)
    # A tool's quiet start sets TensorFlow's Python logger and the warning filters for its
    # process; put back after, as the next test's process would have them.
    tensorflow_level = std_logging.getLogger("tensorflow").level
    try:
        with warnings.catch_warnings():
            python_handler.stream = stderr
            yield
    finally:
        python_handler.stream = saved_stream
        std_logging.getLogger("tensorflow").setLevel(tensorflow_level)
        flags.FLAGS.set_default("verbosity", verbosity_default)
        _forget_flags_defined_since(flags_before, parsed_before)
        keras.mixed_precision.set_global_policy("float32")


def _forget_flags_defined_since(flags_before, parsed_before):
    """Removes the flags a tool defined, so the next tool may define its own of those names,
    and leaves the flags parsed as the run found them (Google's tokenizer, an oracle, reads
    an absl flag, and a fixture may have marked them parsed before this run)."""
    for name in set(flags.FLAGS) - flags_before:
        delattr(flags.FLAGS, name)
    flags.FLAGS.unparse_flags()
    if parsed_before:
        flags.FLAGS.mark_as_parsed()
    for module in [name for name in sys.modules if _TOOL_MODULES.match(name)]:
        del sys.modules[module]


def run_tool_in_subprocess(name, *args, env=None, allow=(), fresh=False):
    """Runs `python tools/<name> *args` in a new process, with this checkout's kbert first
    and only what a user's install has (tests/fresh_process.py) besides the distributions in
    `allow`: a child forked with TensorFlow imported (tests/warm_process.py), or with
    `fresh=True` (for what only TensorFlow's own start shows) a fresh one.

    Returns:
        `subprocess.CompletedProcess` (text mode).
    """
    command = [sys.executable, os.path.join(TOOLS, name), *map(str, args)]
    kwargs = dict(capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
                  env=fresh_process.environment(env, allow))
    if fresh:
        return subprocess.run(command, **kwargs)
    return warm_process.run(command, **kwargs)
