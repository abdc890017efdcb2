"""Writes masked-LM / next-sentence pretraining TFRecords from raw text (Google's flags and schema).

Input (--input_file, comma-separated files or globs): --input_format=text is Google's format,
one sentence per line and a blank line between documents; --input_format=wikiextractor reads
WikiExtractor output (<doc ...> ... </doc>, title line dropped, paragraphs cut into sentences,
empty documents skipped). Each instance is [CLS] A [SEP] B [SEP], B the actual continuation or
(50%) a random span of another document; masked_lm_prob of its tokens are predicted,
80%/10%/10% [MASK]/random/unchanged.

Whole-word masking (--do_whole_word_mask) masks a word's pieces together: a word is a piece and
the ## pieces after it, so each CJK character is a word of its own. For Chinese, add
--chinese_word_segmenter=jieba (pip install 'kbert-keras[zh]'): the characters of one jieba word are
masked together, as in Chinese BERT-wwm; the ids stay one per character and the schema is
Google's.

Output (--output_file): comma-separated files, NAME@N, or NAME with --num_shards=N
(NAME-0000i-of-0000N), plus NAME_meta.json. Each shard is written under a temporary name and
renamed when complete; a re-run with the same flags and unchanged input files (compared by
content) skips complete shards, and one with other flags or edited input is refused.

  kbert-create-pretraining-data --input_file='corpus/wiki_*' \\
      --input_format=wikiextractor --output_file=out/train.tfrecord --num_shards=8 \\
      --vocab_file=vocab.txt --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=10
"""

from absl import app
from absl import logging

from kbert.cli import command
from kbert.cli import config_flags
from kbert.cli import tool_configs

CONFIG_FLAGS = config_flags.define_config_flags(tool_configs.CreatePretrainingDataConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = CONFIG_FLAGS.config()
    # Here: --help needs no TensorFlow.
    from kbert.data.pretraining import instances
    from kbert.data.pretraining import writer

    data_config = instances.PretrainingDataConfig(
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        masked_lm_prob=config.masked_lm_prob, short_seq_prob=config.short_seq_prob,
        dupe_factor=config.dupe_factor, do_whole_word_mask=config.do_whole_word_mask,
        chinese_word_segmenter=config.chinese_word_segmenter)
    counts = writer.create_pretraining_data(
        config.input_file, config.output_file, config.vocab_file, config=data_config,
        do_lower_case=config.do_lower_case, random_seed=config.random_seed,
        num_shards=config.num_shards, input_format=config.input_format,
        skip_bad_lines=config.skip_bad_lines, chunk_bytes=config.chunk_mb << 20,
        exact_tokenization=config.exact_tokenization)
    logging.info("Wrote %d instances to %d file(s)", sum(counts.values()), len(counts))


def run():
    """The `kbert-create-pretraining-data` command."""
    command.run(main)


if __name__ == "__main__":
    run()
