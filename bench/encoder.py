"""Encoder throughput: kbert vs keras-nlp BertBackbone vs Hugging Face BertModel (PyTorch CPU).

Forward (inference) and forward+backward (a training step without the optimizer update) of
the same architecture, float32, interleaved runs in a rotating order (each timed step after
an untimed one), median of at least --repeats (and of --min_seconds per implementation). The
fp32 matmul peak of the machine is measured in the same run (the best of ten 4096^3
tf.matmul), and each model's achieved GFLOP/s is reported as a fraction of it. With --memory,
each (implementation, shape) instead runs forward in a fresh process and its peak RSS is
reported.

  python bench/encoder.py --configs=base,minilm --seq_lengths=32,128 --batch_sizes=1,8,32
Needs the bench extra: pip install torch==2.13.0 'transformers>=5' (and matplotlib for --plot).
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
from absl import app
from absl import flags

_CONFIGS = flags.DEFINE_list("configs", ["minilm", "base"], "Model shapes: base, minilm.")
_SEQS = flags.DEFINE_list("seq_lengths", ["32", "128", "512"], "Sequence lengths.")
_BATCHES = flags.DEFINE_list("batch_sizes", ["1", "8", "32"], "Batch sizes.")
_MODES = flags.DEFINE_list("modes", ["forward", "train"], "forward and/or train.")
_IMPLS = flags.DEFINE_list("impls", ["kbert", "kbert_xla", "keras_nlp", "torch"],
                           "Implementations to time.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Least timed runs per implementation and shape.")
_MIN_SECONDS = flags.DEFINE_float(
    "min_seconds", 3.0, "Keep repeating until each implementation has run this long, so short "
    "steps get enough samples for a stable median on a noisy machine.")
_MAX_TOKENS = flags.DEFINE_integer("max_train_tokens", 4096,
                                   "Skip train steps with batch*seq above this (time budget).")
_MEMORY = flags.DEFINE_bool("memory", False, "Measure peak RSS per shape in subprocesses.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")
_PLOT = flags.DEFINE_string("plot", None, "Write a PNG of examples/s vs sequence length here "
                            "(needs matplotlib).")
_ONE = flags.DEFINE_string("one", None, "internal: impl,config,seq,batch for --memory")

SHAPES = {  # layers, hidden, heads, intermediate
    "base": (12, 768, 12, 3072),
    "minilm": (6, 384, 12, 1536),
}
VOCAB = 30522
SETTLE_BELOW_SECONDS = 1.0


def flops(config, batch, seq):
    """Forward FLOPs of the encoder stack (matmuls only; embeddings and softmax excluded)."""
    layers, hidden, _, inter = SHAPES[config]
    tokens = batch * seq
    per_layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * inter) + 4 * tokens * seq * hidden
    return layers * per_layer + 2 * batch * hidden * hidden


def matmul_peak_gflops(n=4096, repeats=10):
    """The best of `repeats` n x n x n tf.matmul runs, in GFLOP/s."""
    import tensorflow as tf
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n))
    f = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    f().numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f().numpy()
        times.append(time.perf_counter() - start)
    return 2 * n ** 3 / min(times) / 1e9


def make_runner(impl, config, mode, batch, seq):
    """Returns a zero-argument function that runs one step and blocks until it is done."""
    layers, hidden, heads, inter = SHAPES[config]
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, (batch, seq)).astype("int32")
    if impl == "torch":
        import torch
        import transformers
        torch.manual_seed(0)
        model = transformers.BertModel(transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=inter, hidden_act="gelu_new",
            attn_implementation="sdpa"))
        x = {"input_ids": torch.from_numpy(ids.astype("int64")),
             "token_type_ids": torch.zeros((batch, seq), dtype=torch.long),
             "attention_mask": torch.ones((batch, seq), dtype=torch.long)}
        if mode == "forward":
            model.eval()

            def run():
                with torch.inference_mode():
                    model(**x).last_hidden_state.sum().item()
        else:
            model.train()

            def run():
                model.zero_grad(set_to_none=True)
                loss = model(**x).last_hidden_state.mean()
                loss.backward()
        return run

    import keras
    import keras_hub
    import tensorflow as tf

    import kbert
    keras.utils.set_random_seed(0)
    kwargs = dict(vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
                  intermediate_dim=inter, max_sequence_length=512)
    if impl == "keras_nlp":
        model = keras_hub.models.BertBackbone(**kwargs)
    else:
        model = kbert.BertEncoder(**kwargs)
    x = {"token_ids": tf.constant(ids), "segment_ids": tf.zeros((batch, seq), "int32"),
         "padding_mask": tf.ones((batch, seq), "int32")}
    jit = impl == "kbert_xla"
    if mode == "forward":
        step = tf.function(lambda: model(x, training=False)["sequence_output"], jit_compile=jit)
    else:
        def train_step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x, training=True)["sequence_output"])
            grads = tape.gradient(loss, model.trainable_variables)
            # Embedding gradients stay sparse (IndexedSlices), as an optimizer would take them.
            return [g.values if isinstance(g, tf.IndexedSlices) else g
                    for g in grads if g is not None]  # the pooler gets none
        step = tf.function(train_step, jit_compile=jit)
    return lambda: tf.nest.map_structure(lambda t: t.numpy(), step())


def time_shape(config, mode, batch, seq, impls, repeats, min_seconds):
    """Median seconds per step of each implementation: interleaved rounds, at least `repeats`
    of them and until every implementation has run `min_seconds`."""
    runners = {impl: make_runner(impl, config, mode, batch, seq) for impl in impls}
    for run in runners.values():  # trace / compile / warm up
        run()
        run()
    times = {impl: [] for impl in impls}
    order = list(impls)
    while (min(map(len, times.values())) < repeats
           or min(map(sum, times.values())) < min_seconds):
        # Interleaved, so machine noise hits every implementation alike, and rotated, so each
        # follows every other equally often.
        for impl in order:
            # A library's worker threads keep spinning on the cores for a few ms after its step
            # (PyTorch's OpenMP pool does), slowing whichever implementation runs next by up
            # to 40% at batch 1: an untimed step first absorbs that. Skipped for steps so long
            # that a few ms do not matter.
            if not times[impl] or times[impl][-1] < SETTLE_BELOW_SECONDS:
                runners[impl]()
            start = time.perf_counter()
            runners[impl]()
            times[impl].append(time.perf_counter() - start)
        order = order[1:] + order[:1]
    return {impl: statistics.median(t) for impl, t in times.items()}


def write_plot(results, path):
    """Examples/s vs sequence length, one line per implementation: a panel per mode, model
    shape and batch size (log scales)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    rows = results["rows"]
    panels = sorted({(r["mode"], r["config"], r["batch"]) for r in rows})
    columns = sorted({batch for _, _, batch in panels})
    lines = sorted({(mode, config) for mode, config, _ in panels})
    figure, axes = pyplot.subplots(len(lines), len(columns), squeeze=False,
                                   figsize=(4 * len(columns), 3 * len(lines)))
    for (mode, config, batch) in panels:
        axis = axes[lines.index((mode, config))][columns.index(batch)]
        shape = [r for r in rows if (r["mode"], r["config"], r["batch"]) == (mode, config, batch)]
        for impl in _IMPLS.value:
            points = sorted((r["seq"], r[f"{impl}_ex_per_s"]) for r in shape
                            if f"{impl}_ex_per_s" in r)
            axis.plot(*zip(*points, strict=True), marker="o", label=impl)
        axis.set(title=f"{config} {mode}, batch {batch}", xscale="log", yscale="log",
                 xlabel="sequence length", ylabel="examples/s")
        axis.minorticks_off()
        axis.set_xticks(sorted({r["seq"] for r in shape}),
                        labels=[str(s) for s in sorted({r["seq"] for r in shape})])
    axes[0][0].legend()
    figure.suptitle(f"Encoder throughput, {results['cpus']} CPUs, {results['date']}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def peak_rss_mb(impl, config, seq, batch):
    result = subprocess.run(
        [sys.executable, __file__, f"--one={impl},{config},{seq},{batch}"],
        capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def write_results(results):
    """Writes --output (if set) under a temporary name, then renames it: after every row, so an
    interrupted sweep keeps the rows it finished."""
    if _OUTPUT.value:
        with open(_OUTPUT.value + ".tmp", "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        os.replace(_OUTPUT.value + ".tmp", _OUTPUT.value)


def main(argv):
    del argv
    if _ONE.value:
        impl, config, seq, batch = _ONE.value.split(",")
        run = make_runner(impl, config, "forward", int(batch), int(seq))
        run()
        run()
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return
    shapes = [(c, int(s), int(b)) for c in _CONFIGS.value for s in _SEQS.value
              for b in _BATCHES.value]
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "rows": []}
    if _MEMORY.value:
        for config, seq, batch in shapes:
            row = {"config": config, "seq": seq, "batch": batch}
            row.update({f"{impl}_peak_rss_mb": peak_rss_mb(impl, config, seq, batch)
                        for impl in _IMPLS.value})
            print(json.dumps(row), flush=True)
            results["rows"].append(row)
            write_results(results)
    else:
        peak = matmul_peak_gflops()
        results["matmul_peak_gflops"] = peak
        print(f"fp32 matmul peak: {peak:.1f} GFLOP/s", flush=True)
        for mode in _MODES.value:
            for config, seq, batch in shapes:
                if mode == "train" and batch * seq > _MAX_TOKENS.value:
                    continue
                seconds = time_shape(config, mode, batch, seq, _IMPLS.value, _REPEATS.value,
                                     _MIN_SECONDS.value)
                work = flops(config, batch, seq) * (3 if mode == "train" else 1)
                row = {"mode": mode, "config": config, "seq": seq, "batch": batch}
                for impl, s in seconds.items():
                    row[f"{impl}_ex_per_s"] = round(batch / s, 2)
                    row[f"{impl}_peak_fraction"] = round(work / s / 1e9 / peak, 3)
                print(json.dumps(row), flush=True)
                results["rows"].append(row)
                write_results(results)
    write_results(results)
    if _PLOT.value and not _MEMORY.value:
        write_plot(results, _PLOT.value)


if __name__ == "__main__":
    app.run(main)
