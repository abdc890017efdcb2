"""vocab.txt: read with clear errors, special-token ids, `[unusedN]` slots, added tokens."""

import os

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Tokens beside vocab.txt that the tokenizer must emit whole (written by vocab expansion).
ADDED_TOKENS_FILE = "added_tokens.txt"


def load_vocab(vocab_file):
    """Returns the tokens of `vocab_file` in id order; errors name the file and line."""
    vocab_file = os.fspath(vocab_file)
    try:
        with open(vocab_file, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{vocab_file}: vocab file not found") from None
    tokens, seen = [], {}
    for line_number, line in enumerate(raw.split(b"\n"), 1):
        try:
            token = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise ValueError(f"{vocab_file}:{line_number}: not UTF-8 ({e.reason})") from None
        token = token.strip()
        if not token:
            continue
        if token in seen:
            raise ValueError(f"{vocab_file}:{line_number}: duplicate token {token!r} "
                             f"(first on line {seen[token]})")
        seen[token] = line_number
        tokens.append(token)
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        raise ValueError(f"{vocab_file}: missing special token(s) {', '.join(missing)}")
    return tokens


def load_added_tokens(vocab_file):
    """Tokens listed in `added_tokens.txt` beside `vocab_file`, or [] if there is none."""
    path = os.path.join(os.path.dirname(os.path.abspath(vocab_file)), ADDED_TOKENS_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]
