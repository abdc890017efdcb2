"""The precision a recipe trains in: Keras' global mixed-precision policy, and models loaded in it.

    mixed_precision   "float32", "mixed_float16" (GPUs; Keras adds dynamic loss scaling) or
                      "mixed_bfloat16" (TPUs, Ampere and newer GPUs, recent CPUs). Variables
                      stay float32; the classifier, span labeler and tagger return float32
                      logits, and Keras computes losses in float32.

(Reduced-precision inference, a bfloat16 copy of a trained model, is
`kbert.models.precision`.)
"""

import contextlib

import keras
from absl import logging

from kbert import cpu_features
from kbert.tasks import configs

PRECISIONS = configs.PRECISIONS


def check(mixed_precision):
    """Raises ValueError on a name that is not one of `PRECISIONS`."""
    if mixed_precision not in PRECISIONS:
        raise ValueError(f"mixed_precision must be one of {', '.join(PRECISIONS)}, "
                         f"got {mixed_precision!r}")


def set_mixed_precision(policy):
    """Sets Keras' global dtype policy to `policy` (one of `PRECISIONS`); returns the old one.

    Models built afterwards compute in `policy`'s compute dtype with float32 variables; under
    "mixed_float16" `compile` wraps the optimizer in `keras.optimizers.LossScaleOptimizer`.
    """
    check(policy)
    if policy == "mixed_bfloat16" and cpu_features.emulates_bfloat16():
        logging.warning(
            "mixed_bfloat16 on a CPU without AVX512_BF16 or AMX and no GPU: TensorFlow emulates "
            "the bfloat16 matmuls, which is usually slower than float32 (BENCHMARKS.md)")
    previous = keras.config.dtype_policy().name
    keras.config.set_dtype_policy(policy)
    return previous


@contextlib.contextmanager
def mixed_precision_scope(policy):
    """`set_mixed_precision(policy)` for the `with` block, then the previous policy again."""
    previous = set_mixed_precision(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def load_in_precision(path, mixed_precision="float32"):
    """`keras.saving.load_model(path)` in `mixed_precision`, whatever policy it was saved in.

    A `.keras` file records the dtype policy of each model it holds; when that differs, the
    model is rebuilt from its config without them, under `mixed_precision` as the global
    policy (as a model built fresh in it), and the weights are copied in.
    """
    model = keras.saving.load_model(path)
    if model.dtype_policy.name == mixed_precision:
        return model
    with mixed_precision_scope(mixed_precision):
        rebuilt = type(model).from_config(_without_policies(model.get_config()))
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def _without_policies(config):
    # Drops every "dtype" entry that is a serialized DTypePolicy (the models' and their
    # encoders'), so that each takes the global policy.
    if isinstance(config, list):
        return [_without_policies(value) for value in config]
    if not isinstance(config, dict):
        return config
    return {key: _without_policies(value) for key, value in config.items()
            if not (key == "dtype" and isinstance(value, dict)
                    and "DTypePolicy" in str(value.get("class_name")))}
