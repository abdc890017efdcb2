"""kbert.FullTokenizer against Google's tokenization.FullTokenizer (bert-tensorflow)."""

import os
import pathlib
import random
import unicodedata

import pytest
from absl import flags
from bert import tokenization as google_tokenization

import kbert

FIXTURE = pathlib.Path(__file__).parent.parent / "fixtures" / "enwiki_wiki_29_head.txt"
HARD_CASES = [
    "Straße ﬁ Ｆｕｌｌ-width İstanbul", "naïve café résumé Ångström", "東京は日本の首都です。",
    "한국어 텍스트", "emoji 😀👍🏽 ok", "zero\u200bwidth con\u0000trol\u0007x\ufffdy",
    "a\u00a0b\tc\r\nd", "line\u2028sep\u2029para", "!!!???...,,,--((]]", "x" * 250 + " short",
    "", "   ", "\t\n", "[MASK] [CLS] don't", "A\u0301 e\u0308", "ＡＢＣ １２３", "€100 or ¥200",
    "¿Qué? ¡Sí!", "«quoted» „low“", "كلمة عربية", "ελληνικά ΚΕΦΑΛΑΙΑ", "Ünïcödé" * 30,
]


def google(vocab_file, lower):
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return google_tokenization.FullTokenizer(vocab_file, do_lower_case=lower)


def random_texts(count, seed):
    """Random text over code points assigned in Python's Unicode database (Google's oracle
    classifies by it; TF's ICU knows newer Unicode versions, where unassigned points differ)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(0, 40)):
            code = rng.choice([rng.randint(32, 126), rng.randint(0, 0x2FFF),
                               rng.randint(0x3000, 0xFFFF), rng.randint(0x10000, 0x2FFFF)])
            char = chr(code)
            if unicodedata.category(char) not in ("Cn", "Cs", "Co"):
                chars.append(char)
        texts.append("".join(chars))
    return texts


@pytest.mark.parametrize("lower", [True, False])
def test_ids_identical_to_google(minilm_dir, lower):
    vocab_file = os.path.join(minilm_dir, "vocab.txt")
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()[:2000]
    texts = lines + HARD_CASES + random_texts(1000, seed=int(lower))
    ours = kbert.FullTokenizer(vocab_file, do_lower_case=lower).tokenize_ids(texts).to_list()
    oracle = google(vocab_file, lower)
    mismatches = [(t, oracle.tokenize(t)) for t, ids in zip(texts, ours, strict=True)
                  if oracle.convert_tokens_to_ids(oracle.tokenize(t)) != ids]
    assert not mismatches, mismatches[:3]
    assert sum(len(ids) for ids in ours) > 50_000  # the fixture really was tokenized


def test_tokenize_and_conversions(minilm_dir):
    tokenizer = kbert.FullTokenizer(os.path.join(minilm_dir, "vocab.txt"))
    tokens = tokenizer.tokenize("Unaffable, BERT!")
    assert tokens == ["una", "##ffa", "##ble", ",", "bert", "!"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenizer.tokenize("x" * 201) == ["[UNK]"] and tokenizer.tokenize("") == []


def test_never_split(minilm_dir, tmp_path):
    lines = pathlib.Path(minilm_dir, "vocab.txt").read_text(encoding="utf-8").splitlines()
    lines[lines.index("[unused0]")] = "covid-19"
    lines[lines.index("[unused1]")] = "SARS-CoV-2"
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain = kbert.FullTokenizer(str(vocab))
    assert plain.tokenize("covid-19") == ["co", "##vid", "-", "19"]
    (tmp_path / "added_tokens.txt").write_text("covid-19\nSARS-CoV-2\n")
    tokenizer = kbert.FullTokenizer(str(vocab))
    assert tokenizer.tokenize("SARS-CoV-2 causes covid-19.") == [
        "SARS-CoV-2", "causes", "covid-19", "."]
    with pytest.raises(ValueError, match="never_split tokens not in"):
        kbert.FullTokenizer(str(vocab), never_split=["not-in-vocab"])


def test_vocab_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt: vocab file not found"):
        kbert.FullTokenizer(str(tmp_path / "nope.txt"))
    specials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    cases = {
        "dupe.txt": (specials + "a\nb\na\n", r"dupe.txt:8: duplicate token 'a' \(first on line 6"),
        "latin1.txt": (None, r"latin1.txt:7: not UTF-8"),
        "nomask.txt": ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", "missing special token.*MASK"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        if text is None:
            path.write_bytes(specials.encode() + b"ok\nbad\xe9\n")
        else:
            path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            kbert.FullTokenizer(str(path))
