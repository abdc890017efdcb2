"""Extracts BERT features from text, as Google's extract_features.py, plus sentence pooling.

Each line of --input_file (one UTF-8 text file) is `text_a` or `text_a ||| text_b`; the
features are those of --init_checkpoint's encoder.
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
from absl import logging

from kbert.cli import command
from kbert.cli import config_flags
from kbert.cli import tool_configs

CONFIG_FLAGS = config_flags.define_config_flags(tool_configs.FeatureExtractionConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = CONFIG_FLAGS.config()
    # Here and in _write_features: --help needs no TensorFlow.
    from kbert import artifacts
    from kbert import io
    from kbert import text_files
    from kbert.models.opening import open_model
    from kbert.tokenization import vocab as vocab_lib

    source = open_model(config.init_checkpoint, config.vocab_file, config.bert_config_file)
    if source.vocab_file is None:
        raise app.UsageError(f"no vocab.txt beside {source.path}; pass --vocab_file")
    vocab_lib.check_vocab_size(source.vocab(), source.bert_config.vocab_size, source.path)
    positions = source.bert_config.max_position_embeddings
    depth = source.bert_config.num_hidden_layers
    if config.max_seq_length > positions:
        raise app.UsageError(f"--max_seq_length={config.max_seq_length} is longer than the "
                             f"model's max_position_embeddings={positions}")
    outside = [str(i) for i in config.layers if not -depth <= i < depth]
    if outside and not config.sentence_vectors:
        has = ("1 layer (index -1 or 0)" if depth == 1
               else f"{depth} layers (indices -{depth} to {depth - 1})")
        raise app.UsageError(f"--layers {','.join(outside)}: the model has {has}")
    output = os.path.abspath(config.output_file)
    artifacts.check_not_input(os.path.dirname(output), [("input_file", config.input_file)],
                              [os.path.basename(output)])
    with text_files.open_text(config.input_file) as f:  # all of it UTF-8, before any work
        total = sum(1 for _ in f)
    if not total:
        raise ValueError(f"{config.input_file}: the input is empty — expected one text "
                         "(text_a, or text_a ||| text_b) per line")
    with artifacts.locked(os.path.dirname(output), f".kbert-{os.path.basename(output)}.lock",
                          what=config.output_file):
        if os.path.exists(output) and not config.overwrite:
            raise ValueError(f"{config.output_file}: exists — pass --overwrite to replace it, "
                             "or choose another --output_file")
        for stale in io.remove_partial_writes(output):  # the lock is held
            logging.info("%s: removed, the partial output of an interrupted run", stale)
        _write_features(config, source, total)
    logging.info("Wrote %d examples to %s", total, output)


def _write_features(config, source, total):
    """Streams the features of the `total` input lines to `config.output_file` (a temporary
    name until complete)."""
    import keras
    import numpy as np

    from kbert import io
    from kbert import text_files
    from kbert.models.encoder import BertEncoder
    from kbert.tasks import feature_extraction
    from kbert.tokenization import FullTokenizer

    encoder = BertEncoder.from_google_checkpoint(source.google_checkpoint())
    tokenizer = FullTokenizer(source.vocab(), do_lower_case=config.do_lower_case)
    progress = keras.utils.Progbar(total, unit_name="example")
    width = encoder.hidden_dim * (4 if config.pooling == "mean_concat_last_four" else 1)
    as_npy = config.sentence_vectors
    with text_files.open_text(config.input_file) as lines, \
            io.atomic_write(config.output_file, "wb") as out:
        if as_npy:
            np.lib.format.write_array_header_1_0(
                out, {"descr": "<f4", "fortran_order": False, "shape": (total, width)})
        layers = [-1] if as_npy else list(config.layers)  # npy: pooling only
        results = feature_extraction.extract(
            encoder, tokenizer, feature_extraction.read_examples(lines), layers,
            config.pooling, config.max_seq_length, config.batch_size)
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
