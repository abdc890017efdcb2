"""One read of each trainable weight per traced step, shared by the step's calls of the model.

By hand because neither Keras nor TensorFlow shares them: under mixed precision Keras reads
and casts a weight wherever a layer uses it (`AutocastScope.maybe_cast`), and a step that
calls the model once per batch part (`BertTask.batch_parts`) does so once per part, inside
separate function calls whose reads TensorFlow does not merge (each is ordered by its own
control edges). Inside `one_read_per_weight`, those reads resolve to one read in the step's
graph; Grappler then merges the parts' identical casts of it. The gradients still flow back
through each part's cast and are summed in the weight's dtype, as before: the same numbers.
MiniLM's bfloat16 step with two parts at 32 x 14 on the Intel VM: ~5% faster (BENCHMARKS.md,
"One read of each weight per step").
"""

import contextlib
import functools
import threading

import tensorflow as tf
from keras.src.backend.common import variables as keras_variables

_state = threading.local()  # .reads: (graph, {variable ref: its read}) inside the block


def _install():
    """Makes Keras' autocast use the block's shared reads; idempotent."""
    scope = keras_variables.AutocastScope
    keras_cast = scope.maybe_cast
    if getattr(keras_cast, "_kbert_shared_reads", False):
        return

    @functools.wraps(keras_cast)
    def maybe_cast(self, value):
        reads = getattr(_state, "reads", None)
        # Trainable floating-point weights only: nothing assigns them during a forward pass,
        # so one read serves every part (a seed generator's state is read anew by each).
        if (reads is not None and isinstance(value, tf.Variable) and value.trainable
                and value.dtype.is_floating):
            graph, tensors = reads
            key = value.ref()
            if key not in tensors:
                with graph.as_default():
                    tensors[key] = tf.convert_to_tensor(value)
            value = tensors[key]
        return keras_cast(self, value)

    maybe_cast._kbert_shared_reads = True
    scope.maybe_cast = maybe_cast


@contextlib.contextmanager
def one_read_per_weight():
    """While a step is traced, Keras' autocast reads of a trainable weight inside the block,
    in nested functions too, share one read made in the graph being traced. Eagerly, or
    nested in another such block, it changes nothing."""
    if not tf.inside_function() or getattr(_state, "reads", None) is not None:
        yield
        return
    _install()
    _state.reads = (tf.compat.v1.get_default_graph(), {})
    try:
        yield
    finally:
        _state.reads = None
