"""The `kbert-run-pretraining` command (kbert.cli.run_pretraining), from a clone:

    python tools/run_pretraining.py --help
"""

from kbert.cli import run_pretraining

if __name__ == "__main__":
    run_pretraining.run()
