"""notebooks/vocab_expansion.ipynb runs top to bottom (its own tiny release) in a fresh kernel."""

import ast
import re

from absl import flags
from bert import tokenization as google_tokenization

NEW_TOKENS = ["COVID-19", "remdesivir", "pembrolizumab", "hydroxychloroquine"]


def printed_tokens(text, stage):
    """{token: pieces} from the notebook's `before: x -> [...]` / `after: x -> [...]` lines."""
    return {m.group(1): ast.literal_eval(m.group(2))
            for m in re.finditer(rf"^{stage}: (\S+) -> (\[.*\])$", text, re.MULTILINE)}


def test_vocab_expansion_notebook_runs(run_notebook_in_kernel, tmp_path, monkeypatch):
    monkeypatch.delenv("KBERT_RELEASE_DIR", raising=False)  # its own tiny release
    text = run_notebook_in_kernel("vocab_expansion.ipynb", {"KBERT_NOTEBOOK_TINY": "1",
                                                           "KBERT_WORK_DIR": str(tmp_path)})

    before, after = printed_tokens(text, "before"), printed_tokens(text, "after")
    assert sorted(before) == sorted(after) == sorted(NEW_TOKENS)
    for token in NEW_TOKENS:
        assert len(before[token]) > 1, before  # split into pieces by the old vocab
        assert after[token] == [token], after  # one piece after the expansion
    assert "never_split (added_tokens.txt): ['COVID-19']" in text
    assert "lower case: ['c', '##o', '##v', '##i', '##d', '-', '1', '##9']" in text
    assert "reloaded BertClassifier" in text
    moved = float(re.search(r"COVID-19 row moved by up to (\S+)", text).group(1))
    assert moved > 0  # fit trained the new embedding row

    # The written release works with Google's own tokenizer: the new lower-case words are one
    # token each, in the [unusedN] slots they took, and the vocab size is unchanged.
    expanded = tmp_path / "expanded_release"
    assert (expanded / "added_tokens.txt").read_text(encoding="utf-8") == "COVID-19\n"
    old_vocab = (tmp_path / "tiny_release" / "vocab.txt").read_text(encoding="utf-8").split()
    new_vocab = (expanded / "vocab.txt").read_text(encoding="utf-8").split()
    assert len(new_vocab) == len(old_vocab)
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()  # Google's tokenizer reads an absl flag
    google = google_tokenization.FullTokenizer(str(expanded / "vocab.txt"), do_lower_case=True)
    for slot, token in enumerate(NEW_TOKENS[1:], start=1):
        assert google.tokenize(token.title()) == [token]
        assert new_vocab.index(token) == old_vocab.index(f"[unused{slot}]")
