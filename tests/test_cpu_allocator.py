"""Importing kbert makes TensorFlow pool CPU tensors: no page faults for repeated big tensors."""

import os
import subprocess
import sys

import pytest

from kbert import cpu_allocator
from tests.limits import SUBPROCESS_TIMEOUT

# In a fresh process: import kbert, then count the minor page faults of a function that makes
# four 16 MB tensors a call. malloc maps and unmaps them each call (~4,000 faults); TensorFlow's
# pooling allocator reuses them (none).
_PROBE = """
import resource
import kbert
import tensorflow as tf
x = tf.random.uniform([2048, 2048])
f = tf.function(lambda x: tf.nn.relu(x * 2.0) + 1.0)
for _ in range(3):
    f(x)
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    f(x)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / 10)
"""


def _faults_per_call(setting):
    env = {k: v for k, v in os.environ.items() if k != cpu_allocator.ENV_VAR}
    if setting is not None:
        env[cpu_allocator.ENV_VAR] = setting
    result = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                            text=True, timeout=SUBPROCESS_TIMEOUT, check=True)
    return float(result.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="getrusage faults: Linux")
def test_importing_kbert_pools_cpu_tensors_unless_the_user_chose():
    assert _faults_per_call(None) < 100
    assert _faults_per_call("false") > 1000  # the user's choice is kept: malloc's faults
