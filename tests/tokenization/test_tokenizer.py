"""kbert's FullTokenizer against Google's `tokenization.FullTokenizer` (bert-tensorflow 1.0.4)."""

import json
import pathlib
import unicodedata

import pytest
import tensorflow as tf
from bert import tokenization as google_tokenization
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kbert.tokenization import tokenizer as tokenizer_lib

SAMPLE = pathlib.Path(__file__).parents[1] / "fixtures" / "tokenization" / "sample.json"
HARD_CASES = [
    "Straße ﬁ ﬃ Ｆｕｌｌ-width İstanbul ǅemal ŉ", "naïve café résumé Ångström Kelvin \u212a",
    "東京は日本の首都です。", "한국어 텍스트, 가나다라!", "emoji 😀👍🏽 ok ❤️", "ＡＢＣ １２３",
    "zero\u200bwidth con\u0000trol\u0007x\ufffdy soft\u00adhyphen \ufeffBOM",
    "a\u00a0b\tc\r\nd\x0be\x0cf\x1cg\x85h", "line\u2028sep\u2029para mid\u3000space",
    "!!!???...,,,--((]]", "€100 or ¥200 $5 ^_^ `q` ~a|b", "¿Qué? ¡Sí! «quoted» „low“ ‘single’",
    "x" * 250 + " short", "é" * 201, "ab" * 100, "", "   ", "\t\n", "\u0301",
    "[MASK] [CLS] don't [SEP] [UNK] [unused5]", "A\u0301 e\u0308 (decomposed input)",
    "كلمة عربية", "ΟΔΟΣ ΣΑΣ Σ aΣ. AΣ\u200b ΑΣ'Σ ΣΑΣ\u0301 Σ\u0301", "Ünïcödé" * 30,
    "Greek question mark\u037e ano teleia\u0387", "\U00020000\U0002f800\uf900 ext CJK",
    "ℌ ℍ ⅷ Ⅷ ⓐ Ⓐ ª º ᵃ", "ﬀ ﬆ Ꭰ ꭰ ẞ ß",
]


def sample_texts():
    sections = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return [text for section in sections.values() for text in section]


def google_ids(oracle, texts):
    return [oracle.convert_tokens_to_ids(oracle.tokenize(t)) for t in texts]


@pytest.mark.parametrize("lower", [True, False])
def test_ids_identical_to_google_on_real_text(kbert_tokenizer, google_tokenizer, lower):
    texts = sample_texts() + HARD_CASES
    assert len(texts) > 2000
    ours = kbert_tokenizer(lower).tokenize_ids(texts).to_list()
    oracle = google_ids(google_tokenizer(lower), texts)
    mismatches = [(t, want, got) for t, want, got in zip(texts, oracle, ours, strict=True)
                  if want != got]
    assert not mismatches, mismatches[:3]
    assert sum(map(len, ours)) > 70_000  # the sample really was tokenized


def test_hard_cases_exactly(kbert_tokenizer, google_tokenizer):
    tokenizer, oracle = kbert_tokenizer(True), google_tokenizer(True)
    for text in HARD_CASES:
        assert tokenizer.tokenize(text) == oracle.tokenize(text), text
    assert tokenizer.tokenize("Straße ﬁ") == ["st", "##raße", "ﬁ"]  # no NFKC case folding
    assert tokenizer.tokenize("con\u200btrol") == ["control"]  # deleted, pieces joined
    assert tokenizer.tokenize("a\u2028b") == ["a", "b"]
    assert tokenizer.tokenize("İ") == ["i"]  # Python's 'İ'.lower() is 'i̇'; the dot is Mn
    assert tokenizer.tokenize("です") == ["て", "##す"]  # every Mn stripped, as Google
    assert tokenizer.tokenize("ΟΔΟΣ") == ["ο", "##δ", "##ος"]  # final sigma, as str.lower
    assert tokenizer.tokenize("x" * 201) == ["[UNK]"]
    assert tokenizer.tokenize("x" * 200) != ["[UNK]"]
    assert tokenizer.tokenize("[MASK]") == ["[", "mask", "]"]


def test_bytes_and_invalid_utf8_like_google(kbert_tokenizer, google_tokenizer):
    tokenizer, oracle = kbert_tokenizer(True), google_tokenizer(True)
    for raw in [b"caf\xc3\xa9", b"ab\xffcd ef", b"\xe4\xb8x \xe4\xb8\xad", b"\xc3"]:
        assert tokenizer.tokenize(raw) == oracle.tokenize(raw), raw


# Characters the tokenizer treats specially, to mix into random text.
_TRICKY = st.sampled_from(
    list("Σσς \u0301\u0308\u200b\u00ad\u2028\u00a0\t\n\x00\x07\ufffdİI'.-,!中가ﬁÅ😀"))


@settings(max_examples=120, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(alphabet=st.one_of(st.characters(), _TRICKY), max_size=40),
                      min_size=1, max_size=24))
@pytest.mark.parametrize("lower", [True, False])
def test_random_unicode_matches_google(kbert_tokenizer, google_tokenizer, lower, texts):
    ours = kbert_tokenizer(lower).tokenize_ids(texts).to_list()
    assert ours == google_ids(google_tokenizer(lower), texts)


def test_basic_tokenize_matches_google(kbert_tokenizer, google_tokenizer):
    texts = HARD_CASES[:12]
    ours = tokenizer_lib.basic_tokenize(texts, do_lower_case=True).to_list()
    oracle = google_tokenizer(True).basic_tokenizer
    assert [[w.decode() for w in words] for words in ours] == [oracle.tokenize(t) for t in texts]
    assert kbert_tokenizer(True).basic_tokenize(texts).to_list() == ours


def _strip_accents(text):
    """Google's uncased normalisation of one span of text (no splitting)."""
    text = google_tokenization.BasicTokenizer()._clean_text(text).lower()
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


def test_offsets_slice_back_to_pieces(kbert_tokenizer):
    tokenizer = kbert_tokenizer(True)
    texts = sample_texts()[::4] + HARD_CASES
    out = tokenizer.tokenize_ids_with_offsets(texts)
    ids, begins, ends = (out[k].to_list() for k in ("token_ids", "begins", "ends"))
    assert ids == tokenizer.tokenize_ids(texts).to_list()
    checked = 0
    for text, row_ids, row_begins, row_ends in zip(texts, ids, begins, ends, strict=True):
        spans = list(zip(row_begins, row_ends, strict=True))
        for i, (token, (begin, end)) in enumerate(
                zip(tokenizer.convert_ids_to_tokens(row_ids), spans, strict=True)):
            assert 0 <= begin < end <= len(text)
            source = _strip_accents(text[begin:end]).strip()
            piece = token[2:] if token.startswith("##") else token
            shared = spans.count((begin, end)) > 1  # one character, several pieces (Hangul)
            if token == "[UNK]" or shared:
                continue
            # A lone capital sigma is σ; in context it may be final (ς).
            assert source.replace("ς", "σ") == piece.replace("ς", "σ"), (text, token)
            checked += 1
            if i:  # pieces are in text order and never overlap
                assert begin >= spans[i - 1][1]
    assert checked > 20_000


def test_offsets_are_python_str_indices(kbert_tokenizer):
    text = "😀 Héllo,  wörld! 東京 ﬁ\u200b x\u0301y"
    pieces = kbert_tokenizer(True).tokenize_with_offsets(text)
    assert pieces.tokens == ["[UNK]", "hello", ",", "world", "!", "東", "京", "ﬁ", "x", "##y"]
    assert [text[b:e] for b, e in zip(pieces.begins, pieces.ends, strict=True)] == [
        "😀", "Héllo", ",", "wörld", "!", "東", "京", "ﬁ\u200b", "x\u0301", "y"]
    assert pieces.word_ids == [0, 1, 1, 2, 2, 3, 3, 4, 5, 5]


def word_of_each_char(text):
    """Index of the whitespace-separated word of each character of `text`, as documented.

    Whitespace is Google's `_is_whitespace` plus what `str.split` breaks on, except characters
    Google deletes (\x0b, \x85 ...): they belong to words, like every other character.
    """
    words, word, after_space = [], -1, True
    for char in text:
        deleted = ord(char) in (0, 0xFFFD) or google_tokenization._is_control(char)
        space = not deleted and (char.isspace() or google_tokenization._is_whitespace(char))
        word += not space and after_space
        after_space = space
        words.append(word)
    return words


def test_word_ids_index_whitespace_words(kbert_tokenizer):
    texts = sample_texts()[:300] + HARD_CASES + ["a \x00 b\x0bc", "\x07 x"]
    out = kbert_tokenizer(False).tokenize_ids_with_offsets(texts)
    for text, begins, word_ids in zip(texts, out["begins"].to_list(), out["word_ids"].to_list(),
                                      strict=True):
        words = word_of_each_char(text)
        assert [words[b] for b in begins] == word_ids, text
    assert kbert_tokenizer(False).tokenize_with_offsets("a \x00 b\x0bc").word_ids == [0, 2]


def test_in_tf_function_and_tf_data(kbert_tokenizer):
    tokenizer = kbert_tokenizer(True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def lengths(texts):
        return tokenizer.tokenize_ids(texts).row_lengths()

    assert lengths(tf.constant(["hello world", "", "a b c"])).numpy().tolist() == [2, 0, 3]
    dataset = tf.data.Dataset.from_tensor_slices(["hello world", "a b c"]).batch(2).map(
        tokenizer.tokenize_ids_with_offsets)
    batch = next(iter(dataset))
    assert batch["token_ids"].to_list() == [[7592, 2088], [1037, 1038, 1039]]
    assert batch["ends"].to_list() == [[5, 11], [1, 3, 5]]
    with pytest.raises(ValueError, match=r"expected a batch of strings \[batch\]"):
        tokenizer.tokenize_ids("not a batch")


@pytest.fixture(scope="module")
def covid_vocab(vocab_file, tmp_path_factory):
    """The real vocab with [unused0..2] renamed, and an added_tokens.txt beside it."""
    lines = pathlib.Path(vocab_file).read_text(encoding="utf-8").splitlines()
    for slot, token in enumerate(["covid-19", "SARS-CoV-2", "中文-x"]):
        lines[lines.index(f"[unused{slot}]")] = token
    directory = tmp_path_factory.mktemp("covid_vocab")
    (directory / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "added_tokens.txt").write_text("covid-19\nSARS-CoV-2\n", encoding="utf-8")
    return str(directory / "vocab.txt")


def test_never_split(covid_vocab, kbert_tokenizer, google_tokenizer):
    assert tokenizer_lib.FullTokenizer(covid_vocab).never_split == [  # added_tokens.txt
        "covid-19", "SARS-CoV-2"]
    tokenizer = tokenizer_lib.FullTokenizer(
        covid_vocab, never_split=["covid-19", "SARS-CoV-2", "[MASK]", "中文-x"])
    assert tokenizer.tokenize("SARS-CoV-2 causes covid-19.") == [
        "SARS-CoV-2", "causes", "covid-19", "."]
    assert tokenizer.tokenize("(covid-19)\u200bcovid-19") == ["(", "covid-19", ")", "covid-19"]
    assert tokenizer.tokenize("a [MASK]. 中文-x") == ["a", "[MASK]", ".", "中文-x"]
    # Inside a longer word it is not a word of its own, so it is tokenized as usual; and
    # matching is case-sensitive.
    text = "xcovid-19 covid-19s \u0301covid-19 COVID-19"
    assert tokenizer.tokenize(text) == google_tokenizer(True).tokenize(text)
    assert kbert_tokenizer(True).tokenize("covid-19") == ["co", "##vid", "-", "19"]
    pieces = tokenizer.tokenize_with_offsets("on covid-19!")
    assert (pieces.tokens, pieces.begins, pieces.ends) == (
        ["on", "covid-19", "!"], [0, 3, 11], [2, 11, 12])
    assert tokenizer.tokenize_ids(["covid-19", "a covid-19"]).to_list() == [[1], [1037, 1]]
    with pytest.raises(ValueError, match="never_split tokens not in .*vocab.txt"):
        tokenizer_lib.FullTokenizer(covid_vocab, never_split=["not-in-vocab"])


def test_conversions(kbert_tokenizer):
    tokenizer = kbert_tokenizer(True)
    tokens = tokenizer.tokenize("Unaffable, BERT!")
    assert tokens == ["una", "##ffa", "##ble", ",", "bert", "!"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenizer.inv_vocab[ids[0]] == "una" and tokenizer.vocab["una"] == ids[0]
