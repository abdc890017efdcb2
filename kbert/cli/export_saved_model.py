"""Exports a kbert model as a TensorFlow SavedModel that takes raw text.

--model is a recipe's output directory (kbert-run-classifier, kbert-run-ner, kbert-run-squad:
its model.keras, vocab.txt and export_settings.json, so no other flag is needed), a .keras file
(BertEncoder, BertClassifier, BertSpanLabeler or BertTokenClassifier), or a Google checkpoint
directory or prefix (exported as a BertEncoder). Flags given explicitly override the settings
the recipe recorded. The SavedModel's `serving_default` signature tokenizes strings in-graph;
`serve_token_ids` takes input_ids/input_mask/segment_ids. It loads with TensorFlow and
tensorflow-text only, e.g. in TensorFlow Serving.

  kbert-export-saved-model --model=/tmp/mrpc --export_dir=/models/mrpc/1
"""

import os

from absl import app
from absl import logging

from kbert.cli import command
from kbert.cli import config_flags
from kbert.cli import tool_configs

CONFIG_FLAGS = config_flags.define_config_flags(tool_configs.ExportConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = CONFIG_FLAGS.config()
    # Here: --help needs no TensorFlow.
    from kbert import artifacts
    from kbert import io
    from kbert.export import export_saved_model
    from kbert.export import load_for_export

    # Before the model loads: the SavedModel is written beside --export_dir, then renamed.
    parent, base = os.path.split(os.path.abspath(config.export_dir))
    artifacts.check_writable(parent)
    try:
        # One export into --export_dir at a time; the lock sits beside it (the export
        # replaces the directory).
        with artifacts.locked(parent, name=f".{base}.kbert.lock", what=config.export_dir):
            model, vocab_file, recorded = load_for_export(config.model, config.vocab_file)
            settings = {name: getattr(config, name) for name in config.SETTINGS}
            settings.update(recorded)
            settings.update({name: getattr(config, name)
                             for name in CONFIG_FLAGS.given() & set(config.SETTINGS)})
            vocab_file = config.vocab_file or vocab_file
            if vocab_file is None:
                raise ValueError(f"no vocab.txt beside {config.model}; pass --vocab_file")
            # --overwrite replaces the whole --export_dir: never the model it reads.
            artifacts.check_not_input(config.export_dir, [("model", config.model),
                                                          ("vocab_file", vocab_file)])
            export_dir = export_saved_model(model, config.export_dir, vocab_file,
                                            overwrite=config.overwrite,
                                            compute_dtype=config.compute_dtype, **settings)
    except io.DiskFull:
        raise
    except Exception as e:  # noqa: BLE001  (TensorFlow's full disk is none of the three)
        if io.is_disk_full(e):  # one line naming the directory, as every tool's full disk
            raise io.DiskFull(config.export_dir) from e
        if isinstance(e, (ValueError, TypeError, OSError)):
            raise app.UsageError(str(e)) from None
        raise
    logging.info("Exported %s to %s", type(model).__name__, export_dir)


def run():
    """The `kbert-export-saved-model` command."""
    command.run(main)


if __name__ == "__main__":
    run()
