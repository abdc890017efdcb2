"""Google's character classes and normalisation as one code-point lookup table.

Google's `tokenization.BasicTokenizer` classifies characters with Python's `unicodedata` and
lower-cases with `str.lower`. The table is computed from exactly those functions, once per
process, so the in-graph tokenizer agrees with Google's under the Unicode version of the Python
that runs it (Python 3.11: Unicode 14.0), whatever ICU or RE2 tables TensorFlow was built with.

The table holds one int32 per code point (0 to 0x10FFFF), stored in two levels (blocks of 256
code points, each distinct block once: about 160 KB instead of 4.4 MB, which matters for graphs,
SavedModels and tf.data):

    bits 0-1  kind: OTHER, SPACE (`_is_whitespace`, or a separator that `str.split` breaks on),
              DELETE (`_clean_text` drops it), CJK (`_is_chinese_char`)
    bit  2    the character is punctuation (`_is_punctuation`)
    bit  3    its output is a word by itself: one punctuation character, or it is CJK
    bits 4-5  its role in the final-sigma context of `str.lower`: NEITHER, IGNORABLE, CASED
    bits 6-7  how many characters it outputs (0 to 3): 0 for SPACE and DELETE; uncased, the
              length of `_run_strip_accents(c.lower())` (NFD, then Mn marks dropped); cased, 1
    bit  8    special: it outputs several characters or none without being whitespace, or
              it is a capital sigma (uncased); text without these takes a shorter path
    bits 9-   signed: the output character minus the character itself when it outputs one
              (0 if it outputs itself), else where its output starts in the expansions array
"""

import functools
import sys
import unicodedata

import numpy as np

from kbert.tokenization import disk_cache

OTHER, SPACE, DELETE, CJK = 0, 1, 2, 3
KIND_MASK = 0b11
PUNCTUATION = 1 << 2
ALONE = 1 << 3
CASE_SHIFT = 4
NEITHER, IGNORABLE, CASED = 0, 1, 2
LENGTH_SHIFT = 6
SPECIAL = 1 << 8
VALUE_SHIFT = 9
BLOCK_BITS = 8
BLOCK_SIZE = 1 << BLOCK_BITS

CAPITAL_SIGMA, SMALL_SIGMA, FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
NUM_CODE_POINTS = 0x110000
# As tokenization.py `_is_chinese_char`.
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# As `_is_punctuation`: every non-letter, non-digit printable ASCII character.
_ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))


def is_cjk(code_points):
    """Whether each code point is a CJK ideograph, as `_is_chinese_char`.

    Args:
        code_points: int or int array.

    Returns:
        bool, or a bool array of the same shape.
    """
    code_points = np.asarray(code_points)
    return functools.reduce(np.logical_or, [(code_points >= first) & (code_points <= last)
                                            for first, last in _CJK_RANGES])


@functools.lru_cache(maxsize=2)
def build_char_table(do_lower_case):
    """The table for one casing mode, from this Python's `unicodedata`.

    About 1 s to compute, so it is kept in memory and on disk (see `disk_cache`), keyed by
    the Unicode version and this module's source.

    Args:
        do_lower_case: bool. Uncased (lower-case and strip accents) or cased.

    Returns:
        (block_starts, blocks, expansions): int32 arrays. The entry of code point `cp` is
        `blocks[block_starts[cp >> 8] + (cp & 255)]`; expansions [expansion code points].
    """
    key = (f"unicode {unicodedata.unidata_version} lower {do_lower_case} "
           f"source {disk_cache.source_digest(sys.modules[__name__])}")
    return disk_cache.cached_arrays(f"char_table_{'uncased' if do_lower_case else 'cased'}",
                                    key, lambda: compute_char_table(do_lower_case))


def compute_char_table(do_lower_case):
    """`build_char_table` without the caches."""
    properties = _properties()
    kind, punctuation = properties["kind"], properties["punctuation"]
    produces = (kind == OTHER) | (kind == CJK)
    # Every character that is not deleted or whitespace outputs itself...
    output = np.where(produces, (1 << LENGTH_SHIFT) | (ALONE * (punctuation | (kind == CJK))), 0)
    expansions = []
    if do_lower_case:  # ...unless lower-casing and stripping accents change it.
        for cp, chars in properties["normalised"].items():
            if not produces[cp]:
                continue
            if len(chars) == 1:
                value = chars[0] - cp
                flags = ALONE * (punctuation[chars[0]] or kind[cp] == CJK)
            else:
                value, flags = len(expansions), 0
                expansions.extend(chars)
            output[cp] = (len(chars) << LENGTH_SHIFT) | (value << VALUE_SHIFT) | flags
        output |= properties["case"] << CASE_SHIFT
        output[CAPITAL_SIGMA] |= SPECIAL
    length = (output >> LENGTH_SHIFT) & 3
    output |= np.where((length > 1) | ((length == 0) & (kind != SPACE)), SPECIAL, 0)
    table = (kind | (PUNCTUATION * punctuation) | output).astype(np.int32)
    block_ids = {}
    blocks = table.reshape(-1, BLOCK_SIZE)
    block_index = np.array([block_ids.setdefault(block.tobytes(), len(block_ids))
                            for block in blocks], np.int32)
    unique_blocks = np.zeros((len(block_ids), BLOCK_SIZE), np.int32)
    unique_blocks[block_index] = blocks
    return (block_index * BLOCK_SIZE, unique_blocks.reshape(-1),
            np.array(expansions or [0], np.int32))


def lookup(tables, code_points):
    """Table entries of an int array of code points, in numpy (tests and debugging)."""
    block_starts, blocks, _ = tables
    code_points = np.asarray(code_points)
    return blocks[block_starts[code_points >> BLOCK_BITS] + (code_points & (BLOCK_SIZE - 1))]


@functools.lru_cache(maxsize=1)
def _properties():
    """Per code point: kind, punctuation, case role, and uncased outputs that differ."""
    categories = list(map(unicodedata.category, map(chr, range(NUM_CODE_POINTS))))
    names = sorted(set(categories))
    codes = dict(zip(names, range(len(names)), strict=True))
    category = np.fromiter(map(codes.__getitem__, categories), np.int8, NUM_CODE_POINTS)

    def of_category(*wanted):
        return np.isin(category, [codes[name] for name in wanted if name in codes])

    # Kinds, in `_clean_text` order: dropped first, then whitespace.
    is_space = of_category("Zs")
    is_space[[ord(" "), ord("\t"), ord("\n"), ord("\r")]] = True
    # `whitespace_tokenize` uses `str.split()`, which also breaks on characters that
    # `_clean_text` keeps (U+2028 and U+2029 under Unicode 14).
    assigned = np.flatnonzero(~of_category("Cn", "Co", "Cs"))
    is_space[[cp for cp in assigned if chr(cp).isspace()]] = True
    is_deleted = of_category("Cc", "Cf")
    is_deleted[[ord("\t"), ord("\n"), ord("\r")]] = False
    is_deleted[[0, 0xFFFD]] = True
    kind = np.full(NUM_CODE_POINTS, OTHER, np.int64)
    for first, last in _CJK_RANGES:
        kind[first:last + 1] = CJK
    kind[is_space] = SPACE
    kind[is_deleted] = DELETE

    punctuation = of_category(*(name for name in names if name.startswith("P")))
    for first, last in _ASCII_PUNCTUATION:
        punctuation[first:last + 1] = True

    # NUL separates the characters in the probes below; it is a deleted character anyway.
    assigned = assigned[assigned != 0]
    return {"kind": kind, "punctuation": punctuation,
            "case": _case_roles(assigned, kind),
            "normalised": _uncased_outputs(assigned, of_category("Mn"))}


def _case_roles(assigned, kind):
    """Each character's role in `str.lower`'s Final_Sigma context, probed from `str.lower`.

    Python lower-cases U+03A3 to final sigma when it follows a cased character (skipping
    case-ignorable ones) and no cased character follows it. "AXΣ" ends in final sigma iff X is
    cased or case-ignorable; " XΣ" iff X is cased and not case-ignorable.
    """
    # Google lower-cases each whitespace token after deleting control characters and putting
    # spaces around CJK characters: deleted characters are invisible to the context, and
    # whitespace and CJK characters end it, so only the others are probed.
    assigned = assigned[kind[assigned] == OTHER]
    chars = [chr(cp) for cp in assigned]
    after_a = "\0".join("A" + c + "Σ" for c in chars).lower().split("\0")
    after_space = "\0".join(" " + c + "Σ" for c in chars).lower().split("\0")
    case = np.zeros(NUM_CODE_POINTS, np.int64)
    for cp, a, s in zip(assigned, after_a, after_space, strict=True):
        if s[-1] == "ς":
            case[cp] = CASED
        elif a[-1] == "ς":
            case[cp] = IGNORABLE
    case[kind == DELETE] = IGNORABLE
    return case


def _uncased_outputs(assigned, is_mark):
    """{code point: output code points} where `_run_strip_accents(c.lower())` is not c."""
    chars = [chr(cp) for cp in assigned]
    # One pass over all characters joined by NUL (a starter, neither cased nor ignorable, so
    # no character's lower-casing or decomposition sees its neighbours).
    strip_marks = dict.fromkeys(np.flatnonzero(is_mark).tolist())
    outputs = unicodedata.normalize("NFD", "\0".join(chars).lower())
    outputs = outputs.translate(strip_marks).split("\0")
    changed = {}
    for cp, char, output in zip(assigned.tolist(), chars, outputs, strict=True):
        if output != char:
            if len(output) > 3:
                raise AssertionError(f"U+{cp:04X} normalises to {len(output)} characters")
            changed[cp] = tuple(map(ord, output))
    return changed
