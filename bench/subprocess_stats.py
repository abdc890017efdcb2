"""Run a command as a child process and measure it: wall time, CPU time, peak RSS; for the
pretraining-data tools, with the records they wrote."""

import glob
import os
import subprocess
import time


def run(command, cwd=None, env=None):
    """Runs `command`; returns (returncode, wall s, cpu s, peak RSS MiB, output tail)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            cwd=cwd)
    output = []
    for line in proc.stdout:  # drain while it runs
        output.append(line.decode(errors="replace"))
        del output[:-20]
    # wait4: the child's rusage, which on Linux folds in the descendants it reaped (Beam's
    # worker processes): CPU time is their sum, peak RSS the largest one process, not a sum.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    return (proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            "".join(output))


def count_records(pattern):
    """TFRecords in the files matching `pattern` (`*_meta.json` sidecars skipped)."""
    import tensorflow as tf

    files = sorted(f for f in glob.glob(pattern) if not f.endswith("_meta.json"))
    return sum(1 for _ in tf.data.TFRecordDataset(files)) if files else 0


def measure_tool(command, pattern):
    """Runs a pretraining-data tool's `command` (argv) in the repository root, raising if it
    fails; its instances (records in `pattern`), wall and CPU seconds, instances/s, peak RSS."""
    from bench import runs

    code, wall, cpu, rss, tail = run(command, cwd=runs.ROOT, env=runs.child_env())
    if code:
        raise RuntimeError(f"{' '.join(command)} failed ({code}):\n{tail}")
    instances = count_records(pattern)
    return dict(instances=instances, wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                instances_per_s=round(instances / wall, 1), peak_rss_mb=round(rss))
