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
        ImportError: if the segmenter's package is not installed (`pip install kbert[zh]`).
    """
    if name not in SEGMENTERS:
        raise ValueError(f"chinese_word_segmenter must be one of {SEGMENTERS}, got {name!r}")
    try:
        import jieba
    except ImportError as e:
        raise ImportError("Chinese whole-word masking with chinese_word_segmenter='jieba' "
                          "needs jieba: pip install kbert[zh]") from e
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
    begins = np.asarray(begins, np.int64)
    continues = np.zeros(len(begins), bool)
    offset = 0
    for sentence, length in zip(sentences, np.asarray(lengths).tolist(), strict=True):
        starts = begins[offset:offset + length]
        is_cjk = np.array([char_table.is_cjk(sentence[b]) for b in starts.tolist()], bool)
        pairs = is_cjk[1:] & is_cjk[:-1]
        if pairs.any():  # no segmenting where no two CJK tokens meet
            words = segment(sentence)
            if "".join(words) != sentence:
                raise ValueError(f"the word segmenter changed the text of {sentence!r}")
            word_of = np.repeat(np.arange(len(words)), [len(w) for w in words])
            continues[offset + 1:offset + length] = pairs & (
                word_of[starts[1:]] == word_of[starts[:-1]])
        offset += length
    return continues
