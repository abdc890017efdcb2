"""tests/warm_process.py: a forked child behaves as the fresh process it stands in for."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import warm_process
from tests.limits import SUBPROCESS_TIMEOUT

_REPORT = """import os, sys
import tensorflow as tf
print(sys.argv[1:], os.getcwd(), os.environ["KBERT_TEST_VALUE"], sys.stdin.read().strip())
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[2]))
"""


# The tests of the forked child itself, skipped where the forks are turned off.
needs_forks = pytest.mark.skipif(
    not warm_process.forks_on(),
    reason=f"{warm_process.FORKS_VARIABLE}=0 (tests/emulated_cpu.py): every child starts afresh")


@needs_forks
def test_a_forked_child_has_the_callers_arguments_files_environment_and_status(tmp_path):
    env = warm_process.environment({"KBERT_TEST_VALUE": "seen"})
    process = warm_process.popen([sys.executable, "-c", _REPORT, "one", "3"], env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert isinstance(process, warm_process._ForkedPopen)
    stdout, stderr = process.communicate("typed in", timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 3, stderr
    assert stdout == f"['one', '3'] {tmp_path} seen typed in\n"
    assert stderr == "to stderr\n"


def test_an_uncaught_error_prints_as_python_does_with_status_1():
    result = warm_process.run([sys.executable, "-c", "raise ValueError('bad')"],
                              warm_process.environment(), capture_output=True, text=True,
                              timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 1
    assert result.stderr == ('Traceback (most recent call last):\n  File "<string>", line 1, '
                             "in <module>\nValueError: bad\n")


def test_a_module_outside_the_allowed_distributions_stays_hidden():
    code = "import importlib.util as u; print(u.find_spec('sklearn'), u.find_spec('bert'))"
    hidden = warm_process.run([sys.executable, "-c", code], warm_process.environment(),
                              capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    allowed = warm_process.run([sys.executable, "-c", code],
                               warm_process.environment(allow=("bert-tensorflow",)),
                               capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert hidden.stdout.split() == ["None", "None"], hidden.stderr
    assert allowed.stdout.split()[0] == "None" and allowed.stdout.split()[1] != "None"


@needs_forks
def test_kill_then_wait_returns_once_the_child_is_dead():
    process = warm_process.popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"],
        warm_process.environment(), stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "up\n"
    process.kill()
    assert process.wait(timeout=SUBPROCESS_TIMEOUT) == -signal.SIGKILL
    assert not os.path.exists(f"/proc/{process.child_pid}")  # gone, not a zombie
    process.stdout.close()


def test_terminate_reaches_the_childs_own_handler():
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
            "print('up', flush=True)\ntime.sleep(600)\n")
    process = warm_process.popen([sys.executable, "-c", code], warm_process.environment(),
                                 stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "up\n"
    process.terminate()
    assert process.wait(timeout=SUBPROCESS_TIMEOUT) == 7
    process.stdout.close()


@needs_forks
def test_a_killed_launcher_takes_its_child_with_it():
    process = warm_process.popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"],
        warm_process.environment(), stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "up\n"
    os.kill(process.pid, signal.SIGKILL)  # the launcher itself, as a crashed test worker
    process.wait(timeout=SUBPROCESS_TIMEOUT)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{process.child_pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{process.child_pid}")
    process.stdout.close()


def test_what_tensorflow_reads_at_import_set_otherwise_starts_a_fresh_process():
    # TensorFlow's C++ log level is read when it is imported: the server's is 3.
    env = warm_process.environment({"TF_CPP_MIN_LOG_LEVEL": "1"})
    process = warm_process.popen([sys.executable, "-c", "print('fresh')"], env,
                                 stdout=subprocess.PIPE, text=True)
    assert type(process) is subprocess.Popen
    assert process.communicate(timeout=SUBPROCESS_TIMEOUT)[0] == "fresh\n"


def test_forks_turned_off_start_every_child_afresh(monkeypatch):
    # As tests/emulated_cpu.py runs the suite: QEMU now and then deadlocks a forked child.
    monkeypatch.setenv(warm_process.FORKS_VARIABLE, "0")
    process = warm_process.popen([sys.executable, "-c", "print('fresh')"],
                                 warm_process.environment(), stdout=subprocess.PIPE, text=True)
    assert type(process) is subprocess.Popen
    assert process.communicate(timeout=SUBPROCESS_TIMEOUT)[0] == "fresh\n"
