import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context

from kbert import graph_passes

ITERATIONS = rewriter_config_pb2.RewriterConfig


def grappler_iterations():
    """The Grappler pass count that this thread's next new function graph is optimised with."""
    options = context.context().function_call_options
    config = config_pb2.ConfigProto.FromString(options.config_proto_serialized)
    return config.graph_options.rewrite_options.meta_optimizer_iterations


def test_one_pass_inside_the_block_and_tensorflows_default_after():
    assert grappler_iterations() == ITERATIONS.DEFAULT_NUM_ITERS
    with graph_passes.one_optimizer_pass():
        assert grappler_iterations() == ITERATIONS.ONE
        with graph_passes.one_optimizer_pass():  # nested: the outer block's setting holds
            assert grappler_iterations() == ITERATIONS.ONE
        assert grappler_iterations() == ITERATIONS.ONE
    assert grappler_iterations() == ITERATIONS.DEFAULT_NUM_ITERS


def test_a_count_the_caller_chose_is_kept():
    eager = context.context()
    saved = eager.function_call_options
    config = config_pb2.ConfigProto.FromString(saved.config_proto_serialized)
    config.graph_options.rewrite_options.meta_optimizer_iterations = ITERATIONS.TWO
    eager.function_call_options = context.FunctionCallOptions(config_proto=config)
    try:
        with graph_passes.one_optimizer_pass():
            assert grappler_iterations() == ITERATIONS.TWO
        assert grappler_iterations() == ITERATIONS.TWO
    finally:
        eager.function_call_options = saved


def test_options_tensorflow_rebuilds_inside_the_block_are_not_overwritten_on_exit():
    """A change of TensorFlow's optimizer options inside the block makes it rebuild this
    thread's function-call options; the block's exit leaves the rebuilt ones in place."""
    try:
        with graph_passes.one_optimizer_pass():
            tf.config.optimizer.set_experimental_options({"min_graph_nodes": 7})
        options = context.context().function_call_options
        config = config_pb2.ConfigProto.FromString(options.config_proto_serialized)
        assert config.graph_options.rewrite_options.min_graph_nodes == 7
    finally:
        tf.config.optimizer.set_experimental_options({"min_graph_nodes": 0})  # the default


def test_a_function_first_called_inside_the_block_runs():
    @tf.function
    def double(x):
        return x * 2.0

    with graph_passes.one_optimizer_pass():
        assert double(tf.constant(3.0)).numpy() == 6.0
