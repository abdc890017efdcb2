"""Page faults and step time of kbert's training step with glibc's malloc as it is, and with a
64 MiB top pad and a 32 MiB mmap threshold (`MALLOC_TOP_PAD_=67108864
MALLOC_MMAP_THRESHOLD_=33554432` in the environment).

oneDNN's bfloat16 matmuls take their packing buffers (0.3-1 MB) from malloc on TensorFlow's
worker threads, outside TensorFlow's pooling allocator, and glibc hands them back to the
kernel after each call; the pad keeps them (BENCHMARKS.md, "glibc's top pad"). Both settings
are glibc's own environment variables, read when the process starts: kbert sets neither (a
faster step at one shape, SST-2 level end to end). What they save depends on the machine, so
it is measured here, never asserted in a test. Each setting runs in a fresh process,
alternating, and times `model.fit` steps of `bench.step_vs_torch`'s MiniLM-shaped classifier
(the recipes' optimizer and traced step), printing per step: milliseconds, minor page faults,
kernel (system) CPU milliseconds, and the process's peak resident memory.

  python -m bench.malloc_top_pad --shapes=32x14,32x54 --precision=bfloat16
"""

import json
import statistics
import sys

from absl import app
from absl import flags

from bench import runs

_SHAPES = flags.DEFINE_list("shapes", ["32x14", "32x54"], "batch x width of the timed steps.")
_PRECISION = flags.DEFINE_enum("precision", "bfloat16", ["float32", "bfloat16"],
                               "kbert's precision (bfloat16: Keras' mixed_bfloat16).")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Fresh processes per setting, alternating.", 1)
_STEPS = flags.DEFINE_integer("steps", 10, "Steps per timed fit; 3 fits per process.", 1)

# Runs in the child: argv[1:] = batch, width, precision, steps; prints one JSON line.
_CHILD = r"""
import json, resource, statistics, sys, time
from bench import step_vs_torch

batch, width, precision, steps = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
model, dataset = step_vs_torch.kbert_fit(batch, width, precision, "sparse")
rows = []
for _ in range(3):
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps, verbose=0)
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    rows.append((seconds * 1e3 / steps, (after.ru_minflt - before.ru_minflt) / steps,
                 (after.ru_stime - before.ru_stime) * 1e3 / steps))
print(json.dumps({"ms": statistics.median(r[0] for r in rows),
                  "faults": statistics.median(r[1] for r in rows),
                  "system_ms": statistics.median(r[2] for r in rows),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


PAD = {"MALLOC_TOP_PAD_": str(64 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}


def _child(batch, width, pad):
    env = {key: value for key, value in runs.child_env().items() if key not in PAD}
    if pad:
        env.update(PAD)
    command = [sys.executable, "-c", _CHILD, str(batch), str(width), _PRECISION.value,
               str(_STEPS.value)]
    return runs.child_result(command, env=env, cwd=runs.ROOT)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    print(f"precision: {_PRECISION.value}; {runs.cpu()}")
    print("| batch x width | glibc's malloc | ms/step | page faults/step | system CPU ms/step | "
          "peak MB |")
    print("|---|---|---:|---:|---:|---:|")
    for batch, width in (runs.batch_by_width(shape, "shapes") for shape in _SHAPES.value):
        results = {False: [], True: []}
        for _ in range(_ROUNDS.value):
            for pad in results:
                results[pad].append(_child(batch, width, pad))
        for pad, rows in results.items():
            median = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            setting = "64 MiB top pad, 32 MiB mmap threshold" if pad else "as it is"
            print(f"| {batch} x {width} | {setting} | "
                  f"{median['ms']:.0f} | {median['faults']:.0f} | {median['system_ms']:.1f} | "
                  f"{median['peak_mb']:.0f} |", flush=True)
        print(json.dumps({f"{batch}x{width}": {str(pad): rows for pad, rows in results.items()}}))


if __name__ == "__main__":
    app.run(main)
