"""TensorFlow's vs PyTorch's float32 matmul on this CPU, at the shapes of a fine-tuning step.

A MiniLM fine-tuning step is mostly [tokens, 384] x [384, 384 | 1536] products and their
gradients, with a few hundred tokens per batch on SST-2 (32 sentences of ~14 pieces). Which
library multiplies these faster depends on the CPU, and so does how kbert compares with the
Hugging Face Trainer. This times one product per shape in each library, interleaved over
--repeats rounds, with the same thread count (TensorFlow: its default pools on this machine;
PyTorch: `torch.set_num_threads(--threads)`), and prints GFLOP/s and the ratio.

  python -m bench.matmul --tokens=304,576,2048
"""

import statistics
import time

from absl import app
from absl import flags

_TOKENS = flags.DEFINE_list("tokens", ["304", "576", "2048"], "Rows (tokens per batch).")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Interleaved rounds; each times --products.")
_PRODUCTS = flags.DEFINE_integer("products", 30, "Products timed per round.")
_THREADS = flags.DEFINE_integer("threads", 2, "PyTorch threads (TensorFlow uses all cores).")

# (inner, outer) of the projections: attention (384 -> 384), feed-forward in and out.
WIDTHS = ((384, 384), (384, 1536), (1536, 384))


def _seconds(product, count):
    product()  # warm up (oneDNN primitives, PyTorch's first call)
    start = time.perf_counter()
    for _ in range(count):
        product()
    return (time.perf_counter() - start) / count


def _products(tf, torch, tokens, inner, outer):
    """{"tf" | "torch": a function computing [tokens, inner] x [inner, outer]}, same values."""
    a, b = tf.random.normal([tokens, inner]), tf.random.normal([inner, outer])
    tf_product = tf.function(lambda: tf.matmul(a, b))
    torch_a, torch_b = torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy())
    return {"tf": lambda: tf_product().numpy(), "torch": lambda: torch_a @ torch_b}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf
    import torch

    torch.set_num_threads(_THREADS.value)
    print(f"TensorFlow {tf.__version__}, PyTorch {torch.__version__} ({_THREADS.value} threads)")
    print("| tokens x inner x outer | TensorFlow GFLOP/s | PyTorch GFLOP/s | TF / PyTorch |")
    print("|---|---:|---:|---:|")
    for tokens in map(int, _TOKENS.value):
        for inner, outer in WIDTHS:
            products = _products(tf, torch, tokens, inner, outer)
            rounds = {name: [] for name in products}
            for _ in range(_REPEATS.value):
                for name, product in products.items():
                    rounds[name].append(_seconds(product, _PRODUCTS.value))
            flops = 2 * tokens * inner * outer
            rate = {name: flops / statistics.median(times) / 1e9 for name, times in rounds.items()}
            print(f"| {tokens} x {inner} x {outer} | {rate['tf']:.0f} | {rate['torch']:.0f} "
                  f"| {rate['tf'] / rate['torch']:.2f} |", flush=True)


if __name__ == "__main__":
    app.run(main)
