"""Recipe and tool tests run TensorFlow functions eagerly.

A tiny model's few steps cost less run op by op than traced: tracing and instantiating a
recipe's train, evaluate and predict steps were ~1.5 s of a ~4 s in-process tool run. On the
Intel VM (2026-11-28) test_run_classifier.py and test_glue.py took 111 s traced and 69 s
eagerly, and the 27 files that run tools or recipes in-process 17% less over a whole suite
(CONTRIBUTING.md has the figures). These tests check what a recipe reads, writes, resumes
and refuses, which does not depend on the step being traced. The traced step keeps its
tests: the layer, model, optimizer and export tests, each tool's fresh-process test
(`run_tool_in_subprocess`), the notebooks, `tests/tasks/test_exact_resume.py` and the
two-replica and two-worker `fit`s run it as users do (the two-replica test's GLUE recipe and
pretraining input run eagerly: it checks their outputs' order and resumption).

tf.data functions are traced either way (TensorFlow's option does not reach them).
"""

import contextlib
import warnings

import tensorflow as tf


@contextlib.contextmanager
def functions_run_eagerly(eagerly=True):
    """`tf.function`s (Keras' train, evaluate and predict steps among them) run eagerly; with
    `eagerly=False`, traced, whatever an enclosing context chose."""
    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(eagerly)
    try:
        with warnings.catch_warnings():
            # TensorFlow's note that the option does not reach tf.data: true, and expected.
            warnings.filterwarnings("ignore", message="Even though the `tf.config.experimental_"
                                    "run_functions_eagerly` option is set")
            yield
    finally:
        tf.config.run_functions_eagerly(before)
