"""What a vocabulary misses in a corpus: new-token candidates, and coverage before and after.

The corpus is cut into words exactly as the tokenizer's first step does (Google's
`BasicTokenizer`: at whitespace and punctuation, every CJK character a word by itself,
normalised as WordPiece sees them: lower-cased and accents stripped for uncased models). Each
word is then looked up as WordPiece does, and classed:

- a *CJK character* (one ideograph, `char_table.is_cjk`) is *missed* if it becomes [UNK];
- any *other word* is missed if it becomes [UNK] or is *split*: more than one word piece
  ("unaffable" -> una ##ffa ##ble). A one-character word (punctuation, a letter) can only be
  missed as [UNK].

Missed words are the candidates for new tokens. They are never in the vocab already
(WordPiece keeps a vocab word whole), and they are ranked by how often they occur, ties going
to the word seen first in the corpus, so the ranking depends only on the text's order.
"""

import collections
import dataclasses
import itertools

import numpy as np

from kbert.tokenization import char_table

_BATCH = 2048


@dataclasses.dataclass(frozen=True)
class Coverage:
    """How much of a corpus a vocabulary covers, counted over word occurrences.

    Attributes:
        cjk_chars: int. CJK characters in the corpus.
        cjk_known: int. Those that are not [UNK].
        words: int. Other words (basic-tokenizer words that are not one CJK character).
        words_known: int. Those that are not [UNK].
        words_whole: int. Those that are exactly one word piece.
    """

    cjk_chars: int
    cjk_known: int
    words: int
    words_known: int
    words_whole: int

    @property
    def cjk_share(self):
        """Share of CJK characters that are not [UNK] (1.0 for a corpus without any)."""
        return self.cjk_known / self.cjk_chars if self.cjk_chars else 1.0

    @property
    def word_share(self):
        """Share of other words that are not [UNK] (1.0 for a corpus without any)."""
        return self.words_known / self.words if self.words else 1.0

    @property
    def whole_share(self):
        """Share of other words that are one word piece (1.0 for a corpus without any)."""
        return self.words_whole / self.words if self.words else 1.0

    def __str__(self):
        return (f"CJK characters {100 * self.cjk_share:.2f}% known ({self.cjk_known:,} of "
                f"{self.cjk_chars:,}); other words {100 * self.word_share:.2f}% known, "
                f"{100 * self.whole_share:.2f}% whole ({self.words_known:,} and "
                f"{self.words_whole:,} of {self.words:,})")


def count_words(texts, tokenizer):
    """Counts the basic-tokenizer words of `texts`.

    Args:
        texts: iterable of str.
        tokenizer: `kbert.FullTokenizer`. Its casing decides the normalisation.

    Returns:
        `collections.Counter` of word -> occurrences, keys in order of first occurrence.
    """
    counts = collections.Counter()
    texts = iter(texts)
    while batch := list(itertools.islice(texts, _BATCH)):  # memory flat in the corpus size
        counts.update(tokenizer.basic_tokenize(batch).flat_values.numpy().tolist())
    return collections.Counter({word.decode("utf-8"): n for word, n in counts.items()})


def measure(counts, tokenizer):
    """Coverage of `counts` under `tokenizer`'s vocab, and the words it misses, ranked.

    Args:
        counts: mapping of word -> occurrences, as `count_words` returns (insertion order is
            the order of first occurrence, which breaks ties).
        tokenizer: `kbert.FullTokenizer`. The vocab to measure.

    Returns:
        (`Coverage`, missed): missed is a list of (word, occurrences), most frequent first.
    """
    words = list(counts)
    unk_id = tokenizer.vocab["[UNK]"]
    cjk_chars = cjk_known = total = known = whole = 0
    missed = []
    for begin in range(0, len(words), _BATCH):
        batch = words[begin:begin + _BATCH]
        pieces = tokenizer.tokenize_ids(batch)
        lengths = pieces.row_lengths().numpy()
        first = pieces.flat_values.numpy()[np.cumsum(lengths) - lengths]
        for word, length, first_id in zip(batch, lengths.tolist(), first.tolist(), strict=True):
            n = counts[word]
            is_unk = first_id == unk_id  # WordPiece gives [UNK] alone or no [UNK] at all
            if len(word) == 1 and char_table.is_cjk(ord(word)):
                cjk_chars += n
                cjk_known += 0 if is_unk else n
                if is_unk:
                    missed.append((word, n))
            else:
                total += n
                known += 0 if is_unk else n
                whole += n if length == 1 and not is_unk else 0
                if is_unk or length > 1:
                    missed.append((word, n))
    missed.sort(key=lambda item: -item[1])  # stable: ties keep first-occurrence order
    return Coverage(cjk_chars, cjk_known, total, known, whole), missed
