"""Fine-tunes BERT on SQuAD v1.1 or v2.0 and predicts answers, as Google's run_squad.py.

--do_train trains on --train_file with model.fit (resumable: rerun the same command after an
interruption) and writes OUTPUT_DIR/span_labeler.keras. --do_predict writes
predictions.json, nbest_predictions.json and, with --version_2_with_negative, null_odds.json;
when --predict_file has answers, OUTPUT_DIR/eval_results.json holds the official EM and F1.
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

flags.adopt_module_key_flags(_flags)

_OUTPUT = flags.DEFINE_string("output_dir", None, "Model, predictions and results.",
                              required=True)
_VOCAB = flags.DEFINE_string("vocab_file", None, "vocab.txt; defaults to the checkpoint's.")
_CONFIG = flags.DEFINE_string("bert_config_file", None, "Defaults to the checkpoint's.")
_INIT = flags.DEFINE_string("init_checkpoint", None, "Google checkpoint or .keras model.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")
_TRAIN_FILE = flags.DEFINE_string("train_file", None, "SQuAD JSON to train on.")
_PREDICT_FILE = flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict.")
_SEQ = flags.DEFINE_integer("max_seq_length", 384, "Window length in word pieces.")
_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
_QUERY = flags.DEFINE_integer("max_query_length", 64, "Questions are cut to this.")
_ANSWER = flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
_NBEST = flags.DEFINE_integer("n_best_size", 20, "Answers kept per question.")
_V2 = flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0 (unanswerable).")
_NULL = flags.DEFINE_float("null_score_diff_threshold", 0.0, "Predict '' above this.")
_DO_TRAIN = flags.DEFINE_bool("do_train", False, "Train on --train_file.")
_DO_PREDICT = flags.DEFINE_bool("do_predict", False, "Predict --predict_file.")
_TRAIN_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_PREDICT_BATCH = flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, _cli.LEARNING_RATE_HELP)
_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0, "Passes over the training windows.")
_WARMUP = flags.DEFINE_float("warmup_proportion", 0.1, "Share of steps in warm-up.")
_SAVE = flags.DEFINE_integer("save_checkpoints_steps", 1000, "Most steps between backups.")
_SEED = flags.DEFINE_integer("seed", 12345, "Data order and head initialization.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not _DO_TRAIN.value and not _DO_PREDICT.value:
        raise app.UsageError("At least one of --do_train and --do_predict must be set")
    for wanted, path, name in ((_DO_TRAIN, _TRAIN_FILE, "train_file"),
                               (_DO_PREDICT, _PREDICT_FILE, "predict_file")):
        if wanted.value and not path.value:
            raise app.UsageError(f"--{wanted.name} needs --{name}")
    results = squad.run_squad(
        _OUTPUT.value, _VOCAB.value,
        train_file=_TRAIN_FILE.value if _DO_TRAIN.value else None,
        predict_file=_PREDICT_FILE.value if _DO_PREDICT.value else None,
        init_checkpoint=_INIT.value, bert_config_file=_CONFIG.value,
        do_lower_case=_LOWER.value, max_seq_length=_SEQ.value, doc_stride=_STRIDE.value,
        max_query_length=_QUERY.value, max_answer_length=_ANSWER.value,
        n_best_size=_NBEST.value, version_2_with_negative=_V2.value,
        null_score_diff_threshold=_NULL.value, train_batch_size=_TRAIN_BATCH.value,
        predict_batch_size=_PREDICT_BATCH.value, learning_rate=_LR.value,
        num_train_epochs=_EPOCHS.value, warmup_proportion=_WARMUP.value,
        save_checkpoints_steps=_SAVE.value, seed=_SEED.value, **_flags.distribution_settings())
    logging.info("Done: %s", results)


if __name__ == "__main__":
    _cli.run(main)
