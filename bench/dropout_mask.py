"""What dropout costs in a training step, and whether a cheaper mask would pay.

Times forward + backward of one dropout (rate 0.1) in a `tf.function`, at the MiniLM step's
hidden ([batch * width, 384]) and attention-probability ([batch, 12, width, width]) shapes:

  none      the identity (the cost of the surrounding multiply and gradient alone)
  keras     `tf.nn.experimental.stateless_dropout`, what Keras' `Dropout` runs: one 32-bit
            Philox draw per element, turned into a float and compared with the rate
  bits16    a candidate: one 32-bit draw per two elements, each 16-bit half compared with
            round(rate * 65536) (the rate rounded to 1/65536)

Each is the best of 3 rounds of 50 calls.

  python -m bench.dropout_mask --shapes=32x14,32x54
"""

import time

import tensorflow as tf
from absl import app
from absl import flags

from bench import runs

_SHAPES = flags.DEFINE_list("shapes", ["32x14", "32x54"], "batch x width shapes.")
_RATE = flags.DEFINE_float("rate", 0.1, "Dropout rate.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def keras_dropout(x, seed):
    return tf.nn.experimental.stateless_dropout(x, rate=_RATE.value, seed=seed)


def bits16_dropout(x, seed):
    count = tf.size(x)
    draws = tf.random.stateless_uniform([(count + 1) // 2], seed=seed, minval=None,
                                        maxval=None, dtype=tf.uint32)
    halves = tf.reshape(tf.bitcast(draws, tf.uint16), [-1])[:count]
    threshold = tf.constant(round(_RATE.value * 65536), tf.uint16)
    keep = tf.reshape(halves >= threshold, tf.shape(x))
    return tf.where(keep, x * (1 / (1 - _RATE.value)), tf.zeros_like(x))


def milliseconds(dropout, shape, calls=50, rounds=3):
    x = tf.Variable(tf.random.normal(shape))

    @tf.function
    def step(i):
        with tf.GradientTape() as tape:
            y = dropout(x, tf.stack([i, 7]))
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, x)

    for i in range(5):
        step(tf.constant(i)).numpy()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(calls):
            gradient = step(tf.constant(i))
        gradient.numpy()
        best = min(best, (time.perf_counter() - start) / calls * 1e3)
    return round(best, 3)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    variants = {"none": lambda x, seed: x, "keras": keras_dropout, "bits16": bits16_dropout}
    results = {}
    for text in _SHAPES.value:
        batch, width = runs.batch_by_width(text, "shapes")
        for name, shape in (("hidden", [batch * width, 384]),
                            ("attention", [batch, 12, width, width])):
            results[f"{text} {name}"] = {variant: milliseconds(fn, shape)
                                         for variant, fn in variants.items()}
    runs.report(results, _OUTPUT.value, indent=2)


if __name__ == "__main__":
    app.run(main)
