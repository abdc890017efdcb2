"""The `kbert-convert-checkpoint` command (kbert.cli.convert_checkpoint), from a clone:

    python tools/convert_checkpoint.py --help
"""

from kbert.cli import convert_checkpoint

if __name__ == "__main__":
    convert_checkpoint.run()
