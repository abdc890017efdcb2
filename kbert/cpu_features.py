"""What this machine's CPU can do natively, read from Linux's /proc/cpuinfo.

By hand: TensorFlow does not say whether oneDNN runs bfloat16 matmuls natively, and reading
the flags line is all it takes (the `py-cpuinfo` package would do the same, as a dependency).
"""

import tensorflow as tf


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The words of the CPU's "flags" line in `cpuinfo` (Linux), a set (empty without such a
    line); None where the file cannot be read."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            return set(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return None


def runs_on_cpu():
    """Whether TensorFlow runs its ops on the CPU here: no GPU or TPU is visible."""
    return not (tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"))


def emulates_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether training here would run bfloat16 matmuls in emulation: no GPU or TPU, and a
    CPU whose `cpuinfo` flags lack avx512_bf16 and amx_bf16. False where unknown (no flags)."""
    if not runs_on_cpu():
        return False
    flags = cpu_flags(cpuinfo)
    return bool(flags) and not {"avx512_bf16", "amx_bf16"} & flags


def has_amx_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether TensorFlow runs on a CPU whose `cpuinfo` flags have amx_bf16 (Intel's AMX
    matrix units): no GPU or TPU, and the flag present. False where unknown."""
    return runs_on_cpu() and "amx_bf16" in (cpu_flags(cpuinfo) or ())
