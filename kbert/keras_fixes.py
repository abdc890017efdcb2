"""Works around a Keras 3.15 bug that makes every `.keras` and `.weights.h5` save and load slow.

Keras' saving walks every object of a model and asks `saving_lib.get_attr_skipset(kind)` which
attributes to skip. The answer is meant to be computed once per session (it builds a fresh
`Layer()` and lists its `dir()`, ~1 ms), but the function reads its cache under one key
(`saving_attr_skiplist_<kind>`) and writes it under another (`saving_attr_skipset_<kind>`), so
it is computed again for every layer, on every save and load. A BERT-base classifier on the
AMD AVX-512 VM (2026-11-30, `python -m bench.keras_saving`, medians of 5, two runs):
`save_weights` (an epoch backup) 1.20 and 1.23 s with Keras' own, 0.72 and 0.84 s mended;
`save` 1.28 and 1.64 s, 1.06 and 1.17 s (BENCHMARKS.md).
"""

import functools


def install():
    """Makes `get_attr_skipset` hit its cache, if this Keras misses it; idempotent."""
    from keras.src.backend.common import global_state
    from keras.src.saving import saving_lib

    compute = saving_lib.get_attr_skipset
    if getattr(compute, "_kbert_cached", False):
        return
    compute("Layer")
    if global_state.get_global_attribute("saving_attr_skiplist_Layer") is not None:
        return  # this Keras finds its own cache

    @functools.wraps(compute)  # `__wrapped__` is Keras' own (bench/keras_saving.py times both)
    def get_attr_skipset(obj_type):
        key = f"saving_attr_skiplist_{obj_type}"  # the key Keras reads
        skipset = global_state.get_global_attribute(key)
        if skipset is None:
            skipset = compute(obj_type)
            global_state.set_global_attribute(key, skipset)
        return skipset

    get_attr_skipset._kbert_cached = True
    saving_lib.get_attr_skipset = get_attr_skipset
