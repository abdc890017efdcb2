"""The `kbert-create-pretraining-data` command (kbert.cli.create_pretraining_data), from a clone:

    python tools/create_pretraining_data.py --help
"""

from kbert.cli import create_pretraining_data

if __name__ == "__main__":
    create_pretraining_data.run()
