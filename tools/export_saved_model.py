"""Exports a kbert model as a TensorFlow SavedModel that takes raw text.

--model is a .keras file (BertEncoder, BertClassifier, BertSpanLabeler or
BertTokenClassifier, as tools/run_classifier.py and tools/run_squad.py write them) or a
Google checkpoint directory or prefix (exported as a BertEncoder). The SavedModel's
`serving_default` signature tokenizes strings in-graph with --vocab_file and
--do_lower_case; `serve_token_ids` takes input_ids/input_mask/segment_ids. It loads with
TensorFlow and tensorflow-text only, e.g. in TensorFlow Serving.

  python tools/export_saved_model.py --model=/tmp/mrpc/model.keras --text_pair \\
      --label_names=not_paraphrase,paraphrase --export_dir=/models/mrpc/1
"""

import os

import _cli
import keras
from absl import app
from absl import flags
from absl import logging

import kbert
from kbert.export import export_saved_model

_MODEL = flags.DEFINE_string("model", None, "A .keras model, or a Google checkpoint (encoder).",
                             required=True)
_EXPORT_DIR = flags.DEFINE_string("export_dir", None, "The SavedModel directory to write.",
                                  required=True)
_VOCAB = flags.DEFINE_string("vocab_file", None, "Defaults to vocab.txt beside --model.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.")
_LABELS = flags.DEFINE_list("label_names", None, "Class (or tag) names in id order.")
_PAIR = flags.DEFINE_bool("text_pair", False, "The classifier or encoder takes text pairs.")
_MAX_QUERY = flags.DEFINE_integer("max_query_length", 64, "Span labeler: question pieces.")
_MAX_ANSWER = flags.DEFINE_integer("max_answer_length", 30, "Span labeler: answer pieces.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir.")
_DTYPE = flags.DEFINE_enum("compute_dtype", "float32", ["float32", "bfloat16", "float16"],
                           "Serving compute dtype (bfloat16: AVX512_BF16/AMX CPUs).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    path = _MODEL.value
    base = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    vocab_file = _VOCAB.value or os.path.join(base, "vocab.txt")
    try:
        if path.endswith(".keras"):
            model = keras.saving.load_model(path)
        else:
            model = kbert.BertEncoder.from_google_checkpoint(path)
        export_dir = export_saved_model(
            model, _EXPORT_DIR.value, vocab_file, do_lower_case=_LOWER.value,
            max_seq_length=_MAX_SEQ.value, label_names=_LABELS.value, text_pair=_PAIR.value,
            max_query_length=_MAX_QUERY.value, max_answer_length=_MAX_ANSWER.value,
            overwrite=_OVERWRITE.value, compute_dtype=_DTYPE.value)
    except (ValueError, TypeError, OSError) as e:
        raise app.UsageError(str(e)) from None
    logging.info("Exported %s to %s", type(model).__name__, export_dir)


if __name__ == "__main__":
    _cli.run(main)
