"""vocab.txt: read with clear errors, special-token ids, `[unusedN]` slots, added tokens."""

import os
import re
import tempfile

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Tokens beside vocab.txt that the tokenizer must emit whole (written by vocab expansion).
ADDED_TOKENS_FILE = "added_tokens.txt"
_UNUSED_TOKEN = re.compile(r"\[unused(\d+)\]")


def _id_of(token):
    """A read-only property: the id of the special `token`."""
    return property(lambda vocab: vocab.ids[token], doc=f"The id of {token}.")


class Vocab:
    """The tokens of a BERT `vocab.txt`, in id order (id = line number - 1).

    Ids are those Google's `tokenization.load_vocab` gives, for every file it reads the same
    way: tokens are stripped of surrounding whitespace, and empty or duplicate tokens (which
    Google silently drops or merges, shifting every later id) are errors here.

    Args:
        tokens: sequence of str. Distinct, non-empty, and including every special token
            (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`).
        path: str or None. The file the tokens came from, named in errors. Defaults to None.
    """

    def __init__(self, tokens, path=None):
        self.tokens = tuple(tokens)
        self.path = path
        name = path or "vocabulary"
        self.ids = {}
        for i, token in enumerate(self.tokens):
            if not token or token != token.strip():
                raise ValueError(f"{name}: token {i} is empty or has surrounding whitespace: "
                                 f"{token!r}")
            if token in self.ids:
                raise ValueError(f"{name}: duplicate token {token!r} (ids {self.ids[token]} "
                                 f"and {i})")
            self.ids[token] = i
        missing = [t for t in SPECIAL_TOKENS if t not in self.ids]
        if missing:
            raise ValueError(f"{name}: missing special token(s) {', '.join(missing)}")

    def __len__(self):
        return len(self.tokens)

    def __eq__(self, other):
        return isinstance(other, Vocab) and self.tokens == other.tokens

    def __hash__(self):
        return hash(self.tokens)

    def __contains__(self, token):
        return token in self.ids

    pad_id = _id_of("[PAD]")
    unk_id = _id_of("[UNK]")
    cls_id = _id_of("[CLS]")
    sep_id = _id_of("[SEP]")
    mask_id = _id_of("[MASK]")

    @property
    def unused_ids(self):
        """Ids of the `[unusedN]` placeholder tokens, ordered by N (the slots to fill first)."""
        slots = [(int(m.group(1)), i) for i, token in enumerate(self.tokens)
                 if (m := _UNUSED_TOKEN.fullmatch(token))]
        return [i for _, i in sorted(slots)]

    def write(self, path):
        """Writes the tokens one per line (atomically: a temporary file, then a rename)."""
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="\n", dir=directory,
                                         prefix=".vocab-", delete=False) as f:
            f.write("".join(token + "\n" for token in self.tokens))
        os.replace(f.name, path)


def load_vocab(vocab_file):
    """Reads `vocab_file` into a `Vocab`; errors name the file and, where it applies, the line.

    Args:
        vocab_file: str or os.PathLike. One token per line, UTF-8.

    Returns:
        `Vocab`.
    """
    vocab_file = os.fspath(vocab_file)
    try:
        with open(vocab_file, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{vocab_file}: vocab file not found") from None
    lines = raw.split(b"\n")  # as tf.gfile's readline: "\n" only, not U+2028 or "\r"
    if lines[-1] == b"":
        lines.pop()
    tokens, first_line = [], {}
    for line_number, line in enumerate(lines, 1):
        try:
            token = line.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise ValueError(f"{vocab_file}:{line_number}: not UTF-8 ({e.reason} at byte "
                             f"{e.start} of the line)") from None
        if not token:
            raise ValueError(f"{vocab_file}:{line_number}: empty token")
        if token in first_line:
            raise ValueError(f"{vocab_file}:{line_number}: duplicate token {token!r} "
                             f"(first on line {first_line[token]})")
        first_line[token] = line_number
        tokens.append(token)
    return Vocab(tokens, path=vocab_file)


def load_added_tokens(vocab_file):
    """Tokens listed in `added_tokens.txt` beside `vocab_file` (one a line), or [] if none."""
    path = os.path.join(os.path.dirname(os.path.abspath(vocab_file)), ADDED_TOKENS_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def check_vocab_size(vocab, vocab_size, model_source=None):
    """Raises unless `vocab` has exactly `vocab_size` tokens, one per embedding row.

    A longer vocab makes ids past the table (an index error mid-training, or silently wrong
    outputs under XLA, which clamps out-of-range gathers); a shorter one is almost always the
    vocab of another model. Call it wherever a vocab meets a model (the recipes do).

    Args:
        vocab: `Vocab`, or str path of a `vocab.txt`.
        vocab_size: int. The model's word-embedding rows (`vocab_size` of its config).
        model_source: str or None. Where `vocab_size` came from (a checkpoint or
            `bert_config.json`), for the message. Defaults to None ("the model").

    Raises:
        ValueError: naming the vocab file, both sizes and which to fix.
    """
    if not isinstance(vocab, Vocab):
        vocab = load_vocab(vocab)
    if len(vocab) == vocab_size:
        return
    model = f"the model ({model_source})" if model_source else "the model"
    name = vocab.path or "the vocabulary"
    fix = ("pass the vocab.txt the checkpoint was trained with (--vocab_file), or add the new "
           "tokens with tools/expand_vocab.py, which grows the table too"
           if len(vocab) > vocab_size else
           "pass the vocab.txt the checkpoint was trained with (--vocab_file)")
    raise ValueError(f"{name}: {len(vocab)} tokens, but {model} has vocab_size={vocab_size} "
                     f"embedding rows — {fix}")
