"""Property tests: kbert's FullTokenizer equals Google's on random text, and its offsets.

Complements test_tokenizer.py (real text, hand-picked hard cases, one unbiased random test): the
strategies here aim at the characters where a re-implementation goes wrong, build words that
are in the real vocab (so WordPiece, not only [UNK], is exercised), cross the 200-character
word limit, and check every piece's span, in both casing modes. Each example is a list of
texts tokenized in one batch, so hundreds of examples stay fast.

No code points are excluded, not even those unassigned in Python 3.11's Unicode 14 but
assigned in later Unicode versions (which an ICU-based normaliser, as kbert's tokenizer once
used through tf-text, classifies differently from Google's `unicodedata`): kbert now classifies
and normalises every character with a table built from this Python's `unicodedata` (see
`char_table`), the database Google's tokenizer reads, so they must agree there too.
`test_unassigned_in_python_311` pins a few such characters.
"""

import functools
import unicodedata

import pytest
from bert import tokenization as google_tokenization
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kbert.tokenization import shortcut
from tests.tokenization.test_tokenizer import word_of_each_char

EXAMPLES = 300
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _chars(first, last):
    return st.characters(min_codepoint=first, max_codepoint=last)


@functools.cache
def _expanding_chars():
    """Characters that Google's uncased normalisation turns into 0, 2 or 3 characters."""
    chars = []
    for cp in range(0x30000):
        char = chr(cp)
        if unicodedata.category(char) in ("Cs", "Cn"):
            continue
        out = unicodedata.normalize("NFD", char.lower())
        if len("".join(c for c in out if unicodedata.category(c) != "Mn")) != 1:
            chars.append(char)
    return chars


def _vocab_words():
    return st.sampled_from(["the", "un", "##aff", "##able", "bert", "covid", "##19", "straße",
                            "cafe", "naive", "σοφία", "ΟΔΟΣ", "東京", "한국", "über", "x"])


# Each alternative is a class of characters where Google's tokenizer does something special.
HARD_CHARS = st.one_of(
    st.characters(categories=["Mn", "Mc", "Me"]),  # combining marks: stripped when uncased
    st.sampled_from("\u0301\u0308\u0327\u030a\u0342\u0345"),  # the common accents, often
    _chars(0xC0, 0x24F),  # Latin with accents, precomposed
    _chars(0x370, 0x3FF), st.sampled_from("ΣσςΑΟ"),  # Greek; final sigma in str.lower
    _chars(0x4E00, 0x9FFF), _chars(0x3400, 0x4DBF), _chars(0x20000, 0x2A6DF),  # CJK
    _chars(0xF900, 0xFAFF), _chars(0x2F800, 0x2FA1F), _chars(0x3040, 0x30FF),  # kana: not CJK
    _chars(0xAC00, 0xD7A3), _chars(0x1100, 0x11FF), _chars(0x3130, 0x318F),  # Hangul, jamo
    st.characters(categories=["Cc", "Cf"]),  # control and format: deleted
    st.sampled_from("\u200b\u200c\u200d\u2060\ufeff\u00ad\x00\ufffd\x7f\x85"),  # zero-width
    st.characters(categories=["Zs", "Zl", "Zp"]),  # separators: \u00a0, U+2028, U+3000
    st.sampled_from(" \t\n\r\x0b\x0c\x1c\u00a0\u2028\u2029\u3000"),
    st.characters(categories=["Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"]),  # punctuation
    st.sampled_from("$+<=>^`|~"),  # ASCII symbols Google counts as punctuation
    st.characters(categories=["Sm", "Sc", "Sk", "So"]),  # symbols: not punctuation
    _chars(0x1F300, 0x1FAFF), st.sampled_from("\ufe0f\U0001f3fd\u200d"),  # emoji, modifiers
    _chars(0xFF01, 0xFF5E), _chars(0xFB00, 0xFB06),  # full-width ASCII, ligatures
    st.characters(categories=["Cn"]),  # unassigned in Python 3.11 (see the module docstring)
    st.deferred(lambda: st.sampled_from(_expanding_chars())),  # İ, ŉ, Hangul syllables
)
ANY_CHAR = st.characters(codec="utf-8")  # every category but surrogates (not encodable)
LETTERS = st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo"])


def _mixed_text(max_size=40):
    return st.text(alphabet=st.one_of(HARD_CHARS, ANY_CHAR, st.sampled_from("aeAE ,.")),
                   min_size=1, max_size=max_size)


def _vocab_text():
    """Words of the real vocab (cased at random) joined by hard characters: real WordPiece."""
    word = st.tuples(_vocab_words(), st.sampled_from([str, str.upper, str.title])).map(
        lambda w: w[1](w[0].removeprefix("##")))
    part = st.one_of(word, word, HARD_CHARS, st.just(" "))
    return st.lists(part, min_size=1, max_size=12).map("".join)


def _long_word():
    """One word around the 200-character limit, counted after normalisation (accents go)."""
    body = st.text(alphabet=st.one_of(st.sampled_from("abéÅ\u0301ß"), LETTERS),
                   min_size=190, max_size=215)
    return st.tuples(body, st.sampled_from(["", " ok", "\u200b", ","])).map("".join)


def _shortcut_text():
    """Text that mostly takes the FastBertTokenizer shortcut: printable ASCII, the non-ASCII
    characters verified for it (in either casing), ASCII whitespace, and runs of word
    characters around its 50-character limit and Google's 200-character word limit."""
    safe = sorted(set(shortcut.safe_characters(True)) | set(shortcut.safe_characters(False)))
    word_char = st.one_of(_chars(0x21, 0x7E), st.sampled_from([chr(c) for c in safe]))
    word = st.one_of(st.text(alphabet=word_char, min_size=1, max_size=8),
                     st.text(alphabet=word_char, min_size=45, max_size=140),
                     st.text(alphabet=_chars(0x61, 0x7A), min_size=198, max_size=202))
    part = st.one_of(word, word, _vocab_words().map(lambda w: w.removeprefix("##")))
    space = st.text(alphabet=st.sampled_from(" \t\n\r"), min_size=1, max_size=2)
    return st.lists(st.tuples(part, space).map("".join), min_size=1, max_size=8).map("".join)


TEXT_BATCHES = {
    "any": st.lists(st.text(alphabet=ANY_CHAR, max_size=40), min_size=1, max_size=16),
    "hard": st.lists(_mixed_text(), min_size=4, max_size=16),
    "vocab": st.lists(_vocab_text(), min_size=4, max_size=16),
    "long": st.lists(_long_word(), min_size=1, max_size=4),
    "shortcut": st.lists(_shortcut_text(), min_size=4, max_size=16),
}


def google_ids(oracle, texts):
    return [oracle.convert_tokens_to_ids(oracle.tokenize(t)) for t in texts]


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
@pytest.mark.parametrize("kind", list(TEXT_BATCHES))
def test_ids_equal_google(kbert_tokenizer, google_tokenizer, kind, lower):
    # Long words are slow for Google's tokenizer, and 100 examples cross the limit plenty.
    @settings(PROPERTY, max_examples=100 if kind in ("long", "shortcut") else EXAMPLES)
    @given(texts=TEXT_BATCHES[kind])
    def check(texts):
        ours = kbert_tokenizer(lower).tokenize_ids(texts).to_list()
        oracle = google_ids(google_tokenizer(lower), texts)
        for text, want, got in zip(texts, oracle, ours, strict=True):
            assert got == want, (text, google_tokenizer(lower).tokenize(text))

    check()


def test_unassigned_in_python_311(kbert_tokenizer, google_tokenizer):
    # Assigned in Unicode 15, unassigned (Cn) in Python 3.11's Unicode 14: a Cyrillic modifier
    # letter (Lm), a CJK Extension H ideograph (outside Google's CJK ranges), a Kawi sign and a
    # Kannada sign (combining marks in 15.0, which a newer normaliser would strip).
    unassigned = "\U0001e030\U00031350\U00011f00\u0cf3"
    assert {unicodedata.category(c) for c in unassigned} == {"Cn"}
    text = "a\U0001e030b \U00031350 x\U00011f00y \u0cf3z Σ\U00011f00"
    for lower in (True, False):
        assert kbert_tokenizer(lower).tokenize(text) == google_tokenizer(lower).tokenize(text)


def normalise(text, lower):
    """What Google's BasicTokenizer makes of `text` before splitting it (no splits here)."""
    text = google_tokenization.BasicTokenizer()._clean_text(text)
    if not lower:
        return text
    text = unicodedata.normalize("NFD", text.lower())
    # A lone capital sigma lower-cases to σ; in context it may be final (ς).
    return "".join(c for c in text if unicodedata.category(c) != "Mn").replace("ς", "σ")


def _clusters(tokens, begins, ends):
    """Runs of pieces whose spans overlap (pieces of one Hangul syllable share its span)."""
    clusters = []
    for token, begin, end in zip(tokens, begins, ends, strict=True):
        if clusters and begin < clusters[-1][2]:
            clusters[-1][0].append(token)
            clusters[-1][2] = max(clusters[-1][2], end)
        else:
            clusters.append([[token], begin, end])
    return clusters


def _preserves_length(text, lower):
    return all(len(normalise(c, lower)) == 1 for c in text)


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_offsets_cover_the_text(kbert_tokenizer, google_tokenizer, lower):
    """Spans are ordered; each slices back to its pieces; between them is only whitespace.

    Where every character normalises to exactly one character, no two pieces share a span.
    Everywhere, a run of pieces sharing characters normalises to those pieces joined ('##'
    removed), an [UNK] spans one whole word, and the text outside the spans normalises to
    whitespace only: no output character is lost or counted twice. word_ids index the
    whitespace-separated words (test_tokenizer.word_of_each_char).
    """
    tokenizer = kbert_tokenizer(lower)
    checked = {"pieces": 0, "unique_spans": 0, "shared": 0}

    @PROPERTY
    @given(texts=st.lists(st.one_of(_mixed_text(), _vocab_text()), min_size=4, max_size=16))
    def check(texts):
        out = tokenizer.tokenize_ids_with_offsets(texts)
        rows = zip(texts, *(out[k].to_list() for k in ("token_ids", "begins", "ends", "word_ids")),
                   google_ids(google_tokenizer(lower), texts), strict=True)
        for text, ids, begins, ends, word_ids, oracle in rows:
            assert ids == oracle, text
            tokens = tokenizer.convert_ids_to_tokens(ids)
            position = 0
            for pieces, begin, end in _clusters(tokens, begins, ends):
                assert position <= begin < end <= len(text), (text, tokens, begins, ends)
                assert normalise(text[position:begin], lower).strip() == "", (text, tokens)
                source = normalise(text[begin:end], lower)
                if "[UNK]" in pieces:
                    assert pieces == ["[UNK]"] and source and not source.isspace(), text
                else:
                    joined = "".join(p.removeprefix("##") for p in pieces)
                    assert source == normalise(joined, lower), (text, pieces, begin, end)
                    checked["pieces"] += len(pieces)
                    checked["shared"] += len(pieces) > 1
                if _preserves_length(text, lower):
                    assert len(pieces) == 1, (text, pieces)
                    checked["unique_spans"] += 1
                position = end
            assert normalise(text[position:], lower).strip() == "", (text, tokens)
            words = word_of_each_char(text)
            assert [words[b] for b in begins] == word_ids, text

    check()
    # The strategies really reached each case.
    assert checked["pieces"] > 1000 and checked["unique_spans"] > 1000, checked
    if lower:
        assert checked["shared"] > 0, checked
