"""Converts a BERT model, head included, between kbert, Google, Hugging Face and keras-hub.

--input is any of: a recipe's --output_dir (its model.keras) or a .keras file; a Google
release directory, training directory, checkpoint prefix or release name
(uncased_L-12_H-768_A-12, see kbert.list_presets()); a Hugging Face BERT directory
(config.json, model.safetensors, vocab.txt); a keras-hub preset directory. The head decides
the output: a classifier becomes BertForSequenceClassification / a keras-hub
BertTextClassifier, a span labeler BertForQuestionAnswering, a tagger
BertForTokenClassification, a pretrainer BertForPreTraining.

  kbert-convert-checkpoint --input=mrpc_output --output_dir=mrpc_hf --to=huggingface
  kbert-convert-checkpoint --input=mrpc_output --output_dir=mrpc_kh --to=keras_hub
  kbert-convert-checkpoint --input=hf_model --output_dir=google_model

--output_dir may not be the input; one that holds other files or a finished conversion needs
--overwrite_output_dir.
"""

from absl import app
from absl import flags
from absl import logging

from kbert.cli import command

_INPUT = flags.DEFINE_string("input", None, "Model to read (see above).", required=True)
flags.DEFINE_alias("input_dir", "input")
_OUTPUT = flags.DEFINE_string("output_dir", None, "Directory to write.", required=True)
_TO = flags.DEFINE_enum("to", "google", ["google", "huggingface", "keras_hub"],
                        "Format to write: a Google release directory (bert_model.ckpt, "
                        "bert_config.json, vocab.txt), a Hugging Face directory, or a keras-hub "
                        "preset.")
_LABELS = flags.DEFINE_list("label_names", None,
                            "Class names of a classifier or tagger head, in id order, for "
                            "Hugging Face's id2label. Defaults to LABEL_0, LABEL_1, ...")
_EXACT_GELU = flags.DEFINE_bool(
    "exact_gelu", False,
    "Keep a Hugging Face input's erf GELU as hidden_act 'gelu_exact' (read by kbert only). By "
    "default it becomes Google's 'gelu', the tanh approximation Google's code uses.")
_OVERWRITE = flags.DEFINE_bool("overwrite_output_dir", False, "Replace an --output_dir that "
                               "holds other files or a finished conversion.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from kbert import bridges  # here: --help needs no TensorFlow

    bridges.convert(_INPUT.value, _OUTPUT.value, format=_TO.value, label_names=_LABELS.value,
                    exact_gelu=_EXACT_GELU.value, overwrite_output_dir=_OVERWRITE.value)
    logging.info("Wrote %s to %s", _TO.value, _OUTPUT.value)


def run():
    """The `kbert-convert-checkpoint` command."""
    command.run(main)


if __name__ == "__main__":
    run()
