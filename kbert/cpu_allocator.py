"""CPU memory settings made when kbert is imported, each kept off when the user chose one.

By hand because neither TensorFlow nor any library sets them, and both stop a training step
from page-faulting the same memory back in at every step (BENCHMARKS.md):

- TensorFlow's pooling (BFC) allocator for CPU tensors. TensorFlow leaves it off: the default
  takes every tensor from malloc, which maps fresh pages for the large ones and unmaps them
  when they are freed. A MiniLM fine-tuning step in `model.fit` then page-faulted ~190,000
  times and spent ~40% of its CPU time in the kernel; with the pool the step is ~1.6× faster
  and SST-2 fine-tuning 1.5× ("The CPU allocator"). `TF_CPU_ALLOCATOR_USE_BFC=false` in the
  environment keeps TensorFlow's default.
- A 64 MiB top pad for glibc's malloc (`mallopt(M_TOP_PAD)`). oneDNN's bfloat16 matmuls take
  their packing buffers (0.3-1 MB each) from malloc on TensorFlow's worker threads, outside
  TensorFlow's allocator; glibc gave them back to the kernel after each call, and a MiniLM
  bfloat16 step page-faulted ~6,300 times. With the pad, glibc keeps that much freed memory
  in each arena ("glibc's top pad"). Only on glibc, and not when the environment sets
  `MALLOC_TOP_PAD_` or a `glibc.malloc.top_pad` tunable; `KBERT_MALLOC_TOP_PAD=0` (or another
  number of bytes) keeps glibc's default (or sets that pad).

`kbert/__init__.py` imports this module first. Both settings take effect only for what comes
after them (TensorFlow reads its variable when it makes its first tensor, and glibc's arenas
keep the pad from when it is set), so a process that ran TensorFlow ops before importing kbert
keeps TensorFlow's allocator and part of the faults.
"""

import ctypes
import os

ENV_VAR = "TF_CPU_ALLOCATOR_USE_BFC"
TOP_PAD_ENV_VAR = "KBERT_MALLOC_TOP_PAD"
TOP_PAD = 64 << 20
# Setting the pad turns off glibc's dynamic mmap threshold, which would otherwise rise to the
# size of the blocks freed, up to 32 MiB; left at its initial 128 KiB, every larger block
# outside the pad was mapped afresh (PyTorch's step in the same process page-faulted twice as
# often). So the threshold is set where the dynamic one stops.
MMAP_THRESHOLD = 32 << 20
M_TOP_PAD, M_MMAP_THRESHOLD = -2, -3  # glibc's malloc.h
GLIBC_SETTINGS = {"MALLOC_TOP_PAD_": "glibc.malloc.top_pad",
                  "MALLOC_MMAP_THRESHOLD_": "glibc.malloc.mmap_threshold"}


def glibc_chosen(environ):
    """Whether the environment sets glibc's top pad or mmap threshold itself."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    return any(variable in environ or tunable in tunables
               for variable, tunable in GLIBC_SETTINGS.items())


def top_pad(environ):
    """The top pad kbert sets, in bytes: `KBERT_MALLOC_TOP_PAD` or 64 MiB; 0 for none."""
    value = environ.get(TOP_PAD_ENV_VAR, str(TOP_PAD))
    if not value.isdigit():
        raise ValueError(f"{TOP_PAD_ENV_VAR}={value!r}: expected a number of bytes, 0 to keep "
                         "glibc's default")
    return int(value)


def set_malloc_top_pad(environ=os.environ, libc=None):
    """Sets glibc's top pad (and so its mmap threshold) as the module docstring says; returns
    the pad set, or 0 if none. `libc`: the C library to call (the process's own, when it is
    glibc, by default)."""
    pad = top_pad(environ)
    if not pad or glibc_chosen(environ):
        return 0
    libc = libc or _glibc()
    if libc is None or libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        return 0
    return pad if libc.mallopt(M_TOP_PAD, pad) == 1 else 0


def _glibc():
    """The process's C library if it is glibc, else None."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, OSError, ValueError):  # no confstr (Windows), or not glibc's
        return None
    return ctypes.CDLL(None) if version else None


os.environ.setdefault(ENV_VAR, "true")
set_malloc_top_pad()
