"""Exports a kbert model as a TensorFlow SavedModel that takes raw text.

--model is a recipe's output directory (tools/run_classifier.py, run_ner.py, run_squad.py: its
model.keras, vocab.txt and export_settings.json, so no other flag is needed), a .keras file
(BertEncoder, BertClassifier, BertSpanLabeler or BertTokenClassifier), or a Google checkpoint
directory or prefix (exported as a BertEncoder). Flags given explicitly override the settings
the recipe recorded. The SavedModel's `serving_default` signature tokenizes strings in-graph;
`serve_token_ids` takes input_ids/input_mask/segment_ids. It loads with TensorFlow and
tensorflow-text only, e.g. in TensorFlow Serving.

  python tools/export_saved_model.py --model=/tmp/mrpc --export_dir=/models/mrpc/1
"""

import _cli
from absl import app
from absl import flags
from absl import logging

from kbert import artifacts
from kbert.export import export_saved_model
from kbert.export import load_for_export
from kbert.tasks import squad

_MODEL = flags.DEFINE_string(
    "model", None, "A recipe's output directory, a .keras model, or a Google checkpoint "
    "(encoder).", required=True)
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
_cli.validate_ranges(squad.SquadConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        model, vocab_file, recorded = load_for_export(_MODEL.value)
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
    except (ValueError, TypeError, OSError) as e:
        raise app.UsageError(str(e)) from None
    logging.info("Exported %s to %s", type(model).__name__, export_dir)


if __name__ == "__main__":
    _cli.run(main)
