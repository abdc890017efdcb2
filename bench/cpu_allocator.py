"""Page faults and step time of TensorFlow's CPU allocators: malloc (its default) vs pooling.

`import kbert` sets TF_CPU_ALLOCATOR_USE_BFC=true (`kbert/cpu_allocator.py`) unless the user
set it. What that saves depends on the machine (glibc's mmap threshold, the kernel, the CPU),
so it is measured here, never asserted in a test. Each setting runs in a fresh process
(TensorFlow reads the variable once), alternating, and prints the minor page faults and
milliseconds per call of two probes:

- elementwise: a tf.function making four 16 MB tensors a call;
- fit: a `model.fit` step of a MiniLM-shaped classifier (random weights) on batches of
  unknown width, as the recipes trace it.

  python -m bench.cpu_allocator --rounds=2
"""

import sys

from absl import app
from absl import flags

from bench import runs

_ROUNDS = flags.DEFINE_integer("rounds", 2, "Fresh processes per setting, alternating.", 1)
_STEPS = flags.DEFINE_integer("steps", 12, "Timed calls per probe, after a warm-up.", 1)

# Runs in the child: argv[1] is the number of timed calls; prints one JSON line.
_CHILD = r"""
import json, resource, sys, time
import kbert
import keras
import tensorflow as tf

steps = int(sys.argv[1])

def measure(call):
    for _ in range(3):
        call()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for _ in range(steps):
        call()
    return {"ms": (time.perf_counter() - start) / steps * 1e3,
            "faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps}

x = tf.random.uniform([2048, 2048])
elementwise = tf.function(lambda x: tf.nn.relu(x * 2.0) + 1.0)

keras.utils.set_random_seed(0)
config = kbert.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                          num_attention_heads=12, intermediate_size=1536)
model = kbert.BertClassifier(kbert.BertEncoder(**config.encoder_kwargs()), 2)
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
def batches():
    widths = tf.data.Dataset.range(8, 40).repeat()
    def batch(width):
        ids = tf.random.uniform([32, tf.cast(width, tf.int32)], 5, 30000, tf.int32)
        return ({"token_ids": ids, "segment_ids": tf.zeros_like(ids),
                 "padding_mask": tf.ones_like(ids)}, tf.zeros([32], tf.int32))
    return widths.map(batch)
data = iter(batches())
model.fit(batches(), steps_per_epoch=1, verbose=0)  # traces the step on [None, None]
step = lambda: model.train_on_batch(*next(data))  # noqa: E731
print(json.dumps({"elementwise": measure(lambda: elementwise(x)), "fit": measure(step)}))
"""


def _child(setting):
    env = dict(runs.child_env(), TF_CPU_ALLOCATOR_USE_BFC=setting)
    return runs.child_result([sys.executable, "-c", _CHILD, str(_STEPS.value)], env=env,
                             cwd=runs.ROOT)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    for round_ in range(_ROUNDS.value):
        for setting, name in (("false", "malloc"), ("true", "pooling (kbert)")):
            for probe, row in _child(setting).items():
                print(f"round {round_ + 1}  {name:16s} {probe:11s} {row['ms']:9.1f} ms/call "
                      f"{row['faults']:11.1f} faults/call", flush=True)


if __name__ == "__main__":
    app.run(main)
