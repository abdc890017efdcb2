"""Fewer passes of TensorFlow's graph optimiser (Grappler) over kbert's training step on the CPU.

By hand because TensorFlow 2 has no public setting for it: Grappler runs its optimisers over
each new function graph, twice by default (`RewriterConfig.meta_optimizer_iterations`), and
the eager context's per-thread function-call options are the only place to ask for less. On
a MiniLM classifier's training step (BENCHMARKS.md, "One Grappler pass for the train step"
and "The bias add unfused in bfloat16 on AMX, the update compiled ahead, Grappler's idle
optimisers left out"):
- the second pass only removes ~70 of ~2,300 nodes (identities and duplicates; it fuses and
  folds nothing), yet it is ~0.15 s of the first `fit` on two CPU cores, ~0.45 s with two
  batch parts;
- the layout optimiser (which rewrites convolutions' data formats), the memory optimiser
  (which swaps tensors to host memory from an accelerator, and recomputes what a graph marks
  for it) and the MLIR (TFG) passes (attribute and shape bookkeeping, sinking ops into the
  branches of conditionals, dropping unused functions) change no node or edge of it, and
  take ~0.07, ~0.12 and ~0.12 s.
Every other optimiser leaves the same node and edge counts, and the numbers are the same.

`remapper=False` also leaves out the remapper, whose only work in kbert's training step is to
fuse each product with its bias add into oneDNN's inner product. In bfloat16 on a CPU with
AMX, oneDNN runs that inner product without AMX (`x64:gemm:jit`) and the plain product with
it: unfused, MiniLM's bfloat16 step with two batch parts took 86 ms instead of 98 at 32 x 14
and 269 instead of 281 at 32 x 54 (BENCHMARKS.md, the same section); the bias is then added
after the product is rounded to bfloat16, not before.

Inference graphs keep TensorFlow's passes: there the second pass fuses the feed-forward GELU
into its matmul.
"""

import contextlib

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context

_REWRITER = rewriter_config_pb2.RewriterConfig
# Field -> (TensorFlow's default, the training step's setting).
_TRAINING_STEP = {
    "meta_optimizer_iterations": (_REWRITER.DEFAULT_NUM_ITERS, _REWRITER.ONE),
    "layout_optimizer": (_REWRITER.DEFAULT, _REWRITER.OFF),
    "memory_optimization": (_REWRITER.DEFAULT_MEM_OPT, _REWRITER.NO_MEM_OPT),
    "disable_tfg_optimizer": (False, True),
}
_NO_REMAPPER = {"remapping": (_REWRITER.DEFAULT, _REWRITER.OFF)}


@contextlib.contextmanager
def training_step_passes(remapper=True):
    """Functions first called in this thread inside the block are optimised in one pass,
    without the layout and memory optimisers and the TFG passes, and without the remapper if
    `remapper` is False.

    A setting already chosen (here or by the caller's own function-call options) is kept, so
    the blocks nest. Options that TensorFlow rebuilds inside the block (a change of its
    optimizer or threading config) are left as rebuilt.
    """
    eager = context.context()
    saved = eager.function_call_options
    config = config_pb2.ConfigProto.FromString(saved.config_proto_serialized)
    rewrite = config.graph_options.rewrite_options
    changed = False
    settings = dict(_TRAINING_STEP, **({} if remapper else _NO_REMAPPER))
    for field, (default, ours) in settings.items():
        if getattr(rewrite, field) == default:
            setattr(rewrite, field, ours)
            changed = True
    if not changed:
        yield
        return
    options = context.FunctionCallOptions(executor_type=saved.executor_type, config_proto=config)
    eager.function_call_options = options
    try:
        yield
    finally:
        if eager.function_call_options is options:
            eager.function_call_options = saved
