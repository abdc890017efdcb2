"""Text to ids, in-graph, identical to Google's FullTokenizer."""

from kbert.tokenization.packer import BertPreprocessor
from kbert.tokenization.tokenizer import FullTokenizer
from kbert.tokenization.vocab import load_vocab

__all__ = ["BertPreprocessor", "FullTokenizer", "load_vocab"]
