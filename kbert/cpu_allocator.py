"""Chooses TensorFlow's pooling (BFC) allocator for CPU tensors, unless the user chose one.

By hand because TensorFlow leaves it off by default and no library sets it: the default CPU
allocator takes every tensor from malloc, which maps fresh pages for the large ones and unmaps
them when they are freed. A MiniLM fine-tuning step in `model.fit` then page-faulted ~190,000
times and spent ~40% of its CPU time in the kernel; with the pooling allocator the faults stop,
the step is ~1.6× faster and SST-2 fine-tuning 1.5× (BENCHMARKS.md, "The CPU allocator").

`kbert/__init__.py` imports this module first. TensorFlow reads the setting when it makes its
first tensor, so a process that ran TensorFlow ops before importing kbert keeps the default;
`TF_CPU_ALLOCATOR_USE_BFC=false` in the environment keeps it too.
"""

import os

ENV_VAR = "TF_CPU_ALLOCATOR_USE_BFC"

os.environ.setdefault(ENV_VAR, "true")
