"""Where kbert's training step spends the CPU's time, by kind of work, sampled with `perf`.

Runs the step of `bench/step_vs_torch.py` (the MiniLM-shaped classifier compiled as the recipes
compile it, one batch x width batch repeated), attaches Linux `perf record` to this process
for --steps steps after the warm-up, and sums `perf report`'s samples per symbol into kinds
of work: oneDNN's just-in-time kernels (the matmuls), Eigen's element-wise ops by dtype,
dtype casts, reductions, the Philox generator (dropout masks), the thread pool, the kernel.
Shares, not times: compare two commits' tables, each run alone.

  python -m bench.step_profile --shape=32x54 --precision=bfloat16
"""

import collections
import os
import re
import shutil
import signal
import subprocess
import tempfile

from absl import app
from absl import flags

from bench import runs
from bench import step_vs_torch

_SHAPE = flags.DEFINE_string("shape", "32x54", "batch x width of the profiled steps.")
_PROFILED_STEPS = flags.DEFINE_integer("profiled_steps", 30, "Steps sampled after the warm-up.")
_FREQUENCY = flags.DEFINE_integer("frequency", 999, "perf samples per second.")
_TOP = flags.DEFINE_integer("top", 12, "Symbols listed after the table.")
_OUTPUT = flags.DEFINE_string("output", None, "Also write the shares as JSON here.")
# --precision, --embedding_updates and --batch_parts are step_vs_torch's flags (its others do
# not apply).

# (kind, test on (shared object, symbol)), first match wins.
KINDS = [
    ("oneDNN just-in-time kernels (matmuls)", lambda dso, sym: dso.startswith("[JIT]")),
    ("kernel (scheduling, page faults)", lambda dso, sym: dso.startswith("[kernel")),
    ("Philox random numbers (dropout masks)", lambda dso, sym: "Philox" in sym),
    ("Eigen reductions (sums, means)", lambda dso, sym: "Reduc" in sym),
    ("Eigen dtype casts", lambda dso, sym: "TensorConversionOp" in sym),
    ("Eigen element-wise, bfloat16", lambda dso, sym: "Eigen::bfloat16" in sym),
    ("Eigen element-wise, float32", lambda dso, sym: "Tensor<float" in sym),
    ("thread pool", lambda dso, sym: re.search(r"RunQueue|ThreadPool|EventCount", sym)),
    ("oneDNN, other", lambda dso, sym: "dnnl" in sym),
    ("memcpy, memset", lambda dso, sym: re.search(r"mem(move|cpy|set)", sym)),
]
OTHER = "other"


def kind_of(dso, symbol):
    """The KINDS name of a sample's shared object and symbol, or OTHER."""
    return next((name for name, test in KINDS if test(dso, symbol)), OTHER)


def read_report(perf_data):
    """[(percent, shared object, symbol)] of `perf report` on `perf_data`."""
    report = subprocess.run(
        ["perf", "report", "-i", perf_data, "--sort", "dso,symbol", "--stdio",
         "--field-separator=\t"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in report.splitlines():
        parts = [part.strip() for part in line.split("\t")]  # padded, and a last empty one
        if line.startswith("#") or len(parts) < 3 or not parts[0].endswith("%"):
            continue
        rows.append((float(parts[0][:-1]), parts[1], re.sub(r"^\[.\] ", "", parts[2])))
    return rows


def shares(rows):
    """{kind: percent of the samples}, largest first."""
    totals = collections.Counter()
    for percent, dso, symbol in rows:
        totals[kind_of(dso, symbol)] += percent
    return dict(totals.most_common())


def short(symbol, width=150):
    """`symbol` without Eigen's namespaces and long template arguments, cut to `width`."""
    symbol = re.sub(r"Eigen::(internal::)?|tensorflow::|std::", "", symbol)
    symbol = re.sub(r"TensorMap<Tensor<(\w+)( const)?, (\d), 1, long>( const)?, \d+, "
                    r"MakePointer>( const)?", r"Map<\1,\3>", symbol)
    return symbol[:width]


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if shutil.which("perf") is None:
        raise app.UsageError("needs Linux `perf` on PATH (linux-tools / linux-perf)")
    batch, width = runs.batch_by_width(_SHAPE.value, "shape")
    precision = step_vs_torch._PRECISION.value
    model, dataset = step_vs_torch.kbert_fit(batch, width, precision,
                                             step_vs_torch._EMBEDDING.value,
                                             step_vs_torch._PARTS.value)
    with tempfile.TemporaryDirectory() as scratch:
        perf_data = os.path.join(scratch, "perf.data")
        perf = subprocess.Popen(
            ["perf", "record", "-F", str(_FREQUENCY.value), "-p", str(os.getpid()), "-o",
             perf_data], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            model.fit(dataset, steps_per_epoch=_PROFILED_STEPS.value, verbose=0)
        finally:
            perf.send_signal(signal.SIGINT)
            _, errors = perf.communicate()
        if perf.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"perf record failed ({perf.returncode}): {errors[-2000:]}")
        rows = read_report(perf_data)
    kinds = shares(rows)
    print(f"kbert step, {batch} x {width}, {precision}, {step_vs_torch._EMBEDDING.value} word "
          f"rows; {_PROFILED_STEPS.value} steps sampled by perf")
    print("| kind of work | share of samples |\n|---|---:|")
    for kind, percent in kinds.items():
        print(f"| {kind} | {percent:.1f}% |")
    print(f"\nThe {_TOP.value} largest symbols:")
    for percent, dso, symbol in sorted(rows, reverse=True)[:_TOP.value]:
        print(f"{percent:5.1f}%  {dso[:24]:24}  {short(symbol)}")
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value,
                        {"shape": _SHAPE.value, "precision": precision, "shares": kinds})


if __name__ == "__main__":
    app.run(main)
