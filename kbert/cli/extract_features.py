"""Extracts BERT features from text, as Google's extract_features.py, plus sentence pooling.

Each line of --input_file is `text_a` or `text_a ||| text_b`.
  * --output_file=out.jsonl: one JSON line per input in Google's layout (per token: the token
    and the values of each --layers index).
  * --output_file=out.npy --pooling=mean: one sentence vector per input line, [lines, dim]
    (pooling: cls, pooled, mean, mean_second_to_last, mean_sum_last_four,
    mean_concat_last_four).
Output streams to a temporary file, renamed when complete; memory does not grow with input.
One run at a time writes an output file, and an existing one is replaced only with --overwrite.

  kbert-extract-features --input_file=in.txt --output_file=out.jsonl \\
      --init_checkpoint=uncased_L-12_H-768_A-12 --layers=-1,-2,-3,-4
"""

import os

from absl import app
from absl import flags
from absl import logging

from kbert.cli import command

# The names of kbert.tasks.feature_extraction.POOLINGS (tests/tools/test_commands.py checks
# they match): that module imports TensorFlow, which --help does not need.
POOLINGS = ("cls", "mean", "mean_concat_last_four", "mean_second_to_last",
            "mean_sum_last_four", "pooled")

_INPUT = flags.DEFINE_string("input_file", None, "UTF-8 text, one example per line.",
                             required=True)
_OUTPUT = flags.DEFINE_string("output_file", None, "Ends in .jsonl or .npy.", required=True)
_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "The model: a Google release directory, training directory or "
    "prefix, a release name, a recipe's output directory or .keras file, or a Hugging Face or "
    "keras-hub directory (its encoder is used).", required=True)
_CONFIG = flags.DEFINE_string("bert_config_file", None, "Defaults to the one beside the ckpt.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "Defaults to vocab.txt beside the ckpt.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")
_LAYERS = flags.DEFINE_list("layers", ["-1", "-2", "-3", "-4"], "Layer indices for .jsonl.")
flags.register_validator("layers", lambda v: all(_is_int(i) for i in v),
                         message="layers must be comma-separated integers, e.g. -1,-2")
_POOLING = flags.DEFINE_enum("pooling", None, POOLINGS,
                             "Sentence pooling; required for .npy output.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.",
                                lower_bound=3)  # [CLS] a piece [SEP]
_BATCH = flags.DEFINE_integer("batch_size", 32, "Examples per batch.", lower_bound=1)
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing --output_file.")


def _is_int(text):
    try:
        int(text)
    except ValueError:
        return False
    return True


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    # Here and in _write_features: --help needs no TensorFlow.
    from kbert import artifacts
    from kbert.data import text_files
    from kbert.models.opening import open_model

    as_npy = _OUTPUT.value.endswith(".npy")
    if as_npy != (_POOLING.value is not None) or not _OUTPUT.value.endswith((".npy", ".jsonl")):
        raise app.UsageError("--output_file must end in .jsonl (per-token features, no "
                             "--pooling) or .npy (with --pooling)")
    source = open_model(_CHECKPOINT.value, _VOCAB.value, _CONFIG.value)
    if source.vocab_file is None:
        raise app.UsageError(f"no vocab.txt beside {source.path}; pass --vocab_file")
    config = source.bert_config
    positions, depth = config.max_position_embeddings, config.num_hidden_layers
    if _MAX_SEQ.value > positions:
        raise app.UsageError(f"--max_seq_length={_MAX_SEQ.value} is longer than the model's "
                             f"max_position_embeddings={positions}")
    outside = [i for i in _LAYERS.value if not -depth <= int(i) < depth]
    if outside and not as_npy:
        raise app.UsageError(f"--layers {','.join(outside)}: the model has {depth} layers "
                             f"(indices -{depth} to {depth - 1})")
    artifacts.check_not_input(os.path.dirname(os.path.abspath(_OUTPUT.value)),
                              [("input_file", _INPUT.value)], [os.path.basename(_OUTPUT.value)])
    with text_files.open_text(_INPUT.value) as f:  # all of it UTF-8, before any work
        total = sum(1 for _ in f)
    output = os.path.abspath(_OUTPUT.value)
    with artifacts.locked(os.path.dirname(output), f".kbert-{os.path.basename(output)}.lock",
                          what=_OUTPUT.value):
        if os.path.exists(output) and not _OVERWRITE.value:
            raise ValueError(f"{_OUTPUT.value}: exists — pass --overwrite to replace it, or "
                             "choose another --output_file")
        _write_features(source, total, as_npy)
    logging.info("Wrote %d examples to %s", total, output)


def _write_features(source, total, as_npy):
    """Streams the features of the `total` input lines to --output_file (a temporary name
    until complete)."""
    import keras
    import numpy as np

    from kbert import io
    from kbert.data import text_files
    from kbert.models.encoder import BertEncoder
    from kbert.tasks import feature_extraction
    from kbert.tokenization import FullTokenizer

    encoder = BertEncoder.from_google_checkpoint(source.google_checkpoint())
    tokenizer = FullTokenizer(source.vocab(), do_lower_case=_LOWER.value)
    progress = keras.utils.Progbar(total, unit_name="example")
    width = encoder.hidden_dim * (4 if _POOLING.value == "mean_concat_last_four" else 1)
    with text_files.open_text(_INPUT.value) as lines, \
            io.atomic_write(_OUTPUT.value, "wb") as out:
        if as_npy:
            np.lib.format.write_array_header_1_0(
                out, {"descr": "<f4", "fortran_order": False, "shape": (total, width)})
        layers = [-1] if as_npy else [int(i) for i in _LAYERS.value]  # npy: pooling only
        results = feature_extraction.extract(
            encoder, tokenizer, feature_extraction.read_examples(lines), layers,
            _POOLING.value, _MAX_SEQ.value, _BATCH.value)
        for count, result in enumerate(results, 1):
            if as_npy:
                out.write(result["sentence_vector"].astype("<f4").tobytes())
            else:
                out.write((feature_extraction.to_google_json(result) + "\n").encode("utf-8"))
            progress.update(count)


def run():
    """The `kbert-extract-features` command."""
    command.run(main)


if __name__ == "__main__":
    run()
