"""The `kbert-export-saved-model` command (kbert.cli.export_saved_model), from a clone:

    python tools/export_saved_model.py --help
"""

from kbert.cli import export_saved_model

if __name__ == "__main__":
    export_saved_model.run()
