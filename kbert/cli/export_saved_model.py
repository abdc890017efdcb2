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

from absl import app
from absl import flags
from absl import logging

from kbert.cli import command
from kbert.tasks import configs

_MODEL = flags.DEFINE_string(
    "model", None, "A recipe's output directory or .keras model, a Google release directory, "
    "training directory or prefix, a release name, or a Hugging Face or keras-hub directory "
    "(the model with its head).", required=True)
_EXPORT_DIR = flags.DEFINE_string("export_dir", None, "The SavedModel directory to write.",
                                  required=True)
_VOCAB = flags.DEFINE_string("vocab_file", None, "Defaults to vocab.txt beside --model.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir.")
_DTYPE = flags.DEFINE_enum("compute_dtype", "float32", ["float32", "bfloat16", "float16"],
                           "Serving compute dtype (bfloat16: AVX512_BF16/AMX CPUs).")
# Defaults of what a recipe records in export_settings.json; explicit flags win.
_SETTINGS = (
    flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased."),
    flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated."),
    flags.DEFINE_list("label_names", None, "Class (or tag) names in id order."),
    flags.DEFINE_bool("text_pair", False, "The classifier or encoder takes text pairs."),
    flags.DEFINE_integer("max_query_length", 64, "Span labeler: question pieces."),
    flags.DEFINE_integer("max_answer_length", 30, "Span labeler: answer pieces."),
    flags.DEFINE_float("null_score_diff_threshold", 0.0, "Span labeler (SQuAD 2.0): answer "
                       "'' above this."),
)
# The lengths have the ranges of the recipe that records them (SQuAD's has all three).
command.validate_ranges(configs.SquadConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    # Here: --help needs no TensorFlow.
    from kbert import artifacts
    from kbert import io
    from kbert.export import export_saved_model
    from kbert.export import load_for_export

    try:
        model, vocab_file, recorded = load_for_export(_MODEL.value, _VOCAB.value)
        settings = {flag.name: flag.value for flag in _SETTINGS}
        settings.update(recorded)
        settings.update({flag.name: flag.value for flag in _SETTINGS if flag.present})
        vocab_file = _VOCAB.value or vocab_file
        if vocab_file is None:
            raise ValueError(f"no vocab.txt beside {_MODEL.value}; pass --vocab_file")
        # --overwrite replaces the whole --export_dir: never the model it reads.
        artifacts.check_not_input(_EXPORT_DIR.value, [("model", _MODEL.value),
                                                      ("vocab_file", vocab_file)])
        export_dir = export_saved_model(model, _EXPORT_DIR.value, vocab_file,
                                        overwrite=_OVERWRITE.value,
                                        compute_dtype=_DTYPE.value, **settings)
    except io.DiskFull:
        raise
    except Exception as e:  # noqa: BLE001  (TensorFlow's full disk is none of the three)
        if io.is_disk_full(e):  # one line naming the directory, as every tool's full disk
            raise io.DiskFull(_EXPORT_DIR.value) from e
        if isinstance(e, (ValueError, TypeError, OSError)):
            raise app.UsageError(str(e)) from None
        raise
    logging.info("Exported %s to %s", type(model).__name__, export_dir)


def run():
    """The `kbert-export-saved-model` command."""
    command.run(main)


if __name__ == "__main__":
    run()
