"""TensorFlow's vs PyTorch's matmul on this CPU, at the shapes of a fine-tuning step.

A MiniLM fine-tuning step is mostly [tokens, 384] x [384, 384 | 1536] products and their
gradients, with a few hundred tokens per batch on SST-2 (32 sentences of ~14 pieces). Which
library multiplies these faster depends on the CPU, and so does how kbert compares with the
Hugging Face Trainer. This times one product per shape in each library, interleaved over
--repeats rounds, with the same thread count (TensorFlow: its default pools on this machine;
PyTorch: `torch.set_num_threads(--threads)`), and prints GFLOP/s and the ratio. Each
projection's three products are timed: the forward one, the input's gradient (the weight
transposed) and the weight's gradient (the tokens summed over). --precision=bfloat16 multiplies
bfloat16 tensors on both sides (what Keras' mixed_bfloat16 and torch.autocast do).

  python -m bench.matmul --tokens=448,1728 --precision=float32   # 32 x 14 and 32 x 54
"""

import statistics
import time

from absl import app
from absl import flags

_TOKENS = flags.DEFINE_list("tokens", ["304", "576", "2048"], "Rows (tokens per batch).")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Interleaved rounds; each times --products.")
_PRODUCTS = flags.DEFINE_integer("products", 30, "Products timed per round.")
_THREADS = flags.DEFINE_integer("threads", 2, "PyTorch threads (TensorFlow uses all cores).")
_PRECISION = flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                               "The dtype of both products' operands.")

# (inner, outer) of the projections: attention (384 -> 384), feed-forward in and out.
WIDTHS = ((384, 384), (384, 1536), (1536, 384))


def _seconds(product, count):
    product()  # warm up (oneDNN primitives, PyTorch's first call)
    start = time.perf_counter()
    for _ in range(count):
        product()
    return (time.perf_counter() - start) / count


# The products of one projection [tokens, inner] x [inner, outer] in a training step:
# name -> (transpose the first operand, transpose the second, shape of the first, the second).
PRODUCTS = {
    "forward": (False, False, lambda t, i, o: ((t, i), (i, o))),
    "input gradient": (False, True, lambda t, i, o: ((t, o), (i, o))),
    "weight gradient": (True, False, lambda t, i, o: ((t, i), (t, o))),
}


def _products(tf, torch, product, tokens, inner, outer, precision):
    """{"tf" | "torch": a function computing `product` of the projection}, same values."""
    transpose_a, transpose_b, shapes = PRODUCTS[product]
    a, b = (tf.random.normal(shape) for shape in shapes(tokens, inner, outer))
    torch_a, torch_b = torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy())
    if precision == "bfloat16":
        a, b = tf.cast(a, tf.bfloat16), tf.cast(b, tf.bfloat16)
        torch_a, torch_b = torch_a.bfloat16(), torch_b.bfloat16()
    tf_product = tf.function(
        lambda: tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b))
    torch_a = torch_a.t() if transpose_a else torch_a
    torch_b = torch_b.t() if transpose_b else torch_b
    return {"tf": lambda: tf_product().numpy(), "torch": lambda: torch_a @ torch_b}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf
    import torch

    torch.set_num_threads(_THREADS.value)
    print(f"TensorFlow {tf.__version__}, PyTorch {torch.__version__} ({_THREADS.value} threads), "
          f"{_PRECISION.value}")
    print("| tokens x inner x outer | product | TensorFlow GFLOP/s | PyTorch GFLOP/s "
          "| TF / PyTorch |")
    print("|---|---|---:|---:|---:|")
    for tokens in map(int, _TOKENS.value):
        for inner, outer in WIDTHS:
            for product in PRODUCTS:
                products = _products(tf, torch, product, tokens, inner, outer, _PRECISION.value)
                rounds = {name: [] for name in products}
                for _ in range(_REPEATS.value):
                    for name, function in products.items():
                        rounds[name].append(_seconds(function, _PRODUCTS.value))
                flops = 2 * tokens * inner * outer
                rate = {name: flops / statistics.median(times) / 1e9
                        for name, times in rounds.items()}
                print(f"| {tokens} x {inner} x {outer} | {product} | {rate['tf']:.0f} "
                      f"| {rate['torch']:.0f} | {rate['tf'] / rate['torch']:.2f} |", flush=True)


if __name__ == "__main__":
    app.run(main)
