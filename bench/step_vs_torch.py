"""kbert's training step against PyTorch's at the same shapes, one process per side.

The end-to-end runs (`bench/finetune.py`, `bench/ner.py`, `bench/squad.py`) mix the step with
everything around it (tracing, the data pipeline, batch widths, evaluation). This times the
step alone, MiniLM-shaped (6 layers, H=384, 12 heads, 30,522 word pieces; random weights and
ids: speed does not depend on the values), batch x width tokens, no padding:

  kbert  `BertClassifier.fit` on a dataset of [None, None] batches, as the recipes' length-
         grouped batches are traced, with `kbert.create_optimizer` (BERT's AdamW, global-norm
         clipping; --embedding_updates picks dense or sparse word rows)
  torch  transformers' `BertForSequenceClassification` (dropout 0.1, SDPA attention) with the
         Hugging Face Trainer's step on the CPU: `AdamW(fused=True)` (the Trainer's default
         with torch >= 2.8) with weight decay 0.01 off biases and LayerNorm, gradient clipping
         at norm 1, a linear schedule, `zero_grad(set_to_none=True)`

--precision=bfloat16 runs both sides in mixed bfloat16 (float32 weights): kbert under Keras'
"mixed_bfloat16" policy (`--mixed_precision`), PyTorch under `torch.autocast` on the CPU, as
the Trainer's `bf16=True` does.

Each side runs in its own child process (TensorFlow's and PyTorch's thread pools would share
the cores otherwise), warms up at the shape, then times --steps steps; the sides alternate for
--rounds rounds and the medians are compared.

  python -m bench.step_vs_torch --shapes=32x14,32x54,32x186
"""

import itertools
import json
import statistics
import sys
import time

from absl import app
from absl import flags

from bench import runs

_SHAPES = flags.DEFINE_list("shapes", ["32x14", "32x54", "32x186"],
                            "batch x width of each timed step.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Alternating rounds of both sides per shape.")
_STEPS = flags.DEFINE_integer("steps", 5, "Steps timed per round.")
_THREADS = flags.DEFINE_integer("threads", 2, "PyTorch threads (TensorFlow uses all cores).")
_EMBEDDING = flags.DEFINE_enum("embedding_updates", "sparse", ["dense", "sparse"],
                               "kbert's word-table update (the recipes' flag).")
_PRECISION = flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"],
                               "Both sides' precision (see above).")
_PARTS = flags.DEFINE_integer(
    "batch_parts", 1, "kbert's batch parts run side by side, TensorFlow's intra-op pool at one "
    "thread (the recipes' --cpu_batch_parts).")
_SIDE = flags.DEFINE_enum("side", None, ["kbert", "torch"],
                          "Internal: run one side in this process.")

LAYERS, HIDDEN, HEADS, INTERMEDIATE, VOCABULARY = 6, 384, 12, 1536, 30522
WARMUP = 3


def _step_timer():
    """A Keras callback timing the steps of one `fit`, first step begin to last step end."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.seconds = time.perf_counter() - self.start

    return StepTimer()


def kbert_fit(batch, width, precision, embedding_updates, batch_parts=1):
    """kbert's classifier, compiled as the recipes compile it, and a dataset repeating one
    batch x width batch; the model has run WARMUP steps on it."""
    import keras
    import numpy as np
    import tensorflow as tf

    import kbert
    from kbert.data import pipeline
    from kbert.tasks import optimization
    from kbert.tasks import strategies

    strategies.one_intra_op_thread_for(batch_parts)

    keras.utils.set_random_seed(0)
    if precision == "bfloat16":
        keras.config.set_dtype_policy("mixed_bfloat16")
    model = kbert.BertClassifier(
        kbert.BertEncoder(VOCABULARY, LAYERS, HEADS, HIDDEN, INTERMEDIATE), 2)
    model.compile(
        optimizer=optimization.create_optimizer(
            1e-4, 10_000, 1_000, sparse_embedding_updates=embedding_updates == "sparse"),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.batch_parts = batch_parts
    rng = np.random.default_rng(0)
    features = {"token_ids": rng.integers(1000, VOCABULARY, (batch, width)).astype("int32"),
                "segment_ids": np.zeros((batch, width), "int32"),
                "padding_mask": np.ones((batch, width), "int32")}
    labels = rng.integers(0, 2, batch).astype("int32")
    # A generator dataset: its element shapes are unknown, so `fit` traces the step for any
    # width, as it does on the recipes' padded batches; prefetched as the recipes do, with
    # tf.data's autotuning off (with it on, ending `fit` waits for the autotuning thread).
    spec = ({name: tf.TensorSpec([None, None], tf.int32) for name in features},
            tf.TensorSpec([None], tf.int32))
    dataset = pipeline.prefetched(tf.data.Dataset.from_generator(
        lambda: itertools.repeat((features, labels)), output_signature=spec))
    model.fit(dataset, steps_per_epoch=WARMUP, verbose=0)
    return model, dataset


def _kbert_seconds(batch, width, steps):
    model, dataset = kbert_fit(batch, width, _PRECISION.value, _EMBEDDING.value, _PARTS.value)
    timer = _step_timer()
    model.fit(dataset, steps_per_epoch=steps, verbose=0, callbacks=[timer])
    return timer.seconds / steps


def _torch_seconds(batch, width, steps):
    import torch
    import transformers

    torch.set_num_threads(_THREADS.value)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCABULARY, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=INTERMEDIATE, num_labels=2)
    model = transformers.BertForSequenceClassification(config).train()
    decay = [p for n, p in model.named_parameters() if "bias" not in n and "LayerNorm" not in n]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": rest, "weight_decay": 0.0}],
                                  lr=1e-4, eps=1e-6, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / 10_000)
    ids = torch.randint(1000, VOCABULARY, (batch, width))
    inputs = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
              "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, 2, (batch,))}

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=_PRECISION.value == "bfloat16"):
            loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(WARMUP):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def _child(side, batch, width):
    """Seconds per step of `side`, measured in a child process."""
    command = [sys.executable, "-m", "bench.step_vs_torch", f"--side={side}",
               f"--shapes={batch}x{width}", f"--steps={_STEPS.value}",
               f"--threads={_THREADS.value}", f"--embedding_updates={_EMBEDDING.value}",
               f"--precision={_PRECISION.value}", f"--batch_parts={_PARTS.value}"]
    return runs.child_result(command, cwd=runs.ROOT, env=runs.child_env())["seconds"]


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    shapes = [runs.batch_by_width(shape, "shapes") for shape in _SHAPES.value]
    if _SIDE.value:
        seconds = {"kbert": _kbert_seconds, "torch": _torch_seconds}[_SIDE.value]
        print(json.dumps({"seconds": seconds(*shapes[0], _STEPS.value)}))
        return
    print(f"precision: {_PRECISION.value}; kbert word rows: {_EMBEDDING.value}, batch parts: "
          f"{_PARTS.value}; PyTorch threads: {_THREADS.value}")
    print("| batch x width | kbert ms/step | PyTorch ms/step | PyTorch / kbert |")
    print("|---|---:|---:|---:|")
    for batch, width in shapes:
        times = {"kbert": [], "torch": []}
        for _ in range(_ROUNDS.value):
            for side in times:
                times[side].append(_child(side, batch, width))
        kbert_ms, torch_ms = (1000 * statistics.median(times[side]) for side in times)
        print(f"| {batch} x {width} | {kbert_ms:.0f} | {torch_ms:.0f} | "
              f"{torch_ms / kbert_ms:.2f} |", flush=True)


if __name__ == "__main__":
    app.run(main)
