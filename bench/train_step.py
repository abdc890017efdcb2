"""One fine-tuning step of BertClassifier, with and without each of kbert's step optimizations.

Times `train_on_batch` (forward, backward, BERT's AdamW update) on random token ids of one
shape, interleaved, so each optimization is measured on its own against the same model:

  kbert            what the recipes run
  stock_update     Keras' own AdamW update (a dozen element-wise ops per weight) instead of
                   kbert's XLA-compiled one
  full_last_layer  the last layer computed at every position, as `encoder(x)["pooled_output"]`,
                   instead of for [CLS] alone

  python -m bench.train_step --config=minilm --batch_size=32 --seq_length=18
"""

import statistics
import time

import numpy as np
from absl import app
from absl import flags

_CONFIG = flags.DEFINE_enum("config", "minilm", ["minilm", "base"], "Model shape.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Examples per step.")
_SEQ = flags.DEFINE_integer("seq_length", 18, "Tokens per example (SST-2 batches: ~18).")
_REPEATS = flags.DEFINE_integer("repeats", 8, "Interleaved rounds; each times 5 steps.")

SHAPES = {"minilm": (6, 384, 12, 1536), "base": (12, 768, 12, 3072)}  # layers, hidden, heads, ff


def _variants():
    import keras

    import kbert
    from kbert.tasks import optimization

    class StockUpdateAdamW(optimization.AdamW):
        def _backend_apply_gradients(self, grads, trainable_variables):
            return keras.optimizers.AdamW._backend_apply_gradients(
                self, grads, trainable_variables)

    class FullLastLayerEncoder(kbert.BertEncoder):
        def pooled_output(self, inputs):
            return self(inputs)["pooled_output"]

    def optimizer(cls=optimization.AdamW):
        schedule = optimization.WarmupLinearDecay(1e-4, 1000, 100)
        return cls(learning_rate=schedule, weight_decay=0.01, beta_1=0.9, beta_2=0.999,
                   epsilon=1e-6, global_clipnorm=1.0)

    def classifier(encoder_cls=kbert.BertEncoder, optimizer_cls=optimization.AdamW):
        keras.utils.set_random_seed(0)
        layers, hidden, heads, ff = SHAPES[_CONFIG.value]
        model = kbert.BertClassifier(encoder_cls(30522, layers, heads, hidden, ff), 2)
        model.compile(optimizer=optimizer(optimizer_cls),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    return {"kbert": classifier(),
            "stock_update": classifier(optimizer_cls=StockUpdateAdamW),
            "full_last_layer": classifier(encoder_cls=FullLastLayerEncoder)}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    rng = np.random.default_rng(0)
    shape = (_BATCH.value, _SEQ.value)
    x = {"token_ids": rng.integers(1000, 30000, shape).astype("int32"),
         "segment_ids": np.zeros(shape, "int32"), "padding_mask": np.ones(shape, "int32")}
    y = rng.integers(0, 2, _BATCH.value)
    models = _variants()
    for model in models.values():
        for _ in range(3):  # trace and warm up
            model.train_on_batch(x, y)
    rounds = {name: [] for name in models}
    for _ in range(_REPEATS.value):
        for name, model in models.items():
            times = []
            for _ in range(5):
                start = time.perf_counter()
                model.train_on_batch(x, y)
                times.append(time.perf_counter() - start)
            rounds[name].append(1000 * statistics.median(times))
    base = statistics.median(rounds["kbert"])
    print(f"| variant | ms/step (median of {_REPEATS.value}) | min | vs kbert |")
    print("|---|---:|---:|---:|")
    for name, values in rounds.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.0f} | {min(values):.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    app.run(main)
