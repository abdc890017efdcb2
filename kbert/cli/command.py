"""What every command shares: a quiet start, one-line errors and a --help that exits 0.

A tool ends with `command.run(main)` instead of `absl.app.run(main)`. Its module imports no
TensorFlow (recipes are imported inside `main`), so --help and flag errors answer at once; `run`
then starts TensorFlow quietly before `main`, hiding its C++/absl start-up lines (the oneDNN
and CPU-feature notices, "All log messages before absl::InitializeLog()", cuInit on a machine
without a GPU) and its Python warnings such as tf.function retracing. `--verbosity=1` (or
KBERT_VERBOSE=1) shows all of it, and full tracebacks. Errors end the run with one line on
stderr,

    error: <file>:<line>: <what> — <how to fix>

(as much of it as the error knows), exit status 2 for bad input (usage and flag errors,
ValueError, missing or unwritable files, a full disk) and 1 for anything else, an internal
error.
"""

import contextlib
import errno
import gc
import logging as std_logging
import os
import re
import shutil
import sys
import traceback
import warnings

from absl import app
from absl import flags

from kbert import ranges

_HELP_ARGS = ("--help", "-help", "-h", "-?", "--helpshort", "--helpfull")
_VERBOSITY = re.compile(r"^--?(?:verbosity|v)=?(-?\d+)$")
# tf.errors raised for files, not programs: missing, unreadable or corrupt inputs.
_TF_INPUT_ERRORS = ("NotFoundError", "PermissionDeniedError", "DataLossError",
                    "AlreadyExistsError", "FailedPreconditionError")


# What the quiet start sets, unless set already, before it imports TensorFlow. C++ lines logged
# after absl::InitializeLog obey TF_CPP_MIN_LOG_LEVEL; ERROR level hides the spurious "oneDNN
# supports DT_INT64 only on platforms with AVX-512" and GeneratorDatasetOp lines.
QUIET_START_VARIABLES = {"TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}


def verbose(argv=None):
    """Whether --verbosity=N (N >= 1) is in `argv` or KBERT_VERBOSE=1 is set."""
    argv = sys.argv if argv is None else argv
    if os.environ.get("KBERT_VERBOSE", "0") not in ("", "0"):
        return True
    for i, arg in enumerate(argv[1:], 1):
        match = _VERBOSITY.match(arg)
        if match is None and arg in ("--verbosity", "-v") and i + 1 < len(argv):
            match = re.match(r"^(-?\d+)$", argv[i + 1])
        if match and int(match.group(1)) >= 1:
            return True
    return False


def _quiet_start():
    """Sets TensorFlow's log level and imports it with stderr (fd 2) pointed at /dev/null."""
    for name, value in QUIET_START_VARIABLES.items():
        os.environ.setdefault(name, value)
    # Lines logged before absl::InitializeLog (during import and the first device query,
    # where a CPU-only machine logs a cuInit failure) ignore it, so they go to /dev/null.
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    # tf.function retracing and deprecation notices: for developers, not for users of a tool.
    std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", module=r"keras(\..*)?")


def _start_tensorflow(quiet):
    """Imports TensorFlow (quietly: `_quiet_start`) and freezes the objects the imports made.

    Hand-written, as no library does it for a program: TensorFlow, Keras and keras-nlp leave
    ~500,000 objects that live as long as the process. Frozen (`gc.freeze`, Python's way to
    keep a start-up heap out of its collections), Python's full collections skip them, and
    the interpreter's exit, which collects everything once more, takes ~0.1 s instead of
    ~1.3 s (BENCHMARKS.md, "A command's exit").
    """
    if quiet:
        _quiet_start()
    else:
        import tensorflow  # noqa: F401
    gc.freeze()


VERBOSE = verbose()


def validate_ranges(config_class):
    """Checks each defined flag named after a field of `config_class` against the field's
    range (`kbert.ranges`) when the flags are parsed: a value outside it is a usage error,
    "flag --train_batch_size=0: train_batch_size must be >= 1", before anything is loaded.
    """
    for name, valid in ranges.of(config_class).items():
        if name in flags.FLAGS:
            flags.register_validator(
                name, lambda value, valid=valid: value is None or value in valid,
                message=f"{name} must be {valid}")


def _flag_help(name):
    """`--name: help (default: x)` for a flag of this program."""
    flag = flags.FLAGS[name]
    default = "" if flag.default is None else f" (default: {flag.default_as_str})"
    return f"  --{flag.name}: {flag.help}{default}"


def _named_flags(message):
    """The flags of this program that `message` names, as --flag or as a bare word."""
    own = {f.name for f in flags.FLAGS.get_key_flags_for_module(sys.argv[0])}
    named = []
    for dashed, bare in re.findall(r"--?([A-Za-z_]\w*)|\b([a-z][a-z0-9]*_[a-z0-9_]+)\b",
                                   message):
        name = dashed or bare
        if name not in own and name.startswith("no"):
            name = name[2:]
        if name in own and name not in named:
            named.append(name)
    return named


def _usage_error(message):
    lines = [f"error: {message}"]
    lines += [_flag_help(name) for name in _named_flags(message)[:3]]
    lines.append(f"Run `{os.path.basename(sys.argv[0])} --help` to see every flag.")
    return "\n".join(lines)


def _file_error(error):
    """One line for an OSError: the path, what is wrong with it and what to do."""
    path = error.filename
    if path is None:  # raised with a message of its own, e.g. "vocab.txt: not found"
        return str(error)
    path = os.fspath(path)
    if error.errno in (errno.EEXIST, errno.ENOTDIR):
        parent = path
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent == path and not os.path.isdir(path):
            return f"{path}: is a file, not a directory — give a directory's path"
        if parent and not os.path.isdir(parent):
            return (f"{parent}: is a file, so {path} cannot be a directory under it — "
                    "give a path whose parents are directories")
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"{path}: cannot write here ({error.strerror}) — choose a writable directory "
                "or change its permissions")
    if error.errno == errno.ENOENT:
        return f"{path}: not found — check the path"
    return f"{path}: {error.strerror}"


def _tf_error_line(error):
    """The line of a TensorFlow error that says what went wrong, without its graph trace."""
    lines = [line.strip() for line in error.message.splitlines()]
    useful = [line for line in lines if line and not line.startswith(
        ("Graph execution error", "Detected at node", "File ", "[[", "Traceback"))]
    return useful[-1] if useful else error.message


def _input_error_in_tf_data(error):
    """The message of a `ValueError` that kbert's input code raised inside a tf.data function
    (a generator or `numpy_function`: a bad line in the text read mid-run), which TensorFlow
    re-raises as an `InvalidArgumentError` with the Python traceback in its message; or None."""
    found = re.findall(r"^ValueError: (.+)$", getattr(error, "message", ""), re.MULTILINE)
    return found[-1].strip() if found else None


def _disk_full_error(error):
    """One line for a full disk: the file, the space it needed (where known), what is free."""
    path = getattr(error, "filename", None)
    if path is None:
        where = _tf_error_line(error) if hasattr(error, "message") else str(error)
        return f"no space left on device ({where}) — free some space and run the same command again"
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    needed = getattr(error, "needed", None)
    sizes = [f"it needs about {_size(needed)}"] if needed else []
    with contextlib.suppress(OSError):
        sizes.append(f"{_size(shutil.disk_usage(parent).free)} free there")
    return (f"{path}: no space left on device ({', '.join(sizes) or 'disk full'}) — free some "
            "space and run the same command again: a training run resumes from its last "
            "complete backup")


def _size(num_bytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} bytes"


def describe(error):
    """(exit status, message) for an exception that ended a tool."""
    from kbert import io  # here: --help needs no numpy

    if io.is_disk_full(error):
        return 2, f"error: {_disk_full_error(error)}"
    if isinstance(error, app.UsageError):
        return 2, _usage_error(str(error))
    if isinstance(error, flags.Error):
        return 2, _usage_error(str(error))
    if isinstance(error, OSError):
        return 2, f"error: {_file_error(error)}"
    if isinstance(error, ValueError):
        return 2, f"error: {error}"
    if type(error).__module__.startswith("tensorflow"):
        line = _tf_error_line(error) if hasattr(error, "message") else str(error)
        if type(error).__name__ in _TF_INPUT_ERRORS:
            return 2, f"error: {line}"
        if message := _input_error_in_tf_data(error):
            return 2, f"error: {message}"
        return 1, (f"error: internal error ({type(error).__name__}): {line} — rerun with "
                   "--verbosity=1 for the traceback")
    return 1, (f"error: internal error ({type(error).__name__}): {error} — rerun with "
               "--verbosity=1 for the traceback and report it")


def _adopt_key_flags(tool):
    """Makes the flags `tool` (a module name) defined the program's own: absl keys them by
    sys.argv[0], and --help and the usage errors list those. A tool run as a command or from
    tools/ is imported, not `__main__`."""
    if tool != "__main__":
        for flag in flags.FLAGS.get_key_flags_for_module(tool):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def _print_help(tool, argv):
    """absl's --help (`app.usage`), but with the tool's docstring, where absl prints that of
    `__main__`: the command's generated script or the tools/ entry point."""
    flag_help = (flags.FLAGS.get_help() if "--helpfull" in argv
                 else flags.FLAGS.main_module_help())
    print(f"{tool.__doc__}\nflags:\n{flag_help}\n")


def run(main):
    """`absl.app.run(main)` with a --help that exits 0, one-line errors, exit statuses 2 (bad
    input) and 1, and TensorFlow started quietly after the flags are parsed."""
    tool = sys.modules[main.__module__]
    _adopt_key_flags(tool.__name__)

    def parse_flags(argv):
        """absl's flag parsing, but --help exits 0 and a bad flag prints only that flag's help."""
        if any(arg in _HELP_ARGS for arg in argv[1:]):
            _print_help(tool, argv)
            sys.exit(0)
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            if VERBOSE:
                traceback.print_exc()
            print(_usage_error(str(e)), file=sys.stderr)
            sys.exit(2)

    def checked_main(argv):
        try:
            _start_tensorflow(quiet=not VERBOSE)
            return main(argv)
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001  (every error becomes one line and a status)
            if VERBOSE:
                traceback.print_exc()
            status, message = describe(e)
            sys.stdout.flush()
            print(message, file=sys.stderr)
            sys.exit(status)

    app.run(checked_main, flags_parser=parse_flags)
