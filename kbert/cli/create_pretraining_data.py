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
from absl import flags
from absl import logging

from kbert.cli import command
from kbert.data import pretraining

_INPUT = flags.DEFINE_string("input_file", None, "Raw text: comma-separated files or globs.",
                             required=True)
_OUTPUT = flags.DEFINE_string("output_file", None, "Output: comma-separated files, NAME@N, or "
                              "NAME (see --num_shards).", required=True)
_VOCAB = flags.DEFINE_string("vocab_file", None, "The model's vocab.txt.", required=True)
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased).")
_WWM = flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words, not word pieces.")
_SEGMENTER = flags.DEFINE_enum("chinese_word_segmenter", None, ["jieba"],
                               "With --do_whole_word_mask: mask the CJK characters of one word "
                               "of this segmenter together (needs pip install 'kbert-keras[zh]').")
_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
_PREDICTIONS = flags.DEFINE_integer("max_predictions_per_seq", 20,
                                    "Maximum masked LM predictions per sequence.")
_SEED = flags.DEFINE_integer("random_seed", 12345, "Random seed.", lower_bound=0)
_DUPE = flags.DEFINE_integer("dupe_factor", 10, "Passes over the input, with different masks.")
_MLM_PROB = flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
_SHORT = flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
_SHARDS = flags.DEFINE_integer("num_shards", None, "Shards for a single --output_file NAME.",
                               lower_bound=1)
_FORMAT = flags.DEFINE_enum("input_format", "text", ["text", "wikiextractor"], "Input format.")
_SKIP_BAD = flags.DEFINE_bool("skip_bad_lines", False,
                              "Skip (and log) lines that are not UTF-8 instead of stopping.")
_EXACT = flags.DEFINE_bool("exact_tokenization", True,
                           "Exactly Google's FullTokenizer ids. --noexact_tokenization uses "
                           "tf-text's FastBertTokenizer alone: a little less start-up, other "
                           "ids on ~0.2% of sentences (compatibility characters such as '…', "
                           "'½').")
_CHUNK_MB = flags.DEFINE_integer("chunk_mb", 4, "MiB of text per chunk: random next "
                                 "sentences and the shuffle stay within one; memory scales "
                                 "with it.", lower_bound=1)
command.validate_ranges(pretraining.PretrainingDataConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = pretraining.PretrainingDataConfig(
        max_seq_length=_SEQ.value, max_predictions_per_seq=_PREDICTIONS.value,
        masked_lm_prob=_MLM_PROB.value, short_seq_prob=_SHORT.value, dupe_factor=_DUPE.value,
        do_whole_word_mask=_WWM.value, chinese_word_segmenter=_SEGMENTER.value)
    from kbert.data import pretraining_data  # here: --help needs no TensorFlow

    counts = pretraining_data.create_pretraining_data(
        _INPUT.value, _OUTPUT.value, _VOCAB.value, config=config, do_lower_case=_LOWER.value,
        random_seed=_SEED.value, num_shards=_SHARDS.value, input_format=_FORMAT.value,
        skip_bad_lines=_SKIP_BAD.value, chunk_bytes=_CHUNK_MB.value << 20,
        exact_tokenization=_EXACT.value)
    logging.info("Wrote %d instances to %d file(s)", sum(counts.values()), len(counts))


def run():
    """The `kbert-create-pretraining-data` command."""
    command.run(main)


if __name__ == "__main__":
    run()
