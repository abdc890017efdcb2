"""The start of `fit` on a kbert task model built outside a distribution strategy.

Keras builds the optimizer and the compiled loss and metrics inside the first trace of the
train step when the model has no strategy, and TensorFlow then traces the step a second time.
`BertTask.fit` (and `evaluate`) builds them first. This times a first `fit` of a few steps,
tracing included, of a MiniLM-shaped `BertClassifier` (random weights, `metrics=["accuracy"]`,
BERT's AdamW), each side in a fresh process, alternating, and counts the traces of the train
step:

  kbert            `BertTask.fit`: optimizer, loss and metrics built before the first trace,
                   the train step optimised in one Grappler pass without its layout and
                   memory optimisers and TFG passes (`kbert.graph_passes`), the AdamW
                   update's XLA programs compiled in a thread as the trace ends
                   (`kbert.tasks.fused_adamw`)
  one_pass         `BertTask.fit` with one Grappler pass of every optimiser, the update
                   compiled when the step first runs (kbert at 5563bef, 2026-11-30)
  two_passes       `BertTask.fit` with TensorFlow's two Grappler passes (kbert before
                   811632a, 2026-11-30)
  optimizer_only   the optimizer built first, then `keras.Model.fit` (kbert before 2026-11-28)
  keras            `keras.Model.fit` alone: everything built inside the first trace

--batch_parts sets the model's `batch_parts` (and TensorFlow's intra-op pool to one thread,
as the recipes' --cpu_batch_parts does) on every side.

  python -m bench.fit_start --rounds=3
"""

import contextlib
import json
import statistics
import sys
import time

from absl import app
from absl import flags

from bench import runs

_ROUNDS = flags.DEFINE_integer("rounds", 3, "Fresh processes per side.")
_STEPS = flags.DEFINE_integer("steps", 3, "Steps of the timed fit.")
_SEQ = flags.DEFINE_integer("seq_length", 64, "Tokens per example.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Examples per step.")
SIDES = ["kbert", "one_pass", "two_passes", "optimizer_only", "keras"]
_SIDES = flags.DEFINE_list("sides", SIDES, "Sides to time, in this order each round.")
flags.register_validator(_SIDES, lambda names: set(names) <= set(SIDES),
                         message=f"--sides: expected names from {', '.join(SIDES)}")
_PARTS = flags.DEFINE_integer("batch_parts", 1, "The model's batch parts (see above).")
_SIDE = flags.DEFINE_enum("side", None, SIDES, "Internal: time one side here.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def time_one_side(side):
    import keras
    import numpy as np
    import tensorflow as tf
    from keras.src.backend.tensorflow import trainer

    import kbert
    from kbert import graph_passes
    from kbert.tasks import fused_adamw
    from kbert.tasks import strategies

    strategies.one_intra_op_thread_for(_PARTS.value)
    if side != "kbert":
        fused_adamw.compile_in_background = lambda signatures: None
    if side == "one_pass":
        graph_passes._TRAINING_STEP = {  # the pass count alone
            "meta_optimizer_iterations": graph_passes._TRAINING_STEP["meta_optimizer_iterations"]}
    if side == "two_passes":
        graph_passes.training_step_passes = contextlib.nullcontext
    traces = []
    train_step = trainer.TensorFlowTrainer.train_step
    trainer.TensorFlowTrainer.train_step = lambda self, data: (
        traces.append(1), train_step(self, data))[1]
    keras.utils.set_random_seed(0)
    encoder = kbert.BertEncoder(vocabulary_size=30522, num_layers=6, num_heads=12,
                                hidden_dim=384, intermediate_dim=1536,
                                max_sequence_length=512)
    model = kbert.BertClassifier(encoder, 2)
    model.batch_parts = _PARTS.value
    model.compile(optimizer=kbert.create_optimizer(1e-4, 100, 10),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    rng = np.random.default_rng(0)
    shape = (_BATCH.value, _SEQ.value)
    inputs = {"token_ids": rng.integers(1000, 30000, shape).astype("int32"),
              "segment_ids": np.zeros(shape, "int32"), "padding_mask": np.ones(shape, "int32")}
    dataset = tf.data.Dataset.from_tensors((inputs, np.zeros(_BATCH.value, "int32")))
    dataset = dataset.repeat(_STEPS.value)
    start = time.perf_counter()
    if side in ("kbert", "one_pass", "two_passes"):
        model.fit(dataset, epochs=1, verbose=0)
    else:
        if side == "optimizer_only":
            model.optimizer.build(model.trainable_variables)
        keras.Model.fit(model, dataset, epochs=1, verbose=0)
    return {"seconds": time.perf_counter() - start, "train_step_traces": len(traces)}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if _SIDE.value:
        print(json.dumps(time_one_side(_SIDE.value)))  # the last line: runs.child_result
        return
    results = {side: [] for side in _SIDES.value}
    for _ in range(_ROUNDS.value):
        for side in results:
            results[side].append(runs.child_result(
                [sys.executable, "-m", "bench.fit_start", f"--side={side}",
                 f"--steps={_STEPS.value}", f"--seq_length={_SEQ.value}",
                 f"--batch_size={_BATCH.value}", f"--batch_parts={_PARTS.value}"]))
    summary = {side: {"median_seconds": round(statistics.median(r["seconds"] for r in rows), 2),
                      "seconds": [round(r["seconds"], 2) for r in rows],
                      "train_step_traces": rows[0]["train_step_traces"]}
               for side, rows in results.items()}
    summary["settings"] = {"steps": _STEPS.value, "batch_size": _BATCH.value,
                           "seq_length": _SEQ.value, "batch_parts": _PARTS.value,
                           "shape": "MiniLM (6 x 384)"}
    runs.report(summary, _OUTPUT.value, indent=2)


if __name__ == "__main__":
    app.run(main)
