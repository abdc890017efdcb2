"""Fine-tunes BERT on a GLUE task with model.fit, evaluates it and predicts its test set.

As Google's run_classifier.py, with the same flags. Tasks: CoLA, SST-2, MRPC, STS-B, QQP,
MNLI, QNLI, RTE, WNLI, and AX (the diagnostic set: --do_predict with an MNLI model.keras).
Writes to --output_dir: eval_results.txt/.json, <TASK>.tsv test predictions in the GLUE
server's format, train_results.json, model.keras, TensorBoard logs/; an interrupted run,
restarted with the same flags, resumes from its last finished epoch.

  python tools/run_classifier.py --task_name=MRPC --data_dir=glue_data/MRPC \\
      --init_checkpoint=uncased_L-12_H-768_A-12 --do_train --do_eval --do_predict \\
      --learning_rate=2e-5 --num_train_epochs=3 --output_dir=/tmp/mrpc

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

flags.adopt_module_key_flags(_flags)

_TASK = flags.DEFINE_string("task_name", None, "GLUE task, e.g. MRPC.", required=True)
_DATA = flags.DEFINE_string("data_dir", None, "The task's GLUE directory.", required=True)
_OUTPUT = flags.DEFINE_string("output_dir", None, "Where results go.", required=True)
_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Google checkpoint (release dir or prefix) or a .keras "
    "BertClassifier. Defaults to --output_dir/model.keras without --do_train.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "Defaults to vocab.txt beside the checkpoint.")
_CONFIG = flags.DEFINE_string("bert_config_file", None, "Defaults to the one beside the ckpt.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.")
_TRAIN_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_EVAL_BATCH = flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
_PREDICT_BATCH = flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, _cli.LEARNING_RATE_HELP)
_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs (a whole number).")
_WARMUP = flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps of linear warm-up.")
_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on train.tsv.")
_EVAL = flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set(s).")
_PREDICT = flags.DEFINE_bool("do_predict", False, "Predict the test set(s).")
_MAX_TRAIN = flags.DEFINE_integer("max_train_examples", None,
                                  "Train on a seeded random subset of this many examples.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seeds the subset, shuffle, dropout and head.")
_SKIP_BAD = flags.DEFINE_bool("skip_bad_rows", False, "Skip (and log) malformed dev/test rows.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = glue.GlueConfig(
            task_name=_TASK.value, data_dir=_DATA.value, output_dir=_OUTPUT.value,
            init_checkpoint=_CHECKPOINT.value, vocab_file=_VOCAB.value,
            bert_config_file=_CONFIG.value, do_lower_case=_LOWER.value,
            max_seq_length=_MAX_SEQ.value, train_batch_size=_TRAIN_BATCH.value,
            eval_batch_size=_EVAL_BATCH.value, predict_batch_size=_PREDICT_BATCH.value,
            learning_rate=_LR.value, num_train_epochs=_EPOCHS.value,
            warmup_proportion=_WARMUP.value, do_train=_TRAIN.value, do_eval=_EVAL.value,
            do_predict=_PREDICT.value, max_train_examples=_MAX_TRAIN.value, seed=_SEED.value,
            skip_bad_rows=_SKIP_BAD.value,
            **_flags.distribution_settings())
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    results = glue.run_glue(config)
    for split, scores in results.get("eval", {}).items():
        logging.info("%s: %s", split, scores)
    logging.info("Results written to %s", _OUTPUT.value)


if __name__ == "__main__":
    _cli.run(main)
