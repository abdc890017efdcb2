"""One pass of TensorFlow's graph optimiser (Grappler) over kbert's training step on the CPU.

By hand because TensorFlow 2 has no public setting for it: Grappler runs its optimisers over
each new function graph twice by default (`RewriterConfig.meta_optimizer_iterations`), and
the eager context's per-thread function-call options are the only place to ask for one
pass. On a MiniLM classifier's training step the second pass only removes ~70 of ~2,300
nodes (identities and duplicates; it fuses and folds nothing), yet it is ~0.15 s of the
first `fit` on two CPU cores, ~0.45 s with two batch parts; the step runs no slower
(BENCHMARKS.md, "One Grappler pass for the train step"). Inference graphs keep both passes:
there the second fuses the feed-forward GELU into its matmul.
"""

import contextlib

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context

_ITERATIONS = rewriter_config_pb2.RewriterConfig


@contextlib.contextmanager
def one_optimizer_pass():
    """Functions first called in this thread inside the block are optimised in one pass.

    A count already chosen (here or by the caller's own function-call options) is kept, so
    the blocks nest. Options that TensorFlow rebuilds inside the block (a change of its
    optimizer or threading config) are left as rebuilt.
    """
    eager = context.context()
    saved = eager.function_call_options
    config = config_pb2.ConfigProto.FromString(saved.config_proto_serialized)
    rewrite = config.graph_options.rewrite_options
    if rewrite.meta_optimizer_iterations != _ITERATIONS.DEFAULT_NUM_ITERS:
        yield
        return
    rewrite.meta_optimizer_iterations = _ITERATIONS.ONE
    ours = context.FunctionCallOptions(executor_type=saved.executor_type, config_proto=config)
    eager.function_call_options = ours
    try:
        yield
    finally:
        if eager.function_call_options is ours:
            eager.function_call_options = saved
