"""Pretrains BERT (masked LM + next sentence) with Keras `fit` on create_pretraining_data records
or straight from raw text.

From scratch with --bert_config_file, or continuing from a Google checkpoint with
--init_checkpoint (--init_heads=fresh starts new pretraining heads, for a release that has
none). --input_format=text (one sentence per line, blank lines between documents) or
=wikiextractor reads raw text, paired and masked on the fly with a new mask every epoch;
--pair_task=nsp|sop|none picks next-sentence, ALBERT's sentence-order, or no second task.
The vocab comes from --vocab_file, else beside --init_checkpoint or --bert_config_file.
Every --save_checkpoints_steps steps the run backs itself up (an interrupted run resumes
when started again with the same flags; other flags, or a finished run, need
--overwrite_output_dir) and writes OUTPUT_DIR/pretrainer.keras; at the end
OUTPUT_DIR/model.ckpt-NUM_TRAIN_STEPS is a Google checkpoint with bert_config.json and
vocab.txt beside it.

  python tools/run_pretraining.py --input_file='out/train.tfrecord-*' --output_dir=pretrained \\
      --bert_config_file=bert_config.json --vocab_file=vocab.txt --train_batch_size=32 \\
      --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=1e-4
  python tools/run_pretraining.py --input_format=wikiextractor --input_file='wiki/*/wiki_*' \\
      --pair_task=sop --do_whole_word_mask --init_checkpoint=release --init_heads=fresh \\
      --output_dir=adapted --num_train_steps=10000 --num_warmup_steps=1000

--train_batch_size is global. Add --distribution_strategy=mirrored to train on every local
GPU, =multi_worker_mirrored (and TF_CONFIG) on several hosts, =tpu with --tpu on a Cloud TPU;
--mixed_precision=mixed_bfloat16 or mixed_float16 for mixed precision, --jit_compile for XLA.
"""

import _cli
import _flags
from absl import app
from absl import flags
from absl import logging

import kbert.tasks.pretraining

flags.adopt_module_key_flags(_flags)

_INPUT = flags.DEFINE_string("input_file", None,
                             "Pretraining TFRecords or raw text (files or globs).", required=True)
_FORMAT = flags.DEFINE_enum("input_format", "tfrecord", ["tfrecord", "text", "wikiextractor"],
                            "TFRecords, or raw text paired and masked on the fly.")
_PAIR = flags.DEFINE_enum("pair_task", "nsp", ["nsp", "sop", "none"],
                          "Raw text: next-sentence, sentence-order, or masked LM only.")
_OUTPUT = flags.DEFINE_string("output_dir", None, "Checkpoints and results go here.",
                              required=True)
_CONFIG = flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model.")
_INIT = flags.DEFINE_string("init_checkpoint", None, "Google checkpoint to continue from.")
_HEADS = flags.DEFINE_enum("init_heads", "checkpoint", ["checkpoint", "fresh"],
                           "Pretraining heads from the checkpoint, or new (encoder-only release).")
_VOCAB = flags.DEFINE_string("vocab_file", None,
                             "vocab.txt; defaults to the one beside the checkpoint or config.")
_SEQ = flags.DEFINE_integer("max_seq_length", None,
                            "Defaults to the records' _meta.json; raw text: 128.")
_PREDICTIONS = flags.DEFINE_integer("max_predictions_per_seq", None,
                                    "Defaults to the records' _meta.json; raw text: 20.")
_MASKED = flags.DEFINE_float("masked_lm_prob", 0.15, "Raw text: share of tokens to predict.")
_SHORT = flags.DEFINE_float("short_seq_prob", 0.1, "Raw text: chance of a shorter target.")
_WWM = flags.DEFINE_bool("do_whole_word_mask", False, "Raw text: mask whole words.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Raw text: lower-case (uncased vocab).")
_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak AdamW learning rate.")
_STEPS = flags.DEFINE_integer("num_train_steps", 100000, "Training steps.")
_WARMUP = flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warm-up steps.")
_SAVE = flags.DEFINE_integer("save_checkpoints_steps", 1000, "Backup interval in steps.")
_EVAL = flags.DEFINE_string("eval_input_file", None, "Records to evaluate on at the end.")
_EVAL_STEPS = flags.DEFINE_integer("max_eval_steps", 100, "Eval batches.")
_EVAL_BATCH = flags.DEFINE_integer("eval_batch_size", 8, "Eval batch size.")
_SEED = flags.DEFINE_integer("seed", 12345, "Random seed.")
_OVERWRITE = flags.DEFINE_bool("overwrite_output_dir", False, "Start over in an --output_dir "
                               "that holds another run or a finished one.")
_cli.validate_ranges(kbert.tasks.pretraining.PretrainingConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    config = kbert.tasks.pretraining.PretrainingConfig(
        input_file=_INPUT.value, output_dir=_OUTPUT.value, bert_config_file=_CONFIG.value,
        init_checkpoint=_INIT.value, init_heads=_HEADS.value, vocab_file=_VOCAB.value,
        input_format=_FORMAT.value, pair_task=_PAIR.value, max_seq_length=_SEQ.value,
        max_predictions_per_seq=_PREDICTIONS.value, masked_lm_prob=_MASKED.value,
        short_seq_prob=_SHORT.value, do_whole_word_mask=_WWM.value,
        do_lower_case=_LOWER.value, train_batch_size=_BATCH.value,
        learning_rate=_LR.value, num_train_steps=_STEPS.value, num_warmup_steps=_WARMUP.value,
        save_checkpoints_steps=_SAVE.value, eval_input_file=_EVAL.value,
        max_eval_steps=_EVAL_STEPS.value, eval_batch_size=_EVAL_BATCH.value, seed=_SEED.value,
        overwrite_output_dir=_OVERWRITE.value, **_flags.distribution_settings())
    results = kbert.tasks.pretraining.run_pretraining(config)
    logging.info("Done: %s", results)


if __name__ == "__main__":
    _cli.run(main)
