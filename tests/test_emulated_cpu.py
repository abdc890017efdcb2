"""tests/emulated_cpu.py: the QEMU CPU option and the emulated copy of the environment."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests import emulated_cpu
from tests import warm_process
from tests.limits import SUBPROCESS_TIMEOUT

# What QEMU 7.2 printed for `-cpu EPYC-Milan` on this project's Intel VM (2026-11-30), cut.
QEMU_WARNINGS = """\
qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.01H:ECX.pcid [bit 17]
qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.07H:EBX.sha-ni [bit 29]
qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.80000008H:EBX.amd-ssbd [bit 24]
qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.0DH:EAX.xsavec [bit 1]
qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.0DH:EAX.xsavec [bit 1]
"""


def test_cpu_option_drops_each_feature_qemu_cannot_emulate_once():
    assert emulated_cpu.cpu_option(QEMU_WARNINGS) == \
        "EPYC-Milan,-pcid,-sha-ni,-amd-ssbd,-xsavec"
    assert emulated_cpu.cpu_option("") == "EPYC-Milan"


def test_qemu_major_version():
    assert emulated_cpu.qemu_major_version(
        "qemu-x86_64 version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright") == 10
    assert emulated_cpu.qemu_major_version("qemu-x86_64 version 7.2.22 (Debian)") == 7
    assert emulated_cpu.qemu_major_version("") is None


def test_the_copy_links_the_environment_and_wraps_only_python(tmp_path):
    python = emulated_cpu.emulated_environment(str(tmp_path), "/usr/bin/qemu-x86_64",
                                               "EPYC-Milan,-pcid")
    assert python == str(tmp_path / "bin" / "python")
    for name in ("lib", "share"):  # share: nbconvert's templates, for the docs site's build
        assert os.path.realpath(tmp_path / name) == os.path.realpath(os.path.join(sys.prefix, name))
    assert (tmp_path / "pyvenv.cfg").read_bytes() == \
        pathlib.Path(sys.prefix, "pyvenv.cfg").read_bytes()
    script = (tmp_path / "bin" / "python").read_text()
    assert f'-cpu "EPYC-Milan,-pcid" -0 "{python}" "{sys._base_executable}" "$@"' in script
    assert os.access(python, os.X_OK)
    assert os.path.realpath(tmp_path / "bin" / "python3") == python
    # The environment's commands are there (tests find lint-imports beside sys.executable).
    lint = os.path.realpath(shutil.which("lint-imports", path=str(tmp_path / "bin")))
    assert lint == os.path.realpath(os.path.join(sys.prefix, "bin", "lint-imports"))


def test_main_runs_pytest_emulated_with_every_child_started_afresh(monkeypatch):
    runs = []
    monkeypatch.setattr(emulated_cpu.shutil, "which", lambda name: "/opt/qemu-x86_64")
    monkeypatch.setattr(emulated_cpu, "emulated_python",
                        lambda directory, qemu: os.path.join(directory, "bin", "python"))

    def run(args, **kwargs):
        runs.append((args, kwargs.get("env")))
        return subprocess.CompletedProcess(args, 0, "qemu-x86_64 version 10.0.2\n", "")

    monkeypatch.setattr(emulated_cpu.subprocess, "run", run)
    assert emulated_cpu.main(["-n", "2", "tests"]) == 0
    (version, _), (pytest_args, env) = runs
    assert version == ["/opt/qemu-x86_64", "--version"]
    assert pytest_args[1:] == ["-m", "pytest", "-n", "2", "tests"]
    assert pytest_args[0].endswith(os.path.join("bin", "python"))
    assert env[warm_process.FORKS_VARIABLE] == "0" and env["PATH"] == os.environ["PATH"]


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None,
                    reason="needs QEMU's user-mode emulator (qemu-x86_64)")
def test_the_emulated_python_is_this_environment_and_starts_itself(tmp_path):
    (tmp_path / "env").mkdir()
    python = emulated_cpu.emulated_python(str(tmp_path / "env"), shutil.which("qemu-x86_64"))
    # numpy reads the CPU's features with CPUID, as TensorFlow and oneDNN do.
    code = ("import subprocess, sys, kbert\n"
            "from numpy._core._multiarray_umath import __cpu_features__ as cpu\n"
            "print(sys.executable, sys.prefix, kbert.__file__, cpu['AVX2'], cpu['AVX512F'])\n"
            "print(subprocess.run([sys.executable, '-c', 'import sys; print(sys.executable)'], "
            "capture_output=True, text=True).stdout)")
    result = subprocess.run([python, "-c", code], capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT, cwd=tmp_path)
    assert result.returncode == 0 and not result.stderr, result.stderr
    executable, prefix, kbert_file, avx2, avx512, child = result.stdout.split()
    assert executable == child == python and prefix == str(tmp_path / "env")
    assert (avx2, avx512) == ("True", "False")
    # This checkout's kbert, from the environment's editable install (not the working directory).
    assert kbert_file.startswith(os.path.dirname(os.path.dirname(emulated_cpu.__file__)))
