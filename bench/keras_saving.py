"""Keras saving and loading with and without `kbert.keras_fixes` (Keras' skip-set cache).

Times `save_weights` (a `.weights.h5`, as the recipes' epoch backups), `save` (a `.keras`, as
their `model.keras`) and `keras.saving.load_model` of a BERT classifier, alternating Keras'
own `get_attr_skipset` with kbert's mended one in one process, `--repeats` times each:

    python -m bench.keras_saving --sizes=tiny,base --repeats=5

Prints one JSON line per size and path: the median and range of each, in seconds.
"""

import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

_SIZES = flags.DEFINE_list("sizes", ["tiny", "base"], "Model sizes: tiny (1 x 12), base.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs of each operation and path.")

SIZES = {"tiny": dict(hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
                      intermediate_size=20),
         "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072)}


def _timed(function, *args):
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def main(argv):
    del argv
    import keras
    from keras.src.saving import saving_lib

    import kbert

    mended = saving_lib.get_attr_skipset
    if not getattr(mended, "_kbert_cached", False):
        raise SystemExit("this Keras caches its skip sets itself: nothing to compare")
    own = mended.__wrapped__
    with tempfile.TemporaryDirectory(prefix="kbert_saving_") as directory:
        for size in _SIZES.value:
            config = kbert.BertConfig(vocab_size=30522, **SIZES[size])
            keras.utils.set_random_seed(0)
            model = kbert.BertClassifier(kbert.BertEncoder(**config.encoder_kwargs()), 2)
            weights = os.path.join(directory, f"{size}.weights.h5")
            saved = os.path.join(directory, f"{size}.keras")
            times = {path: {"save_weights": [], "save": [], "load_model": []}
                     for path in ("keras", "kbert")}
            for _ in range(_REPEATS.value + 1):  # the first round warms the file cache: not kept
                for path, function in (("keras", own), ("kbert", mended)):
                    saving_lib.get_attr_skipset = function
                    keras.backend.clear_session(free_memory=False)  # no cached skip set
                    round_times = {"save_weights": _timed(model.save_weights, weights),
                                   "save": _timed(model.save, saved),
                                   "load_model": _timed(keras.saving.load_model, saved)}
                    for name, seconds in round_times.items():
                        times[path][name].append(seconds)
            saving_lib.get_attr_skipset = mended
            for path, operations in times.items():
                print(json.dumps({"size": size, "path": path, **{
                    name: {"median": round(statistics.median(values[1:]), 3),
                           "min": round(min(values[1:]), 3), "max": round(max(values[1:]), 3)}
                    for name, values in operations.items()}}))


if __name__ == "__main__":
    app.run(main)
