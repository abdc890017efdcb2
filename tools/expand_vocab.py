"""The `kbert-expand-vocab` command (kbert.cli.expand_vocab), from a clone:

    python tools/expand_vocab.py --help
"""

from kbert.cli import expand_vocab

if __name__ == "__main__":
    expand_vocab.run()
