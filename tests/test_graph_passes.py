import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context

from kbert import graph_passes

REWRITER = rewriter_config_pb2.RewriterConfig
TENSORFLOWS = (REWRITER.DEFAULT_NUM_ITERS, REWRITER.DEFAULT, REWRITER.DEFAULT_MEM_OPT, False)
TRAINING_STEPS = (REWRITER.ONE, REWRITER.OFF, REWRITER.NO_MEM_OPT, True)


def _rewrite_options():
    options = context.context().function_call_options
    config = config_pb2.ConfigProto.FromString(options.config_proto_serialized)
    return config.graph_options.rewrite_options


def grappler_settings():
    """What this thread's next new function graph is optimised with: Grappler's pass count,
    its layout optimiser, its memory optimiser and whether its TFG passes are off."""
    rewrite = _rewrite_options()
    return (rewrite.meta_optimizer_iterations, rewrite.layout_optimizer,
            rewrite.memory_optimization, rewrite.disable_tfg_optimizer)


def test_the_training_steps_passes_inside_the_block_and_tensorflows_default_after():
    assert grappler_settings() == TENSORFLOWS
    with graph_passes.training_step_passes():
        assert grappler_settings() == TRAINING_STEPS
        with graph_passes.training_step_passes():  # nested: the outer block's setting holds
            assert grappler_settings() == TRAINING_STEPS
        assert grappler_settings() == TRAINING_STEPS
    assert grappler_settings() == TENSORFLOWS


def test_settings_the_caller_chose_are_kept():
    eager = context.context()
    saved = eager.function_call_options
    config = config_pb2.ConfigProto.FromString(saved.config_proto_serialized)
    config.graph_options.rewrite_options.meta_optimizer_iterations = REWRITER.TWO
    config.graph_options.rewrite_options.layout_optimizer = REWRITER.ON
    eager.function_call_options = context.FunctionCallOptions(config_proto=config)
    try:
        with graph_passes.training_step_passes():  # the others were left to it
            assert grappler_settings() == (REWRITER.TWO, REWRITER.ON, REWRITER.NO_MEM_OPT, True)
        assert grappler_settings() == (REWRITER.TWO, REWRITER.ON, REWRITER.DEFAULT_MEM_OPT,
                                       False)
        config.graph_options.rewrite_options.memory_optimization = REWRITER.MANUAL
        config.graph_options.rewrite_options.disable_tfg_optimizer = True
        chosen = context.FunctionCallOptions(config_proto=config)
        eager.function_call_options = chosen
        with graph_passes.training_step_passes():  # nothing left to set: the same options
            assert eager.function_call_options is chosen
    finally:
        eager.function_call_options = saved


def test_options_tensorflow_rebuilds_inside_the_block_are_not_overwritten_on_exit():
    """A change of TensorFlow's optimizer options inside the block makes it rebuild this
    thread's function-call options; the block's exit leaves the rebuilt ones in place."""
    try:
        with graph_passes.training_step_passes():
            tf.config.optimizer.set_experimental_options({"min_graph_nodes": 7})
        assert _rewrite_options().min_graph_nodes == 7
    finally:
        tf.config.optimizer.set_experimental_options({"min_graph_nodes": 0})  # the default


def test_a_function_first_called_inside_the_block_runs():
    @tf.function
    def double(x):
        return x * 2.0

    with graph_passes.training_step_passes():
        assert double(tf.constant(3.0)).numpy() == 6.0


def test_the_remapper_is_left_out_only_when_asked():
    with graph_passes.training_step_passes():
        assert _rewrite_options().remapping == REWRITER.DEFAULT
    with graph_passes.training_step_passes(remapper=False):
        assert grappler_settings() == TRAINING_STEPS
        assert _rewrite_options().remapping == REWRITER.OFF
    assert _rewrite_options().remapping == REWRITER.DEFAULT
