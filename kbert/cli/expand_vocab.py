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
from absl import flags
from absl import logging

from kbert.cli import command

# kbert.vocab_expansion's MODES and INITS (tests/tools/test_commands.py checks they match):
# that module imports TensorFlow, which --help does not need.
MODES = ("replace_unused", "append")
INITS = ("mean", "normal", "keep")

_INPUT = flags.DEFINE_string("input_dir", None, "Release directory or checkpoint prefix.",
                             required=True)
_TOKENS = flags.DEFINE_string("new_tokens_file", None, "UTF-8 file, one new token per line.")
_CORPUS = flags.DEFINE_list("new_tokens_from_corpus", None,
                            "Corpus files (comma-separated) to choose the new tokens from.")
_COLUMN = flags.DEFINE_string("corpus_column", None, "Header name of the text column of "
                              "tab-separated corpus files; unset: one text per line.")
_MAX_NEW = flags.DEFINE_integer("max_new_tokens", None, "With --new_tokens_from_corpus: most "
                                "tokens to add; unset: every candidate that fits.", lower_bound=1)
_OUTPUT = flags.DEFINE_string("output_dir", None, "Directory for the new release.", required=True)
_MODE = flags.DEFINE_enum("mode", MODES[0], MODES,
                          "Fill [unusedN] slots (vocab size unchanged) or append rows.")
_INIT = flags.DEFINE_enum("init", INITS[0], INITS,
                          "New rows: mean of the token's old word pieces, truncated normal, or "
                          "keep the slot's old row.")
_FALLBACK = flags.DEFINE_bool("fallback_to_append", False,
                              "With replace_unused, append what finds no free slot.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")
_OVERWRITE = flags.DEFINE_bool("overwrite_output_dir", False, "Replace an --output_dir that "
                               "holds other files or a finished expansion.")
flags.mark_flags_as_mutual_exclusive(["new_tokens_file", "new_tokens_from_corpus"],
                                     required=True)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kbert import vocab_expansion  # here: --help needs no TensorFlow

    options = dict(mode=_MODE.value, init=_INIT.value, fallback_to_append=_FALLBACK.value,
                   do_lower_case=_LOWER.value, overwrite_output_dir=_OVERWRITE.value)
    if _CORPUS.value:
        result = vocab_expansion.expand_from_corpus(
            _INPUT.value, _CORPUS.value, _OUTPUT.value, max_new_tokens=_MAX_NEW.value,
            corpus_column=_COLUMN.value, **options)
        expansion = result.expansion
        print(f"{len(result.candidates)} candidates, {len(expansion.added)} added")
        print(f"coverage before: {result.before}")
        print(f"coverage after:  {result.after}")
    else:
        if _MAX_NEW.value is not None or _COLUMN.value is not None:
            raise app.UsageError("--max_new_tokens and --corpus_column need "
                                 "--new_tokens_from_corpus")
        with open(_TOKENS.value, encoding="utf-8") as f:
            tokens = [line.strip() for line in f if line.strip()]
        expansion = vocab_expansion.expand(_INPUT.value, tokens, _OUTPUT.value, **options)
    logging.info("Added %d tokens, skipped %d already present, %d need never_split: %s",
                 len(expansion.added), len(expansion.skipped), len(expansion.never_split),
                 _OUTPUT.value)


def run():
    """The `kbert-expand-vocab` command."""
    command.run(main)


if __name__ == "__main__":
    run()
