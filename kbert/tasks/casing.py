"""The casing guard: `do_lower_case` must match the checkpoint's release name and its vocab."""

import os
import re

from kbert.tokenization import vocab as vocab_lib

# Google's released checkpoints, by directory name (as its tokenization.py
# `validate_case_matches_checkpoint`): the uncased ones were trained lower-cased.
_RELEASE_NAME = re.compile(r"(?:^|[/\\])((?:wwm_)?(?:un)?cased|multi_cased|multilingual|chinese)"
                           r"_L-\d+_H-\d+_A-\d+(?:[/\\]|$)")
_UNCASED_RELEASES = ("uncased", "wwm_uncased", "multilingual", "chinese")
_SPECIAL = re.compile(r"^\[[A-Za-z0-9_]+\]$")  # [CLS], [unused12], ...
_MIN_LOWER_PIECES = 100  # a vocab this big with no upper-case piece is an uncased vocab


def check_casing(do_lower_case, vocab, init_checkpoint=None):
    """Raises ValueError when `do_lower_case` contradicts the checkpoint or its vocab.

    Google's rule: a release directory named `uncased_*`, `multilingual_*` or `chinese_*` is
    uncased, `cased_*` / `multi_cased_*` cased. Then the vocab (a `Vocab`, or the path of a
    vocab.txt): word pieces with upper-case letters mean a cased model; 100 or more
    lower-case pieces and no upper-case one, uncased.
    """
    fix = "or pass allow_casing_mismatch (--allow_casing_mismatch) if this is intended"
    match = _RELEASE_NAME.search(os.path.abspath(init_checkpoint)) if init_checkpoint else None
    if match:
        uncased = match.group(1) in _UNCASED_RELEASES
        if uncased != bool(do_lower_case):
            raise ValueError(
                f"{init_checkpoint}: Google's {match.group(1)} release is "
                f"{'uncased' if uncased else 'cased'}, but do_lower_case={do_lower_case}; pass "
                f"--do_lower_case={str(uncased).lower()}, {fix}")
        return
    if not isinstance(vocab, vocab_lib.Vocab):
        vocab = vocab_lib.load_vocab(vocab)
    vocab_file = vocab.path or "the vocab"
    tokens = [t for t in vocab.tokens if not _SPECIAL.match(t)]
    upper = [t for t in tokens if t != t.lower()]
    lower = sum(1 for t in tokens if t != t.upper())
    if do_lower_case and upper:
        raise ValueError(
            f"{vocab_file}: {len(upper)} word pieces have upper-case letters (e.g. "
            f"{upper[0]!r}), so the model is cased, but do_lower_case=True lower-cases every "
            f"input; pass --do_lower_case=false, {fix}")
    if not do_lower_case and not upper and lower >= _MIN_LOWER_PIECES:
        raise ValueError(
            f"{vocab_file}: no word piece has an upper-case letter, so the model is uncased, "
            f"but do_lower_case=False keeps upper-case input (which becomes [UNK]); pass "
            f"--do_lower_case=true, {fix}")
