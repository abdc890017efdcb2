"""One fine-tuning step of BertClassifier, with and without each of kbert's step optimizations.

Times `train_on_batch` (forward, backward, BERT's AdamW update) on random token ids of one
shape, interleaved, so each optimization is measured on its own against the same model:

  kbert            what the recipes run
  stock_update     Keras' own AdamW update (a dozen element-wise ops per weight) instead of
                   kbert's XLA-compiled one
  full_last_layer  the last layer computed at every position, as `encoder(x)["pooled_output"]`,
                   instead of for [CLS] alone
  sparse_embedding `create_optimizer(..., sparse_embedding_updates=True)`: AdamW on the word
                   rows the batch used instead of the whole table (lazy rows)
  sparse_keras_lookup  sparse_embedding with the word rows read through Keras' `Embedding`
                   (which reads the whole table, a copy once sparse updates have written it)
                   instead of kbert's resource gather
  packed           the same examples packed first-fit into rows of --pack_length
                   (`kbert.data.packing`, `BertEncoder(packed=True)`) instead of one padded row
                   each

Example lengths are drawn from [seq_length / 2, seq_length] (a length bucket); unpacked
variants pad them to --seq_length. --breakdown instead times the pieces of kbert's step
(forward, forward + backward, the AdamW update dense and sparse, `train_on_batch`).

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
_PACK = flags.DEFINE_integer("pack_length", 64, "Row length of the packed variant.")
_BREAKDOWN = flags.DEFINE_bool("breakdown", False, "Time the pieces of kbert's step.")

SHAPES = {"minilm": (6, 384, 12, 1536), "base": (12, 768, 12, 3072)}  # layers, hidden, heads, ff


def _batch(rng):
    """(unpacked inputs, labels, packed inputs, packed labels) of one batch."""
    from kbert.data import packing

    low = max(2, _SEQ.value // 2)
    lengths = rng.integers(low, _SEQ.value + 1, _BATCH.value)
    token_ids = [rng.integers(1000, 30000, n).astype("int32") for n in lengths]
    segment_ids = [np.zeros(n, "int32") for n in lengths]
    y = rng.integers(0, 2, _BATCH.value)
    shape = (_BATCH.value, _SEQ.value)
    x = {"token_ids": np.zeros(shape, "int32"), "segment_ids": np.zeros(shape, "int32"),
         "padding_mask": np.zeros(shape, "int32")}
    for i, ids in enumerate(token_ids):
        x["token_ids"][i, :len(ids)] = ids
        x["padding_mask"][i, :len(ids)] = 1
    packed = packing.pack(token_ids, segment_ids, y, _PACK.value)
    return x, y, packed.features, packed.labels


def _variants():
    import keras

    import kbert
    from kbert.data import packing
    from kbert.layers.embeddings import BertEmbeddings
    from kbert.tasks import optimization

    class StockUpdateAdamW(optimization.AdamW):
        def _backend_apply_gradients(self, grads, trainable_variables):
            return keras.optimizers.AdamW._backend_apply_gradients(
                self, grads, trainable_variables)

    class FullLastLayerEncoder(kbert.BertEncoder):
        def pooled_output(self, inputs, cls_positions=None):
            return self(inputs)["pooled_output"]

    class KerasLookupEmbeddings(BertEmbeddings):
        def _word_embeddings(self, token_ids):
            return self.token_embedding(token_ids)

    def keras_lookup(model):  # before the first step traces the call
        model.encoder.embeddings.__class__ = KerasLookupEmbeddings
        return model

    def optimizer(cls=optimization.AdamW, sparse=False):
        schedule = optimization.WarmupLinearDecay(1e-4, 1000, 100)
        return cls(learning_rate=schedule, weight_decay=0.01, beta_1=0.9, beta_2=0.999,
                   epsilon=1e-6, global_clipnorm=1.0, sparse_embedding_updates=sparse)

    def classifier(encoder_cls=kbert.BertEncoder, optimizer_cls=optimization.AdamW,
                   sparse=False, packed=False):
        keras.utils.set_random_seed(0)
        layers, hidden, heads, ff = SHAPES[_CONFIG.value]
        encoder = encoder_cls(30522, layers, heads, hidden, ff, packed=packed)
        model = kbert.BertClassifier(encoder, 2)
        model.compile(optimizer=optimizer(optimizer_cls, sparse),
                      loss=keras.losses.SparseCategoricalCrossentropy(
                          from_logits=True, ignore_class=packing.PAD_LABEL))
        return model

    return {"kbert": (classifier(), False),
            "stock_update": (classifier(optimizer_cls=StockUpdateAdamW), False),
            "full_last_layer": (classifier(encoder_cls=FullLastLayerEncoder), False),
            "sparse_embedding": (classifier(sparse=True), False),
            "sparse_keras_lookup": (keras_lookup(classifier(sparse=True)), False),
            "packed": (classifier(packed=True), True)}


def _median_ms(function, steps=5):
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _breakdown(x, y):
    """Median ms of each piece of kbert's step, interleaved over --repeats rounds."""
    import keras
    import tensorflow as tf

    import kbert
    from kbert.tasks import optimization

    layers, hidden, heads, ff = SHAPES[_CONFIG.value]
    keras.utils.set_random_seed(0)
    model = kbert.BertClassifier(kbert.BertEncoder(30522, layers, heads, hidden, ff), 2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimization.create_optimizer(1e-4, 1000, 100), loss=loss_fn)
    sparse = optimization.create_optimizer(1e-4, 1000, 100, sparse_embedding_updates=True)
    x = {k: tf.constant(v) for k, v in x.items()}
    y = tf.constant(y)
    weights = model.trainable_variables

    @tf.function
    def forward():
        return loss_fn(y, model(x, training=True))

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return tape.gradient(loss, weights)

    grads = gradients()
    dense_update = tf.function(lambda: model.optimizer.apply(grads, weights))
    sparse_update = tf.function(lambda: sparse.apply(grads, weights))
    pieces = {"forward (loss)": forward, "forward + backward": gradients,
              "AdamW update, dense": dense_update, "AdamW update, sparse rows": sparse_update,
              "train_on_batch (whole step)": lambda: model.train_on_batch(x, y)}
    for piece in pieces.values():  # trace and warm up
        for _ in range(2):
            piece()
    rounds = {name: [] for name in pieces}
    for _ in range(_REPEATS.value):
        for name, piece in pieces.items():
            rounds[name].append(_median_ms(piece))
    print(f"| piece | ms (median of {_REPEATS.value}) | min |")
    print("|---|---:|---:|")
    for name, values in rounds.items():
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} |")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    x, y, packed_x, packed_y = _batch(np.random.default_rng(0))
    if _BREAKDOWN.value:
        return _breakdown(x, y)
    print(f"packed: {_BATCH.value} examples in {packed_x['token_ids'].shape} rows "
          f"({int(x['padding_mask'].sum())} real tokens; {x['token_ids'].size} unpacked)")
    steps = {}
    for name, (model, packed) in _variants().items():
        inputs = (packed_x, packed_y) if packed else (x, y)
        steps[name] = lambda model=model, inputs=inputs: model.train_on_batch(*inputs)
        for _ in range(3):  # trace and warm up
            steps[name]()
    rounds = {name: [] for name in steps}
    for _ in range(_REPEATS.value):
        for name, step in steps.items():
            rounds[name].append(_median_ms(step))
    base = statistics.median(rounds["kbert"])
    print(f"| variant | ms/step (median of {_REPEATS.value}) | min | vs kbert |")
    print("|---|---:|---:|---:|")
    for name, values in rounds.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.0f} | {min(values):.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    app.run(main)
