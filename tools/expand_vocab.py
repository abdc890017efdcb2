"""Adds tokens to a Google BERT release: fills [unusedN] slots or appends rows.

  python tools/expand_vocab.py --input_dir=uncased_L-12_H-768_A-12 \\
      --new_tokens_file=tokens.txt --output_dir=expanded --mode=replace_unused

--new_tokens_file holds one token per line. Vocab, word embeddings and the masked-LM output
bias change together; every other variable is copied unchanged. Tokens the tokenizer would
split (punctuation, capitals) are listed in added_tokens.txt, which kbert's tokenizers read.
"""

import _cli
from absl import app
from absl import flags
from absl import logging

from kbert import vocab_expansion

_INPUT = flags.DEFINE_string("input_dir", None, "Release directory or checkpoint prefix.",
                             required=True)
_TOKENS = flags.DEFINE_string("new_tokens_file", None, "UTF-8 file, one new token per line.",
                              required=True)
_OUTPUT = flags.DEFINE_string("output_dir", None, "Directory for the new release.", required=True)
_MODE = flags.DEFINE_enum("mode", vocab_expansion.REPLACE_UNUSED, vocab_expansion.MODES,
                          "Fill [unusedN] slots (vocab size unchanged) or append rows.")
_INIT = flags.DEFINE_enum("init", vocab_expansion.INIT_MEAN, vocab_expansion.INITS,
                          "New rows: mean of the token's old word pieces, truncated normal, or "
                          "keep the slot's old row.")
_FALLBACK = flags.DEFINE_bool("fallback_to_append", False,
                              "With replace_unused, append what finds no free slot.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    with open(_TOKENS.value, encoding="utf-8") as f:
        tokens = [line.strip() for line in f if line.strip()]
    expansion = vocab_expansion.expand(
        _INPUT.value, tokens, _OUTPUT.value, mode=_MODE.value, init=_INIT.value,
        fallback_to_append=_FALLBACK.value, do_lower_case=_LOWER.value)
    logging.info("Added %d tokens, skipped %d already present, %d need never_split: %s",
                 len(expansion.added), len(expansion.skipped), len(expansion.never_split),
                 _OUTPUT.value)


if __name__ == "__main__":
    _cli.run(main)
