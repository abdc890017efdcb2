"""Fresh processes that find TensorFlow already imported: forked from a server per test worker.

A child process that runs a tool spends ~5 s of its ~6-12 s importing TensorFlow, Keras,
keras-nlp and tensorflow-text. Here a server process per test worker imports them once, as
kbert's commands do (`kbert.cli.command`'s quiet start: TF_CPP_MIN_LOG_LEVEL=3, TensorFlow's
C++ start-up lines sent to /dev/null, the devices listed) in `fresh_process.environment()`, and
forks a child for each run. The child takes the caller's stdin, stdout, stderr, environment and
working directory and runs the program (`python script`, `-m module` or `-c code`) as
`__main__`, exiting as that Python process would. The caller sees a `subprocess.Popen` of a
small launcher (`python -S` with the standard library only) that stands in for the child: the
`Popen`'s signals go to the child (and those sent to the launcher are passed on), its exit
status is the child's (-N for signal N), and when the launcher is killed the child dies too.

What a warm child cannot show, a test runs in a real fresh process (`subprocess`): TensorFlow's
own start-up (its C++ lines, an environment variable read at import, `import kbert` importing
no TensorFlow), and options of Python's own (`-I`, `-X`). `popen` falls back to one by itself
when a variable TensorFlow, Keras or the hidden-module site read at start-up differs from the
server's.
"""

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

# Variables read when TensorFlow, Keras and tests/fresh_process_site start: a child whose
# environment sets them otherwise than the server's must start afresh.
_START_UP_VARIABLES = ("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE",
                       "TF_ENABLE_ONEDNN_OPTS", "TF_USE_LEGACY_KERAS", "KERAS_BACKEND",
                       "KERAS_HOME", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONWARNINGS",
                       "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "LD_PRELOAD",
                       "LD_LIBRARY_PATH", "MALLOC_CONF")
_DEFAULTS = {"TF_CPP_MIN_LOG_LEVEL": "0", "KERAS_BACKEND": "tensorflow"}
# Set to "0", every child starts afresh, none is forked (tests/emulated_cpu.py: under QEMU's
# user-mode emulator a child forked from the server, which has TensorFlow's threads, now and
# then deadlocks).
FORKS_VARIABLE = "KBERT_TEST_WARM_FORKS"
_HIDDEN = "KBERT_TEST_HIDDEN_MODULES"
_PASSED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                   signal.SIGUSR1, signal.SIGUSR2)
_server = None


def environment(env=None, allow=()):
    """`fresh_process.environment(env, allow)` with the variables kbert's quiet start sets
    (TF_CPP_MIN_LOG_LEVEL=3): the server's own, and a child's that is not a kbert command
    but is to be forked."""
    from kbert.cli import command
    from tests import fresh_process

    return fresh_process.environment({**command.QUIET_START_VARIABLES, **(env or {})}, allow)


def forks_on():
    """Whether children may be forked from the server (`FORKS_VARIABLE` is not "0")."""
    return os.environ.get(FORKS_VARIABLE) != "0"


def popen(args, env, **kwargs):
    """`subprocess.Popen(args, env=env, **kwargs)` for `args = [sys.executable, ...]`, run by a
    child forked from this worker's server when `env` allows it, else started afresh.

    Args:
        args: list. `[sys.executable, "-u"?, script | "-m" module | "-c" code, *arguments]`.
        env: dict. The child's whole environment (`fresh_process.environment(...)`).
        **kwargs: passed to `subprocess.Popen` (stdout, stderr, text, cwd, ...).
    """
    args = [str(a) for a in args]
    if not forks_on() or not _servable(args, env):
        return subprocess.Popen(args, env=env, **kwargs)
    return _ForkedPopen(_running_server(), args, env=env, **kwargs)


class _ForkedPopen(subprocess.Popen):
    """The launcher's `Popen`, whose signals go to the forked child itself: `kill()` then
    `wait()` returns once the child is dead, as for a child of one's own."""

    def __init__(self, socket_path, args, **kwargs):
        read, write = os.pipe()
        super().__init__([sys.executable, "-S", __file__, socket_path, str(write), *args[1:]],
                         pass_fds=(write,), **kwargs)
        os.close(write)
        with os.fdopen(read, "rb") as pids:
            line = pids.readline()
        if not line:
            raise RuntimeError(f"the launcher of {args} exited with {self.wait()}")
        self.child_pid = int(line)

    def send_signal(self, sig):
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # the child has just exited
                os.kill(self.child_pid, sig)  # the launcher exits with the child's status


def run(args, env, timeout=None, capture_output=False, check=False, **kwargs):
    """`subprocess.run` through `popen`: a `CompletedProcess` (no `input`)."""
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with popen(args, env, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    completed = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        completed.check_returncode()
    return completed


def _servable(args, env):
    program = args[2:] if args[1:2] == ["-u"] else args[1:]
    if args[0] != sys.executable or not program or (
            program[0].startswith("-") and program[0] not in ("-m", "-c")):
        return False
    env, server_env = _when_tensorflow_starts(program, env), environment()
    return all(env.get(name, _DEFAULTS.get(name)) == server_env.get(name, _DEFAULTS.get(name))
               for name in _START_UP_VARIABLES)


def _when_tensorflow_starts(program, env):
    """`env` as `program` has it when it imports TensorFlow: a kbert command that is not
    verbose sets its quiet start's variables first."""
    from kbert.cli import command
    from tests import fresh_process

    tool = os.path.dirname(os.path.abspath(program[0])) == os.path.join(fresh_process.ROOT, "tools")
    if tool and env.get("KBERT_VERBOSE", "0") in ("", "0") and not command.verbose(program):
        return {**command.QUIET_START_VARIABLES, **env}
    return env


def _running_server():
    """The socket path of this process's server, started on first use."""
    global _server
    if _server is None:
        directory = tempfile.mkdtemp(prefix="kbert-warm-")
        path = os.path.join(directory, "socket")
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve", path], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment())
        if process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the warm-process server exited with {process.wait()}")
        _server = path
        atexit.register(_stop, process, directory)
    return _server


def _stop(process, directory):
    process.stdin.close()  # the server exits at end of file on its stdin
    process.wait()
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    os.rmdir(directory)


# The server: imports as kbert's quiet start does, then forks a child per request.

def _serve(socket_path):
    """Runs the server; returns only in a forked child, with that child's request."""
    import absl.logging  # noqa: F401
    import keras  # noqa: F401
    import keras_nlp  # noqa: F401
    import numpy  # noqa: F401
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    tf.config.list_physical_devices()
    gc.freeze()  # as kbert's commands do: a child's collections and exit skip these objects
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    hidden = os.environ.get(_HIDDEN, "")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    children = {}  # pid -> the connection of its launcher
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [], 0.02)
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            os._exit(0)  # the test worker has gone
        if listener in readable:
            connection, _ = listener.accept()
            request, fds = _receive(connection)
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in children.values():
                    other.close()
                connection.close()
                return request, fds, hidden
            for fd in fds:
                os.close(fd)  # or the caller's pipes would not end when the child exits
            _reply(connection, pid)
            children[pid] = connection
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            connection = children.pop(pid)
            _reply(connection, status)
            connection.close()


def _reply(connection, number):
    with contextlib.suppress(OSError):  # its launcher has gone (killed): the child dies too
        connection.sendall(b"%d\n" % number)


def _receive(connection):
    """A request (JSON after its 8-byte length) and the file descriptors sent with it."""
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 4)
    size = int.from_bytes(data[:8], "big")
    data = data[8:]
    while len(data) < size:
        data += connection.recv(size - len(data))
    return json.loads(data), fds


def _become_the_child(request, fds, server_hidden):
    """Turns this forked process into the requested program's, which then runs."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    threading.Thread(target=_die_with_launcher, args=(fds[3],), daemon=True).start()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    wanted = set(filter(None, request["env"].get(_HIDDEN, "").split(",")))
    for name in set(filter(None, server_hidden.split(","))) - wanted:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
    for name in wanted:
        sys.modules.setdefault(name, None)
    args = request["argv"]
    if args[:1] == ["-u"]:
        args = args[1:]
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(write_through=True)
    return args


def _die_with_launcher(life_fd):
    """Kills this child when its launcher is gone (killed with SIGKILL, say)."""
    while os.read(life_fd, 1):
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def _run_program(args):
    """Runs `script args`, `-m module args` or `-c code args` as `python` would, and exits."""
    import runpy
    import types

    try:
        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            sys.path[0] = ""
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        elif args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            runpy.run_path(args[0], run_name="__main__")
    except Exception as error:  # noqa: BLE001  (printed as Python would, then status 1)
        frames = error.__traceback__
        while frames and frames.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
            frames = frames.tb_next  # this module's and runpy's frames are not the program's
        sys.excepthook(type(error), error.with_traceback(frames), frames)
        sys.exit(1)


# The launcher: stands in for the child in the caller's process tree.

def _launch(socket_path, pid_fd, args):
    life_r, life_w = os.pipe()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    request = json.dumps({"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(connection, [len(request).to_bytes(8, "big") + request], [0, 1, 2, life_r])
    os.close(life_r)
    replies = connection.makefile("rb")
    pid = int(replies.readline())
    with os.fdopen(pid_fd, "w") as pids:
        pids.write(f"{pid}\n")
    for number in _PASSED_SIGNALS:
        signal.signal(number, lambda received, _: os.kill(pid, received))
    code = os.waitstatus_to_exitcode(int(replies.readline()))
    if code < 0:  # killed by signal -code: so is the launcher
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        _run_program(_become_the_child(*_serve(sys.argv[2])))
    else:
        _launch(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
