"""Fine-tunes BERT for text (pair) classification or regression: a GLUE task or your own files.

As Google's run_classifier.py, with the same flags. GLUE tasks: CoLA, SST-2, MRPC, STS-B, QQP,
MNLI, QNLI, RTE, WNLI, and AX (the diagnostic set: --do_predict with an MNLI model.keras), read
from --data_dir (--do_train needs train.tsv, --do_eval dev.tsv, --do_predict test.tsv).
Your own data: --train_file, --dev_file, --test_file (.csv or .tsv with a header, or .jsonl),
with --text_a_column, --text_b_column (pairs), --label_column; labels are those of the training
file (or --labels), --regression for real-valued labels.

Writes to --output_dir: model.keras, vocab.txt, bert_config.json, export_settings.json,
eval_results.txt/.json, <split>_predictions.tsv (dev: texts, gold, predicted, probabilities),
<TASK>.tsv test predictions in the GLUE server's format, train_results.json,
training_log.csv, TensorBoard logs/. An interrupted run, restarted with the same flags,
resumes from its last finished epoch; other flags need --overwrite_output_dir.

  python tools/run_classifier.py --task_name=MRPC --data_dir=glue_data/MRPC \\
      --init_checkpoint=uncased_L-12_H-768_A-12 --do_train --do_eval --do_predict \\
      --learning_rate=2e-5 --num_train_epochs=3 --output_dir=/tmp/mrpc

  python tools/run_classifier.py --train_file=reviews_train.csv --dev_file=reviews_dev.csv \\
      --text_a_column=review --label_column=stars --init_checkpoint=uncased_L-12_H-768_A-12 \\
      --do_train --do_eval --output_dir=/tmp/reviews

Batch sizes are global. Add --distribution_strategy=mirrored to train on every local GPU,
=multi_worker_mirrored (and TF_CONFIG) on several hosts, =tpu with --tpu on a Cloud TPU;
--mixed_precision=mixed_bfloat16 or mixed_float16 for mixed precision.
"""

import _cli
import _flags
from absl import app
from absl import flags
from absl import logging

from kbert.tasks import glue

_SHARED = _flags.define_fine_tuning_flags(
    do_train_help="Fine-tune on train.tsv or --train_file.",
    do_eval_help="Evaluate on the dev set(s) (every epoch, to keep the best one).",
    do_predict_help="Predict test.tsv or --test_file.")
# After the definitions above: a module's key flags are those it has defined so far.
flags.adopt_module_key_flags(_flags)

_TASK = flags.DEFINE_string("task_name", None, "GLUE task, e.g. MRPC (with --data_dir).")
_DATA = flags.DEFINE_string("data_dir", None, "The task's GLUE directory.")
_TRAIN_FILE = flags.DEFINE_string("train_file", None, "Own training data: .csv, .tsv, .jsonl.")
_DEV_FILE = flags.DEFINE_string("dev_file", None, "Own dev data, scored with --do_eval.")
_TEST_FILE = flags.DEFINE_string("test_file", None, "Own test data, with --do_predict.")
_TEXT_A = flags.DEFINE_string("text_a_column", "text_a", "Own data: column of the text.")
_TEXT_B = flags.DEFINE_string("text_b_column", None, "Own data: column of the second text.")
_LABEL = flags.DEFINE_string("label_column", "label", "Own data: column of the label.")
_LABELS = flags.DEFINE_list("labels", None, "Own data: the classes in id order. Defaults to "
                            "the sorted labels of --train_file.")
_REGRESSION = flags.DEFINE_bool("regression", False, "Own data: labels are real numbers.")
_MAX_TRAIN = flags.DEFINE_integer("max_train_examples", None,
                                  "Train on a seeded random subset of this many examples.")
_SKIP_BAD = flags.DEFINE_bool("skip_bad_rows", False, "Skip (and log) malformed dev/test rows.")
_PACK = flags.DEFINE_bool(
    "pack_examples", False, "Train on packed rows: several short examples per row, each "
    "seeing only itself, the same examples per step. The outputs are as without it. "
    "Classification on one device. On a 2-core CPU it trained SST-2 at 0.86-0.92x the default "
    "length-grouped batches (BENCHMARKS.md).")
_cli.validate_ranges(glue.GlueConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = glue.GlueConfig(
            task_name=_TASK.value, data_dir=_DATA.value, train_file=_TRAIN_FILE.value,
            dev_file=_DEV_FILE.value, test_file=_TEST_FILE.value, text_a_column=_TEXT_A.value,
            text_b_column=_TEXT_B.value, label_column=_LABEL.value,
            labels=tuple(_LABELS.value) if _LABELS.value else None,
            regression=_REGRESSION.value, max_train_examples=_MAX_TRAIN.value,
            skip_bad_rows=_SKIP_BAD.value, pack_examples=_PACK.value,
            **_SHARED.settings())
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    results = glue.run_glue(config)
    for split, scores in results.get("eval", {}).items():
        logging.info("%s: %s", split, scores)
    logging.info("Results written to %s", config.output_dir)


if __name__ == "__main__":
    _cli.run(main)
