"""Converts a Hugging Face BERT checkpoint to an original Google release directory, or back.

Hugging Face -> Google (default): reads --input_dir/{model.safetensors,config.json,vocab.txt}
and writes --output_dir/{bert_model.ckpt.*,bert_config.json,vocab.txt}, which Google's
modeling.py and kbert load.

  python tools/convert_checkpoint.py --input_dir=hf_model --output_dir=google_model

Google -> Hugging Face (--direction=google_to_huggingface): reads a release directory or
checkpoint prefix and writes model.safetensors, config.json and vocab.txt.
"""

import _cli
from absl import app
from absl import flags
from absl import logging

import kbert

_INPUT = flags.DEFINE_string("input_dir", None, "Directory (or Google checkpoint prefix) to read.",
                             required=True)
_OUTPUT = flags.DEFINE_string("output_dir", None, "Directory to write.", required=True)
_DIRECTION = flags.DEFINE_enum(
    "direction", "huggingface_to_google", ["huggingface_to_google", "google_to_huggingface"],
    "Which way to convert.")
_EXACT_GELU = flags.DEFINE_bool(
    "exact_gelu", False,
    "Keep Hugging Face's erf GELU as hidden_act 'gelu_exact' (read by kbert only). By default "
    "it becomes Google's 'gelu', the tanh approximation Google's code uses.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if _DIRECTION.value == "huggingface_to_google":
        prefix = kbert.convert_huggingface_to_google(_INPUT.value, _OUTPUT.value,
                                                     exact_gelu=_EXACT_GELU.value)
        logging.info("Google checkpoint written: %s", prefix)
    else:
        kbert.convert_google_to_huggingface(_INPUT.value, _OUTPUT.value)
        logging.info("Hugging Face checkpoint written to %s", _OUTPUT.value)


if __name__ == "__main__":
    _cli.run(main)
