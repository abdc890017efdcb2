"""Text to ids, in-graph, identical to Google's FullTokenizer."""

from kbert.tokenization.preprocessor import BertPreprocessor
from kbert.tokenization.tokenizer import FullTokenizer
from kbert.tokenization.tokenizer import WordPieces
from kbert.tokenization.vocab import Vocab
from kbert.tokenization.vocab import check_vocab_size
from kbert.tokenization.vocab import load_vocab

__all__ = ["BertPreprocessor", "FullTokenizer", "Vocab", "WordPieces", "check_vocab_size",
           "load_vocab"]
