"""The `kbert-extract-features` command (kbert.cli.extract_features), from a clone:

    python tools/extract_features.py --help
"""

from kbert.cli import extract_features

if __name__ == "__main__":
    extract_features.run()
