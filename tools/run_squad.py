"""Fine-tunes BERT on SQuAD v1.1 or v2.0 and predicts answers, as Google's run_squad.py.

--do_train trains on --train_file with model.fit (resumable: rerun the same command after an
interruption; other flags need --overwrite_output_dir) and writes to --output_dir: model.keras,
vocab.txt, bert_config.json, export_settings.json, train_results.json. --do_predict writes
predictions.json, nbest_predictions.json and, with --version_2_with_negative, null_odds.json;
when --predict_file has answers, eval_results.txt/.json hold the official EM and F1, and a
run of more than one epoch scores it after every epoch and saves the epoch with the best F1
(--nokeep_best_epoch: the last). The output dir is also a Google checkpoint (bert_model.ckpt
with run_squad.py's cls/squad head).
--init_checkpoint is a Google checkpoint (release or run_squad.py output) or a .keras file.

  python tools/run_squad.py --do_train --do_predict --init_checkpoint=uncased_L-12_H-768_A-12 \\
      --train_file=train-v1.1.json --predict_file=dev-v1.1.json --output_dir=squad_out \\
      --max_seq_length=384 --doc_stride=128 --train_batch_size=32 --learning_rate=3e-5 \\
      --num_train_epochs=2.0

Batch sizes are global. Add --distribution_strategy=mirrored to train on every local GPU,
=multi_worker_mirrored (and TF_CONFIG) on several hosts, =tpu with --tpu on a Cloud TPU;
--mixed_precision=mixed_bfloat16 or mixed_float16 for mixed precision.
"""

import _cli
import _flags
from absl import app
from absl import flags
from absl import logging

from kbert.tasks import squad

_SHARED = _flags.define_fine_tuning_flags(
    max_seq_length=384, steps=("do_train", "do_predict"),
    epochs_help="Passes over the training windows (fractions allowed).",
    do_train_help="Train on --train_file.",
    do_predict_help="Predict --predict_file (and score it when it has answers).")
# After the definitions above: a module's key flags are those it has defined so far.
flags.adopt_module_key_flags(_flags)

_TRAIN_FILE = flags.DEFINE_string("train_file", None, "SQuAD JSON to train on.")
_PREDICT_FILE = flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict.")
_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
_QUERY = flags.DEFINE_integer("max_query_length", 64, "Questions are cut to this.")
_ANSWER = flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
_NBEST = flags.DEFINE_integer("n_best_size", 20, "Answers kept per question.")
_V2 = flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0 (unanswerable).")
_NULL = flags.DEFINE_float("null_score_diff_threshold", 0.0, "Predict '' above this.")
_SAVE = flags.DEFINE_integer("save_checkpoints_steps", 1000, "Most steps between backups.")
_cli.validate_ranges(squad.SquadConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = squad.SquadConfig(
            train_file=_TRAIN_FILE.value, predict_file=_PREDICT_FILE.value,
            doc_stride=_STRIDE.value, max_query_length=_QUERY.value,
            max_answer_length=_ANSWER.value, n_best_size=_NBEST.value,
            version_2_with_negative=_V2.value, null_score_diff_threshold=_NULL.value,
            save_checkpoints_steps=_SAVE.value, **_SHARED.settings())
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    results = squad.run_squad(config)
    logging.info("Done: %s", results)


if __name__ == "__main__":
    _cli.run(main)
