"""Reduced-precision inference: a copy of a model that computes in bfloat16 or float16."""

import keras

# Compute dtype -> the Keras mixed-precision policy that keeps float32 variables.
_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def with_compute_dtype(model, compute_dtype):
    """A copy of `model` that computes in `compute_dtype`, with the same float32 weights.

    The copy is rebuilt from `model`'s config with every layer's dtype policy set to Keras'
    mixed policy (`"mixed_bfloat16"` for bfloat16), then given `model`'s weights, so the
    variables stay float32 and matmuls, GELU and softmax run in the reduced dtype; layers that
    pin float32 (the classifier's logits, LayerNorm statistics) keep it. On a CPU with
    AVX512_BF16 or AMX, oneDNN runs the bfloat16 matmuls natively; elsewhere TensorFlow
    emulates them, which is correct but usually slower than float32.

    Args:
        model: a kbert model (`BertEncoder`, `BertClassifier`, `BertSpanLabeler`,
            `BertTokenClassifier`, `BertPretrainer`).
        compute_dtype: str. "float32" (returns `model` itself), "bfloat16" or "float16".

    Returns:
        keras.Model of the same class, for `predict` or `kbert.export_saved_model`.
    """
    if compute_dtype not in _POLICIES:
        raise ValueError(f"compute_dtype must be one of {sorted(_POLICIES)}, got "
                         f"{compute_dtype!r}")
    if compute_dtype == "float32":
        return model
    config = _with_policy(keras.saving.serialize_keras_object(model), _POLICIES[compute_dtype])
    copy = keras.saving.deserialize_keras_object(config)
    copy.set_weights(model.get_weights())
    return copy


def _with_policy(config, policy):
    """`config` with each float32 DTypePolicy entry, at any depth, replaced by `policy`."""
    if isinstance(config, dict):
        if config.get("class_name") == "DTypePolicy" and config["config"]["name"] == "float32":
            return dict(config, config={"name": policy})
        return {key: _with_policy(value, policy) for key, value in config.items()}
    if isinstance(config, list):
        return [_with_policy(value, policy) for value in config]
    return config
