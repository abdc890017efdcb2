"""How long `kbert.export_saved_model` takes, reloading what it wrote, and its first request.

Exports a classifier (of text pairs with `--text_pair`) and a CRF tagger (random weights,
MiniLM's real 30,522-piece vocab) alternately, `--exports` times in one process, reloads each
with `tf.saved_model.load` (as a server does) and sends its `serving_default` one request of
two texts (the first call optimises the graph); prints the median export, load and first-call
seconds and the SavedModel's size. To compare two checkouts, run this once on each,
alternating (`PYTHONPATH=<checkout>`).

  python -m bench.export_time --shape=tiny --exports=4    # 1 layer, hidden 12
  python -m bench.export_time --shape=minilm --exports=2  # 6 layers, hidden 384
  python -m bench.export_time --shape=tiny --exports=4 --text_pair  # pairs: the packing
"""

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

from bench import runs

_SHAPES = {
    "tiny": dict(hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
                 intermediate_size=20),
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536),
}
_SHAPE = flags.DEFINE_enum("shape", "tiny", sorted(_SHAPES), "The encoder's size.")
_EXPORTS = flags.DEFINE_integer("exports", 4, "Exports (and reloads) to time.", lower_bound=1)
_TEXT_PAIR = flags.DEFINE_bool("text_pair", False, "The classifier serves text pairs.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import keras
    import tensorflow as tf

    import kbert
    from kbert.models.classifier import BertClassifier
    from kbert.models.token_classifier import BertTokenClassifier

    config = kbert.BertConfig(vocab_size=30522, hidden_act="gelu", max_position_embeddings=512,
                              type_vocab_size=2, **_SHAPES[_SHAPE.value])
    keras.utils.set_random_seed(1)
    exports, loads, first_calls, sizes = [], [], [], []
    texts = tf.constant(["The quick brown fox jumps.", "Ünïcödé café 東京"])
    with tempfile.TemporaryDirectory() as work:
        for i in range(_EXPORTS.value):
            encoder = kbert.BertEncoder(**config.encoder_kwargs())
            model = (BertClassifier(encoder, num_classes=3) if i % 2 == 0
                     else BertTokenClassifier(encoder, num_labels=5, use_crf=True))
            path = os.path.join(work, str(i))
            start = time.perf_counter()
            pair = _TEXT_PAIR.value and i % 2 == 0
            kbert.export_saved_model(model, path, runs.minilm_vocab(), max_seq_length=64,
                                     text_pair=pair)
            exports.append(time.perf_counter() - start)
            start = time.perf_counter()
            serve = tf.saved_model.load(path).signatures["serving_default"]
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            serve(**({"text_a": texts, "text_b": texts[::-1]} if pair else {"text": texts}))
            first_calls.append(time.perf_counter() - start)
            sizes.append(sum(os.path.getsize(os.path.join(d, f))
                             for d, _, files in os.walk(path) for f in files))
    runs.report({"shape": _SHAPE.value, "text_pair": _TEXT_PAIR.value, "kbert": kbert.__file__,
                 "median_export_seconds": round(statistics.median(exports), 2),
                 "median_load_seconds": round(statistics.median(loads), 2),
                 "median_first_call_seconds": round(statistics.median(first_calls), 2),
                 "export_seconds": [round(t, 2) for t in exports],
                 "load_seconds": [round(t, 2) for t in loads],
                 "first_call_seconds": [round(t, 2) for t in first_calls],
                 "bytes": sizes}, _OUTPUT.value, indent=2)


if __name__ == "__main__":
    app.run(main)
