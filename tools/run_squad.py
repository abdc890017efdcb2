"""The `kbert-run-squad` command (kbert.cli.run_squad), from a clone:

    python tools/run_squad.py --help
"""

from kbert.cli import run_squad

if __name__ == "__main__":
    run_squad.run()
