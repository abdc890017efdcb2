"""Google's extract_features.py output for a checkpoint, without its TPUEstimator.

Run in a subprocess (bert.extract_features defines absl flags at import):
  python -m tests.oracle.google_extract_features CONFIG_JSON PREFIX VOCAB INPUT LAYERS SEQ OUT
Examples are read and featurized by Google's own `read_examples` and
`convert_examples_to_features`; the layers come from Google's `modeling.BertModel` (see
google_bert.run_google_bert); the JSON lines follow extract_features.py `main`.
"""

import json
import sys

import numpy as np

from tests.oracle import google_bert


def main(config_json, prefix, vocab, input_file, layers, seq_length, output):
    google_bert._modeling()  # imports bert.modeling under the shim before extract_features
    from absl import flags
    from bert import extract_features
    from bert import tokenization

    flags.FLAGS.mark_as_parsed()
    with open(config_json, encoding="utf-8") as f:
        config = json.load(f)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
    examples = extract_features.read_examples(input_file)
    features = extract_features.convert_examples_to_features(examples, int(seq_length), tokenizer)
    outputs = google_bert.run_google_bert(
        config, prefix, np.array([f.input_ids for f in features]),
        np.array([f.input_mask for f in features]),
        np.array([f.input_type_ids for f in features]))
    layer_indexes = [int(x) for x in layers.split(",")]
    with open(output, "w", encoding="utf-8") as writer:
        for row, feature in enumerate(features):
            tokens = [
                {"token": token,
                 "layers": [{"index": index, "values": [
                     round(float(x), 6) for x in outputs["all_encoder_layers"][index][row, i]]}
                     for index in layer_indexes]}
                for i, token in enumerate(feature.tokens)]
            writer.write(json.dumps({"linex_index": feature.unique_id, "features": tokens}) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
