import json
import os
import subprocess
import sys

import tensorflow as tf

from kbert.tasks import fused_adamw

# A fit whose background compiles end before its step runs (they are joined during the
# trace), in a process that logs each XLA compile; it prints the signatures it compiled.
FIT_AFTER_COMPILES = """
import json
import keras
import numpy as np
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.tasks import fused_adamw, optimization

compiled = []
start = fused_adamw.compile_in_background

def compile_now(signatures):
    signatures = list(signatures)
    compiled.extend(signatures)
    thread = start(signatures)
    if thread is not None:
        thread.join()
    return thread

fused_adamw.compile_in_background = compile_now
keras.utils.set_random_seed(0)
model = BertClassifier(BertEncoder(31, 1, 2, 16, 32, max_sequence_length=8), 3)
model.compile(optimizer=optimization.create_optimizer(1e-3, 10, 1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = {"token_ids": np.ones((4, 6), "int32"), "segment_ids": np.zeros((4, 6), "int32"),
     "padding_mask": np.ones((4, 6), "int32")}
model.fit(x, np.zeros(4, "int32"), batch_size=2, epochs=2, verbose=0)
print(json.dumps({"compiled": [list(s.shape) + [s.decayed] for s in compiled],
                  "weights": [list(v.shape) + [model.optimizer._use_weight_decay(v)]
                              for v in model.trainable_variables]}))
"""


def test_the_step_runs_the_programs_compiled_in_the_background():
    """Each update program is compiled once in the process: the step's graph finds the ones
    the background thread compiled (an eager call there would compile programs of its own,
    under other function attributes, and the step would compile every one again)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="device_compiler=1")
    result = subprocess.run([sys.executable, "-c", FIT_AFTER_COMPILES], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    compiled = {tuple(s) for s in found["compiled"]}
    # Every weight has a dense gradient here: one program per shape and decay.
    assert compiled == {tuple(w) for w in found["weights"]}
    assert result.stderr.count("Compilation of XLA executable") == len(compiled)


def _signature(shape, decayed=True):
    return fused_adamw.StepSignature(shape, tf.float32, tf.float32, decayed, 0.01, 0.9,
                                     0.999, 1e-6)


def test_a_signature_is_compiled_once_per_process():
    # Shapes no other test's model has, so that nothing compiled them before.
    first = fused_adamw.compile_in_background([_signature((3, 7)), _signature((3, 7)),
                                               _signature((7,), decayed=False)])
    assert first is not None
    assert fused_adamw.compile_in_background([_signature((7,), decayed=False)]) is None
    second = fused_adamw.compile_in_background([_signature((3, 7)), _signature((7, 3))])
    first.join()
    second.join()
    assert not first.is_alive() and not second.is_alive()
    assert fused_adamw.compile_in_background([_signature((7, 3))]) is None
    # A table of more elements is left to the step: no scratch copies of it.
    huge = _signature((fused_adamw.MOST_ELEMENTS_AHEAD + 1,), decayed=False)
    assert fused_adamw.compile_in_background([huge]) is None


def test_a_failed_compile_is_logged_and_leaves_the_others(caplog):
    bad = fused_adamw.StepSignature((2, 5), tf.int32, tf.float32, True, 0.01, 0.9, 0.999, 1e-6)
    fused_adamw.compile_in_background([bad, _signature((5, 2))]).join()
    assert "Compiling the AdamW update" in caplog.text and "(2, 5)" in caplog.text
    assert "(5, 2)" not in caplog.text


def test_many_signatures_compile_without_tensorflows_retracing_warning(caplog):
    """MiniLM's update has 11 signatures: compiling them one after another is not the
    retracing TensorFlow warns a user about (a warning in every first `fit` otherwise)."""
    shapes = [(11, n) for n in range(2, 9)]
    fused_adamw.compile_in_background([_signature(shape) for shape in shapes]).join()
    assert "retracing" not in caplog.text
