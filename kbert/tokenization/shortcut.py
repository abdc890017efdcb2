"""Which texts tf-text's `FastBertTokenizer` tokenizes exactly as Google's FullTokenizer.

`FastBertTokenizer` (C++: ICU normalisation, splitting and WordPiece in one op) is about 3x
faster than kbert's character-level path but is not Google's tokenizer everywhere: it
normalises some characters its own way ("ß" -> "ss", "…" -> "...", "½" -> "1⁄2"), classifies
characters under ICU's Unicode version rather than Python's, and limits words to 200 *bytes*
where Google limits them to 200 characters. It agrees exactly on texts made of characters it
treats as Google does, with no word longer than 200 bytes.

Printable ASCII is such a set by construction (ASCII lower-casing, the same punctuation, one
byte per character). Beyond ASCII, the characters used are checked here, once per process and
casing, by tokenizing each between two letters with both tokenizers' rules: a candidate counts
only if it is a plain character in Google's table (one output character, not whitespace, CJK,
deleted, a combining mark or a capital sigma) and `FastBertTokenizer` normalises and splits it
exactly as that table says. Texts with such characters must also have no run of more than 50
non-whitespace characters (at most 4 bytes each), so the byte limit cannot bite first.
"""

import functools
import sys
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kbert.tokenization import char_table
from kbert.tokenization import disk_cache

# Latin, IPA, Greek, Cyrillic, Armenian, Hebrew, Latin and Greek extended, general punctuation,
# super/subscripts, currency, letter-like symbols, number forms, arrows: the non-ASCII
# characters of mostly-Latin text.
_CANDIDATE_RANGES = ((0xA1, 0x5FF), (0x1E00, 0x1FFF), (0x2010, 0x2027), (0x2030, 0x205E),
                     (0x2070, 0x21FF))


@functools.lru_cache(maxsize=2)
def fast_text_pattern(do_lower_case):
    """An RE2 pattern that fully matches the texts FastBertTokenizer gets right: printable
    ASCII, or printable ASCII and verified characters in runs of at most 50 between ASCII
    whitespace. (One pattern: half the time of three.)"""
    ranges = "".join(f"\\x{{{first:04X}}}-\\x{{{last:04X}}}"
                     for first, last in _ranges(safe_characters(do_lower_case)))
    word_char = rf"[\x21-\x7e{ranges}]"
    return (rf"[\t\n\r\x20-\x7e]*|[ \t\n\r]*(?:{word_char}{{1,50}}[ \t\n\r]+)*"
            rf"(?:{word_char}{{1,50}})?")


@functools.lru_cache(maxsize=2)
def safe_characters(do_lower_case):
    """Sorted code points, beyond ASCII, that FastBertTokenizer treats as Google does.

    The probe takes about a second, so its result is kept on disk (see `disk_cache`), keyed
    by the Unicode, TensorFlow and tensorflow-text versions and this code.
    """
    key = (f"unicode {unicodedata.unidata_version} tf {tf.__version__} "
           f"tf_text {tf_text.__version__} lower {do_lower_case} source "
           f"{disk_cache.source_digest(sys.modules[__name__], char_table)}")
    (safe,) = disk_cache.cached_arrays(
        f"fast_tokenizer_safe_{'uncased' if do_lower_case else 'cased'}", key,
        lambda: (np.array(probe_safe_characters(do_lower_case), np.int64),))
    return safe.tolist()


def probe_safe_characters(do_lower_case):
    """`safe_characters` without the caches: runs the probe."""
    tables = char_table.build_char_table(do_lower_case)
    candidates = np.concatenate([np.arange(first, last + 1)
                                 for first, last in _CANDIDATE_RANGES])
    info = char_table.lookup(tables, candidates)
    plain = ((info & char_table.KIND_MASK) == char_table.OTHER) & (
        (info & char_table.SPECIAL) == 0) & (
        ((info >> char_table.LENGTH_SHIFT) & 3) == 1)
    candidates = [int(cp) for cp in candidates[plain] if not unicodedata.combining(chr(cp))]
    info = char_table.lookup(tables, candidates)
    outputs = [chr(cp + (entry >> char_table.VALUE_SHIFT))
               for cp, entry in zip(candidates, info.tolist(), strict=True)]
    alone = (info & char_table.ALONE) != 0
    # A probe vocab where "a{c}a" gives ids that tell the output character and the split.
    pieces = sorted(set(outputs) | {"a"})
    vocab = ["[UNK]"] + pieces + ["##" + p for p in pieces]
    ids = {token: i for i, token in enumerate(vocab)}
    fast = tf_text.FastBertTokenizer(
        vocab=vocab, suffix_indicator="##", unknown_token="[UNK]",
        lower_case_nfd_strip_accents=do_lower_case, token_out_type=tf.int32)
    got = fast.tokenize(tf.constant([f"a{chr(cp)}a" for cp in candidates])).to_list()
    safe = []
    for cp, output, split, tokens in zip(candidates, outputs, alone, got, strict=True):
        want = ([ids["a"], ids[output], ids["a"]] if split
                else [ids["a"], ids["##" + output], ids["##a"]])
        if tokens == want:
            safe.append(cp)
    return safe


def _ranges(code_points):
    """Sorted code points -> [(first, last)] runs of consecutive ones."""
    runs = []
    for cp in code_points:
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return [tuple(run) for run in runs]
