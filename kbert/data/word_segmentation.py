"""Chinese words for whole-word masking, from a word segmenter (the `kbert[zh]` extra: jieba).

Google's tokenizer makes every CJK character a token of its own, so Google's whole-word rule
(a `##` piece joins the word before it) masks Chinese one character at a time. As the Chinese
BERT-wwm work did (Cui et al., 2019), a segmenter decides which characters form a word and are
masked together; it decides nothing else: the token ids stay one per character and the
records keep Google's schema. A token *continues* the previous token's word when both are
single CJK characters of the same segmenter word, in the same sentence; all other text keeps
Google's `##` rule.

    sentence   我 喜 欢 北 京 , ok
    jieba      我 | 喜欢 | 北京 | , | ok
    continues  F  F  T  F  T  F  F
"""

import functools
import logging

import numpy as np

from kbert.tokenization import char_table

JIEBA = "jieba"
SEGMENTERS = (JIEBA,)


@functools.cache
def load_segmenter(name):
    """The segmenter `name`: a function from a str to its words (str, in order, covering it).

    Args:
        name: str. One of `SEGMENTERS`.

    Raises:
        ValueError: for an unknown name.
        ImportError: if the segmenter's package is not installed (`pip install 'kbert-keras[zh]'`).
    """
    if name not in SEGMENTERS:
        raise ValueError(f"chinese_word_segmenter must be one of {SEGMENTERS}, got {name!r}")
    try:
        import jieba
    except ImportError as e:
        raise ImportError("Chinese whole-word masking with chinese_word_segmenter='jieba' "
                          "needs jieba: pip install 'kbert-keras[zh]'") from e
    jieba.setLogLevel(logging.WARNING)  # its dictionary-loading messages are INFO
    return functools.partial(jieba.lcut, HMM=True)


def word_continues(sentences, begins, lengths, segment):
    """Which tokens continue the previous token's word (see the module docstring).

    Args:
        sentences: list of str.
        begins: int [tokens]. Each token's first character in its sentence (the `begins` of
            `kbert.FullTokenizer.tokenize_ids_with_offsets`), all sentences' tokens in a row.
        lengths: int [sentences]. Tokens per sentence.
        segment: function str -> list of str, as `load_segmenter` returns.

    Returns:
        bool [tokens].
    """
    lengths = np.asarray(lengths, np.int64)
    text = "".join(sentences)
    code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    sentence_starts = np.cumsum([0] + [len(s) for s in sentences[:-1]], dtype=np.int64)
    token_sentence = np.repeat(np.arange(len(sentences)), lengths)
    position = sentence_starts[token_sentence] + np.asarray(begins, np.int64)  # in `text`
    is_cjk = char_table.is_cjk(code_points[position])
    # Pairs of neighbouring CJK tokens of one sentence: only those may join.
    pairs = np.zeros(len(position), bool)
    pairs[1:] = is_cjk[1:] & is_cjk[:-1] & (token_sentence[1:] == token_sentence[:-1])
    word_of = np.full(len(text), -1, np.int64)  # a word number for every character
    next_word = 0
    for s in np.unique(token_sentence[pairs]).tolist():  # segment only where a pair is
        words = segment(sentences[s])
        if "".join(words) != sentences[s]:
            raise ValueError(f"the word segmenter changed the text of {sentences[s]!r}")
        start = sentence_starts[s]
        word_of[start:start + len(sentences[s])] = next_word + np.repeat(
            np.arange(len(words)), [len(w) for w in words])
        next_word += len(words)
    continues = pairs.copy()
    continues[1:] &= word_of[position[1:]] == word_of[position[:-1]]
    return continues
