"""AdamW's step of one weight as one XLA program, and its compiles started before the step runs.

`adamw_step` is the update `kbert.tasks.optimization.AdamW` runs for every weight with a dense
gradient. XLA compiles it once per weight shape, when the train step first runs it: for
MiniLM 11 programs of ~40-90 ms each, ~0.25 s of the first step's wall time on two cores,
after TensorFlow has optimised the step's graph on one of them. `compile_in_background`
compiles them in a thread instead, started as the step's trace ends, on the other core while
that optimisation runs (BENCHMARKS.md, "The bias add unfused in bfloat16 on AMX, the update
compiled ahead, ..."). They are the same programs, if called from inside a graph as the step
calls them: XLA keeps one executable per function, function attributes and argument shapes
for the process, whichever graph or thread asked for it first, and a second asker waits for
the first one's compile.
"""

import math
import threading
from typing import NamedTuple

import tensorflow as tf
from absl import logging


# Hand-written: Keras updates each weight with a dozen element-wise TF ops (clip, decay, two
# moments, the step), every one a full pass over the weight's memory, ~100 ms a step for
# MiniLM's 22.7M weights on 2 CPU cores. XLA fuses them into one loop per weight. Compiled per
# weight shape (13 for MiniLM), not as one function over all weights: that one took ~10 s to
# trace and compile at every training start, and its step ran slower (BENCHMARKS.md, "The
# AdamW update compiled per weight shape"). Keras only compiles the update with the whole
# train step (`jit_compile=True`), which slows BERT's forward and backward on CPU. No autograph:
# the only branch is on a Python bool, and converting the function cost ~0.14-0.3 s of every
# training process's first step.
@tf.function(jit_compile=True, autograph=False)
def adamw_step(handles, dtype, grad, scale, rate, alpha, decayed, weight_decay, beta_1, beta_2,
               epsilon):
    """One weight's AdamW step in place, as Keras' AdamW: the gradient times `scale` (global
    norm clipping), decay `weight -= weight * weight_decay * rate` if `decayed`, then Adam with
    the bias-corrected step size `alpha`. `handles`: the resource handles of the weight and its
    two moments, of `dtype` (handles, not variables, so that one trace serves every weight of
    a shape, in any model)."""
    def read(handle):
        return tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)

    weight, m_handle, v_handle = handles
    grad = tf.cast(grad, dtype) * tf.cast(scale, dtype)
    value = read(weight)
    if decayed:
        value -= value * tf.cast(weight_decay, dtype) * tf.cast(rate, dtype)
    m = read(m_handle)
    m += (grad - m) * (1 - beta_1)
    v = read(v_handle)
    v += (tf.square(grad) - v) * (1 - beta_2)
    tf.raw_ops.AssignVariableOp(resource=m_handle, value=m)
    tf.raw_ops.AssignVariableOp(resource=v_handle, value=v)
    tf.raw_ops.AssignVariableOp(
        resource=weight, value=value - m * tf.cast(alpha, dtype) / (tf.sqrt(v) + epsilon))


class StepSignature(NamedTuple):
    """What one compiled `adamw_step` program is for: the weight's shape and dtype, the
    gradient's dtype, and the Python arguments the step is traced with."""
    shape: tuple
    dtype: tf.DType
    grad_dtype: tf.DType
    decayed: bool
    weight_decay: float
    beta_1: float
    beta_2: float
    epsilon: float


# A weight with more elements (a word table updated densely: 11.7 M for MiniLM) is left to the
# step: compiling its program ahead takes scratch copies of ~4 times its size.
MOST_ELEMENTS_AHEAD = 1 << 22
_started = set()  # signatures whose compile this process has started
_lock = threading.Lock()


def compile_in_background(signatures):
    """Starts a thread that compiles `adamw_step` for each of `signatures` not started before
    in this process (XLA's executables live as long as the process) and of at most
    `MOST_ELEMENTS_AHEAD` elements.

    Args:
        signatures: iterable of `StepSignature`, as a traced train step calls `adamw_step`.

    Returns:
        the `threading.Thread`, or None when none of them is left to compile.
    """
    with _lock:
        new = list(dict.fromkeys(s for s in signatures if s not in _started
                                 and math.prod(s.shape) <= MOST_ELEMENTS_AHEAD))
        _started.update(new)
        if not new:
            return None
    # Not a daemon: a process that ends meanwhile waits for it (~1 s) instead of stopping a
    # thread inside TensorFlow.
    thread = threading.Thread(target=_compile, args=(new,), name="kbert-adamw-compiles")
    thread.start()
    return thread


def _compile(signatures):
    for signature in signatures:
        try:
            _run_once(signature)
        except Exception as error:  # noqa: BLE001 (the step then compiles it itself)
            logging.warning("Compiling the AdamW update for %s ahead failed: %s", signature,
                            error)


def _run_once(signature):
    """Runs `adamw_step` for `signature` once on zeros in scratch variables. Inside a graph,
    as the train step calls it: an eager call is compiled under other function attributes,
    a program the step's graph would not use."""
    variables = [tf.Variable(tf.zeros(signature.shape, signature.dtype)) for _ in range(3)]
    grad = tf.zeros(signature.shape, signature.grad_dtype)
    scalar = tf.constant(1.0)

    def in_graph():
        adamw_step(tuple(v.handle for v in variables), signature.dtype, grad, scalar, scalar,
                   scalar, decayed=signature.decayed, weight_decay=signature.weight_decay,
                   beta_1=signature.beta_1, beta_2=signature.beta_2,
                   epsilon=signature.epsilon)

    # Traced as a concrete function and called as one: a `tf.function` called with one
    # signature after another is what TensorFlow warns of as frequent retracing (a warning
    # in every first `fit`).
    tf.function(in_graph, autograph=False).get_concrete_function()()
