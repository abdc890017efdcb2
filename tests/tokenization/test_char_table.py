"""The code-point table against Google's own character functions, for every code point."""

import unicodedata

import numpy as np
from bert import tokenization as google_tokenization

from kbert.tokenization import char_table

_BASIC = google_tokenization.BasicTokenizer(do_lower_case=True)


def google_kind(char):
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or google_tokenization._is_control(char):
        return char_table.DELETE
    if google_tokenization._is_whitespace(char) or char.isspace():
        return char_table.SPACE
    return char_table.CJK if _BASIC._is_chinese_char(cp) else char_table.OTHER


def code_points():
    """Every assigned code point, and every 97th unassigned or private-use one."""
    for cp in range(char_table.NUM_CODE_POINTS):
        category = unicodedata.category(chr(cp))
        if category not in ("Cn", "Co", "Cs") or (category != "Cs" and cp % 97 == 0):
            yield cp


def test_every_assigned_code_point_matches_google():
    all_code_points = np.arange(char_table.NUM_CODE_POINTS)
    uncased_tables, cased_tables = (char_table.build_char_table(lower) for lower in (True, False))
    uncased = char_table.lookup(uncased_tables, all_code_points)
    cased = char_table.lookup(cased_tables, all_code_points)
    expansions = uncased_tables[2]
    for cp in code_points():
        char = chr(cp)
        kind = google_kind(char)
        punctuation = google_tokenization._is_punctuation(char)
        for entry in (int(uncased[cp]), int(cased[cp])):
            assert entry & char_table.KIND_MASK == kind, hex(cp)
            assert bool(entry & char_table.PUNCTUATION) == punctuation, hex(cp)
        length = (int(uncased[cp]) >> char_table.LENGTH_SHIFT) & 3
        value = int(uncased[cp]) >> char_table.VALUE_SHIFT
        if kind in (char_table.SPACE, char_table.DELETE):
            assert length == 0 and (int(cased[cp]) >> char_table.LENGTH_SHIFT) & 3 == 0
            continue
        assert int(cased[cp]) >> char_table.VALUE_SHIFT == 0  # outputs itself
        want = _BASIC._run_strip_accents(char.lower())
        got = [cp + value] if length == 1 else expansions[value:value + length].tolist()
        assert "".join(map(chr, got)) == want, hex(cp)


def test_case_roles_follow_python_lower():
    uncased = char_table.lookup(char_table.build_char_table(True),
                                np.arange(char_table.NUM_CODE_POINTS))
    roles = (uncased >> char_table.CASE_SHIFT) & 3
    # Cased letters, case-ignorable marks and apostrophes, and characters that are neither.
    for char, role in [("a", char_table.CASED), ("Ω", char_table.CASED),
                       ("\u0301", char_table.IGNORABLE), ("'", char_table.IGNORABLE),
                       ("\u200b", char_table.IGNORABLE), ("1", char_table.NEITHER),
                       (" ", char_table.NEITHER), ("中", char_table.NEITHER)]:
        assert roles[ord(char)] == role, char
    assert np.isin(roles, [0, 1, 2]).all()
    assert unicodedata.unidata_version  # the table follows this Python's Unicode version


def test_is_cjk_is_googles_is_chinese_char():
    code_points = np.arange(char_table.NUM_CODE_POINTS)
    google = np.array([_BASIC._is_chinese_char(int(cp)) for cp in code_points])
    np.testing.assert_array_equal(char_table.is_cjk(code_points), google)
    assert char_table.is_cjk(ord("好")) and not char_table.is_cjk(ord("，"))
