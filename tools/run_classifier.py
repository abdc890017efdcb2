"""The `kbert-run-classifier` command (kbert.cli.run_classifier), from a clone:

    python tools/run_classifier.py --help
"""

from kbert.cli import run_classifier

if __name__ == "__main__":
    run_classifier.run()
