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
from absl import logging

from kbert.cli import command
from kbert.cli import config_flags
from kbert.cli import tool_configs

CONFIG_FLAGS = config_flags.define_config_flags(tool_configs.ConversionConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = CONFIG_FLAGS.config()
    from kbert import bridges  # here: --help needs no TensorFlow

    # A list, as the run manifest records it (a rerun compares them).
    label_names = None if config.label_names is None else list(config.label_names)
    bridges.convert(config.input, config.output_dir, format=config.to, label_names=label_names,
                    exact_gelu=config.exact_gelu,
                    overwrite_output_dir=config.overwrite_output_dir)
    logging.info("Wrote %s to %s", config.to, config.output_dir)


def run():
    """The `kbert-convert-checkpoint` command."""
    command.run(main)


if __name__ == "__main__":
    run()
