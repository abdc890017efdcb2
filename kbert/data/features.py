"""TFRecord schemas with Google's feature names, their parsers, and the one rename to model inputs.

Each schema maps a feature name to `FeatureSpec(dtype, length)`; `length` is a fixed size or
the name of a dimension given when the records are written or read (`max_seq_length`). The
writer (`kbert.data.records`), the parser here and the `*_meta.json` sidecar all read the same
dict, so the on-disk format is written down exactly once.
"""

import typing

import tensorflow as tf


class FeatureSpec(typing.NamedTuple):
    """One fixed-length feature: dtype "int64" or "float32"; length an int or a dimension name."""

    dtype: str
    length: int | str


# Google's create_pretraining_data.py `write_instance_to_example_files`, in its order.
PRETRAINING_FEATURES = {
    "input_ids": FeatureSpec("int64", "max_seq_length"),
    "input_mask": FeatureSpec("int64", "max_seq_length"),
    "segment_ids": FeatureSpec("int64", "max_seq_length"),
    "masked_lm_positions": FeatureSpec("int64", "max_predictions_per_seq"),
    "masked_lm_ids": FeatureSpec("int64", "max_predictions_per_seq"),
    "masked_lm_weights": FeatureSpec("float32", "max_predictions_per_seq"),
    "next_sentence_labels": FeatureSpec("int64", 1),
}

# The one translation from on-disk (Google) names to Keras input names (keras-nlp's).
MODEL_INPUT_NAMES = {
    "input_ids": "token_ids",
    "input_mask": "padding_mask",
    "segment_ids": "segment_ids",
    "masked_lm_positions": "mask_positions",
}


def feature_lengths(schema, **dims):
    """Resolves each feature's length: `{name: int}`.

    Args:
        schema: dict of name -> `FeatureSpec`.
        **dims: int. Values of the dimension names the schema uses (e.g. `max_seq_length=128`).
    """
    lengths = {}
    for name, spec in schema.items():
        if isinstance(spec.length, int):
            lengths[name] = spec.length
        elif spec.length in dims and dims[spec.length] is not None:
            lengths[name] = int(dims[spec.length])
        else:
            raise ValueError(f"feature {name!r} needs the dimension {spec.length!r}")
    return lengths


def parsing_spec(schema, **dims):
    """`tf.io.parse_example` features, e.g. `{"input_ids": FixedLenFeature([128], tf.int64)}`."""
    lengths = feature_lengths(schema, **dims)
    return {name: tf.io.FixedLenFeature([lengths[name]], tf.dtypes.as_dtype(spec.dtype))
            for name, spec in schema.items()}


@tf.autograph.experimental.do_not_convert
def parse_pretraining_examples(serialized, max_seq_length, max_predictions_per_seq):
    """Parses a batch of serialized pretraining `tf.train.Example`s.

    int64 features become int32 (as Google's run_pretraining.py `_decode_record`).

    Args:
        serialized: string Tensor [batch].
        max_seq_length: int. Length of `input_ids`, `input_mask`, `segment_ids`.
        max_predictions_per_seq: int. Length of the `masked_lm_*` features.

    Returns:
        dict of Google names -> Tensor [batch, length]; `masked_lm_weights` is float32.
    """
    spec = parsing_spec(PRETRAINING_FEATURES, max_seq_length=max_seq_length,
                        max_predictions_per_seq=max_predictions_per_seq)
    features = tf.io.parse_example(serialized, spec)
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


@tf.autograph.experimental.do_not_convert
def to_pretraining_inputs(features):
    """Renames parsed records to `(inputs, labels, sample_weights)` for `BertPretrainer.fit`.

    Args:
        features: dict from `parse_pretraining_examples`, tensors [batch, ...].

    Returns:
        inputs: dict token_ids, segment_ids, padding_mask [batch, seq]; mask_positions
            [batch, predictions].
        labels: dict mlm_logits [batch, predictions] (the masked tokens' ids), nsp_logits
            [batch] (1 = random next sentence).
        sample_weights: dict mlm_logits [batch, predictions] (0 on padding predictions),
            nsp_logits [batch] (ones).
    """
    inputs = {MODEL_INPUT_NAMES[name]: features[name] for name in MODEL_INPUT_NAMES}
    nsp = tf.reshape(features["next_sentence_labels"], [-1])
    labels = {"mlm_logits": features["masked_lm_ids"], "nsp_logits": nsp}
    weights = {"mlm_logits": features["masked_lm_weights"],
               "nsp_logits": tf.ones_like(nsp, dtype=tf.float32)}
    return inputs, labels, weights
