"""Feature extraction: per-token layer outputs in Google's layout, and sentence pooling.

As Google's extract_features.py: each input line is `text_a` or `text_a ||| text_b`, packed as
`[CLS] a [SEP] (b [SEP])` and truncated longest-first to `max_seq_length`; layer -1 is the
last transformer layer. Batches are padded only to their longest example, and results stream
out one example at a time, so memory does not grow with the input.
"""

import collections
import json
import re

import numpy as np
import tensorflow as tf

from kbert.data import pipeline
from kbert.tokenization import text_inputs

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")  # greedy, as Google's read_examples


def _masked_mean(vectors, mask):
    mask = mask[..., None].astype(vectors.dtype)
    return (vectors * mask).sum(1) / mask.sum(1)


# Sentence vectors from encoder outputs; "real tokens" include [CLS] and [SEP], not padding.
POOLINGS = {
    "cls": lambda out, mask: out["sequence_output"][:, 0],
    "pooled": lambda out, mask: out["pooled_output"],
    "mean": lambda out, mask: _masked_mean(out["sequence_output"], mask),
    "mean_second_to_last": lambda out, mask: _masked_mean(out["encoder_outputs"][-2], mask),
    "mean_sum_last_four": lambda out, mask: _masked_mean(sum(out["encoder_outputs"][-4:]), mask),
    "mean_concat_last_four": lambda out, mask: _masked_mean(
        np.concatenate(out["encoder_outputs"][-4:], axis=-1), mask),
}

Example = collections.namedtuple("Example", ["index", "text_a", "text_b"])


def read_examples(lines):
    """Parses input lines (`text_a` or `text_a ||| text_b`) into `Example`s, lazily."""
    for index, line in enumerate(lines):
        line = line.strip()
        pair = _PAIR.match(line)
        yield Example(index, *(pair.groups() if pair else (line, None)))


def examples_from_texts(texts):
    """`Example`s from texts in `kbert.BertPreprocessor`'s convention.

    Args:
        texts: a list of str (a batch), a tuple of two lists (a batch of pairs), a str (one
            text), or string tensors in those shapes.

    Returns:
        list of `Example`, indexed from 0.
    """
    segments = text_inputs.to_segments(texts, caller="extract")
    columns = [[t.decode("utf-8") for t in np.atleast_1d(s.numpy())] for s in segments]
    texts_b = columns[1] if len(columns) == 2 else [None] * len(columns[0])
    return [Example(index, a, b) for index, (a, b) in enumerate(zip(columns[0], texts_b,
                                                                      strict=True))]


def _holds_examples(examples):
    if isinstance(examples, (list, tuple)):
        return bool(examples) and all(isinstance(e, Example) for e in examples)
    return not (isinstance(examples, (str, bytes, np.ndarray)) or tf.is_tensor(examples))


def truncate_pair(tokens_a, tokens_b, max_length):
    """Pops from the longer list (from `tokens_b` on a tie) until both fit; in place."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def featurize(tokenizer, example, max_seq_length):
    """Returns (tokens, token_ids, segment_ids) of one example, packed as BERT expects."""
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else []
    truncate_pair(tokens_a, tokens_b, max_seq_length - (3 if tokens_b else 2))
    tokens = ["[CLS]", *tokens_a, "[SEP]"]
    segments = [0] * len(tokens)
    if tokens_b:
        tokens += [*tokens_b, "[SEP]"]
        segments += [1] * (len(tokens_b) + 1)
    return tokens, tokenizer.convert_tokens_to_ids(tokens), segments


def _batches(tokenizer, examples, max_seq_length, batch_size):
    batch = []
    for example in examples:
        batch.append((example, *featurize(tokenizer, example, max_seq_length)))
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def extract(encoder, tokenizer, examples, layers=(-1, -2, -3, -4), pooling=None,
            max_seq_length=128, batch_size=32):
    """Runs the encoder over `examples` and yields one result dict per example, in order.

    Args:
        encoder: `kbert.BertEncoder`.
        tokenizer: `kbert.FullTokenizer` (anything with `tokenize`, `convert_tokens_to_ids`).
        examples: iterable of `Example` (see `read_examples`), or texts as
            `kbert.BertPreprocessor` takes them (a list of str, a tuple of two lists for
            pairs, a str); see `examples_from_texts`.
        layers: ints. Layer indices as in Python (-1 = last layer). Defaults to the last four.
        pooling: str or None. A key of `POOLINGS` to add a sentence vector.
        max_seq_length: int. Longer inputs are truncated as in Google's code. Defaults to 128.
        batch_size: int. Defaults to 32.

    Yields:
        dict with `index`, `tokens` (list of str), `layers` ({index: [tokens, hidden]}) and,
        with `pooling`, `sentence_vector` [hidden or 4 * hidden].
    """
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {sorted(POOLINGS)}, got {pooling!r}")
    num_layers = len(encoder.transformer_layers)
    for index in layers:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"layer index {index} out of range for {num_layers} layers")
    if not _holds_examples(examples):
        examples = examples_from_texts(examples)
    run = tf.function(lambda x: encoder(x, training=False), reduce_retracing=True)
    for batch in _batches(tokenizer, examples, max_seq_length, batch_size):
        inputs = pipeline.padded_batch([ids for _, _, ids, _ in batch],
                                       [segments for _, _, _, segments in batch])
        outputs = tf.nest.map_structure(np.asarray, run(inputs))
        vectors = (POOLINGS[pooling](outputs, inputs["padding_mask"]) if pooling else None)
        for row, (example, tokens, _, _) in enumerate(batch):
            result = {
                "index": example.index,
                "tokens": tokens,
                "layers": {i: outputs["encoder_outputs"][i][row, :len(tokens)] for i in layers},
            }
            if pooling:
                result["sentence_vector"] = vectors[row]
            yield result


def to_google_json(result):
    """One JSON line in Google's extract_features.py output layout."""
    features = [
        {"token": token,
         "layers": [{"index": i, "values": [round(float(v), 6) for v in values[position]]}
                    for i, values in result["layers"].items()]}
        for position, token in enumerate(result["tokens"])
    ]
    return json.dumps({"linex_index": result["index"], "features": features})
