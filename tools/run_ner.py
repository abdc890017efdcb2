"""The `kbert-run-ner` command (kbert.cli.run_ner), from a clone:

    python tools/run_ner.py --help
"""

from kbert.cli import run_ner

if __name__ == "__main__":
    run_ner.run()
