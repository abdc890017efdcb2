"""Runs pytest with every Python process of the run on an emulated AVX2-only CPU.

Where no AVX2-only machine is at hand, QEMU's user-mode emulator (Debian: `apt-get install
qemu-user`) runs this environment's Python with the CPUID of a Zen 3 EPYC (AVX2 and FMA, no
AVX-512): TensorFlow, oneDNN (`isa:Intel AVX2`, bfloat16 left to Eigen) and XLA then take the
code paths of such a CPU. xdist's workers and every child a test starts with `sys.executable`
run emulated too: the run uses a copy of this environment whose `bin/python` starts QEMU.
About ten times slower per process, and no measure of speed: it checks correctness only and
stands in for the real machine only until one is at hand (CONTRIBUTING.md). QEMU 10 or newer:
7.2 (Debian 12's own; 10.0 is in bookworm-backports) emulates some AVX2 instructions wrongly,
and numpy's `argpartition` returned wrong indices under it.

    python -m tests.emulated_cpu -n 2 tests      # or: make test-emulated-avx2

Written by hand: no library runs a Python environment under QEMU.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from tests import warm_process

CPU_MODEL = "EPYC-Milan"  # Zen 3: AVX2, FMA, no AVX-512
MIN_QEMU = 10


def qemu_major_version(version_output):
    """The major version in `qemu-x86_64 --version`'s first line, e.g. 10; None if absent."""
    match = re.search(r"version (\d+)\.", version_output)
    return int(match.group(1)) if match else None


def cpu_option(qemu_warnings, model=CPU_MODEL):
    """QEMU's `-cpu` value: `model` less each feature QEMU warned it cannot emulate.

    QEMU prints one warning per such feature (`... requested feature: CPUID.07H:EBX.rdseed
    [bit 18]`) at every process start; a test that checks a quiet stderr would see them.
    """
    missing = re.findall(r"requested feature: \S+\.([\w-]+) \[bit \d+\]", qemu_warnings)
    return ",".join([model, *(f"-{name}" for name in dict.fromkeys(missing))])


def emulated_environment(directory, qemu, cpu, prefix=sys.prefix,
                         interpreter=sys._base_executable):
    """A copy of the virtual environment at `prefix` in `directory` (its `pyvenv.cfg`, the
    rest linked: `lib`, `share` with nbconvert's templates, each `bin` entry) whose
    `bin/python` runs `interpreter` under `qemu -cpu cpu`; returns that `python`'s path."""
    shutil.copy(os.path.join(prefix, "pyvenv.cfg"), directory)
    for name in os.listdir(prefix):
        if name not in ("bin", "pyvenv.cfg"):
            os.symlink(os.path.join(prefix, name), os.path.join(directory, name))
    bin_dir = os.path.join(directory, "bin")
    os.mkdir(bin_dir)
    for name in os.listdir(os.path.join(prefix, "bin")):
        if not name.startswith("python"):
            os.symlink(os.path.join(prefix, "bin", name), os.path.join(bin_dir, name))
    python = os.path.join(bin_dir, "python")
    # -0 sets the emulated program's argv[0]: Python finds pyvenv.cfg beside it, and takes it
    # as sys.executable, so the processes it starts come back through this script.
    with open(python, "w", encoding="utf-8") as f:
        f.write(f'#!/bin/sh\nexec "{qemu}" -cpu "{cpu}" -0 "{python}" "{interpreter}" "$@"\n')
    os.chmod(python, 0o755)
    for alias in ("python3", f"python{sys.version_info.major}.{sys.version_info.minor}"):
        os.symlink("python", os.path.join(bin_dir, alias))
    return python


def emulated_python(directory, qemu):
    """`emulated_environment` in `directory` with `CPU_MODEL` less what this `qemu` cannot
    emulate (it says so when started); returns its `python`'s path."""
    probe = subprocess.run([qemu, "-cpu", CPU_MODEL, "/bin/true"], capture_output=True,
                           text=True, check=True)
    return emulated_environment(directory, qemu, cpu_option(probe.stderr))


def main(pytest_args):
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        sys.exit("qemu-x86_64 not found: install QEMU's user-mode emulator, version "
                 f"{MIN_QEMU} or newer (Debian 12: apt-get install -t bookworm-backports "
                 "qemu-user)")
    version = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout
    if (qemu_major_version(version) or 0) < MIN_QEMU:
        sys.exit(f"{qemu} is {version.splitlines()[0] if version else 'of unknown version'}; "
                 f"QEMU {MIN_QEMU} or newer is needed (7.2 emulates some AVX2 instructions "
                 "wrongly)")
    if sys.prefix == sys.base_prefix:
        sys.exit("run this from the project's virtual environment (.venv/bin/python)")
    with tempfile.TemporaryDirectory(prefix="kbert-emulated-") as directory:
        python = emulated_python(directory, qemu)
        # QEMU's user mode now and then deadlocks a child forked from a process with threads
        # (both of its threads in futex waits): the tests' children start afresh instead of
        # forked from the warm server, slower but never stuck.
        env = {**os.environ, warm_process.FORKS_VARIABLE: "0"}
        return subprocess.run([python, "-m", "pytest", *pytest_args], env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
