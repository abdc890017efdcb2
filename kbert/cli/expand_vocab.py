"""Adds tokens to a Google BERT release: fills [unusedN] slots or appends rows.

  kbert-expand-vocab --input_dir=uncased_L-12_H-768_A-12 \\
      --new_tokens_file=tokens.txt --output_dir=expanded --mode=replace_unused

--new_tokens_file holds one token per line. Or let a corpus choose them:

  kbert-expand-vocab --input_dir=uncased_L-12_H-768_A-12 \\
      --new_tokens_from_corpus=train.tsv --corpus_column=text_a --max_new_tokens=900 \\
      --output_dir=expanded

takes the words the vocab misses (CJK characters that become [UNK]; other words that become
[UNK] or more than one word piece), most frequent first (ties: first seen), and prints the
corpus coverage before and after. Corpus files are plain text, one text per line, or with
--corpus_column, tab-separated with a header row. With replace_unused, at most the free
[unusedN] slots are filled (the most frequent candidates) unless --fallback_to_append.

Vocab, word embeddings and the masked-LM output bias change together; every other variable is
copied unchanged. Tokens the tokenizer would split (punctuation, capitals) are listed in
added_tokens.txt, which kbert's tokenizers read. --output_dir may not be the input release;
one that holds other files or a finished expansion needs --overwrite_output_dir.
"""

from absl import app
from absl import logging

from kbert.cli import command
from kbert.cli import config_flags
from kbert.cli import tool_configs

CONFIG_FLAGS = config_flags.define_config_flags(tool_configs.VocabExpansionConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = CONFIG_FLAGS.config()
    from kbert import vocab_expansion  # here: --help needs no TensorFlow

    settings = dict(mode=config.mode, init=config.init,
                    fallback_to_append=config.fallback_to_append,
                    do_lower_case=config.do_lower_case,
                    overwrite_output_dir=config.overwrite_output_dir)
    if config.new_tokens_from_corpus:
        result = vocab_expansion.expand_from_corpus(
            config.input_dir, list(config.new_tokens_from_corpus), config.output_dir,
            max_new_tokens=config.max_new_tokens, corpus_column=config.corpus_column,
            **settings)
        expansion = result.expansion
        print(f"{len(result.candidates)} candidates, {len(expansion.added)} added")
        print(f"coverage before: {result.before}")
        print(f"coverage after:  {result.after}")
    else:
        tokens = vocab_expansion.read_new_tokens(config.new_tokens_file)
        expansion = vocab_expansion.expand(config.input_dir, tokens, config.output_dir,
                                           **settings)
    logging.info("Added %d tokens, skipped %d already present, %d need never_split: %s",
                 len(expansion.added), len(expansion.skipped), len(expansion.never_split),
                 config.output_dir)


def run():
    """The `kbert-expand-vocab` command."""
    command.run(main)


if __name__ == "__main__":
    run()
