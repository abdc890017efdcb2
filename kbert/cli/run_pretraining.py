"""Pretrains BERT (masked LM + next sentence) with Keras `fit` on create_pretraining_data records
or straight from raw text.

From scratch with --bert_config_file, or continuing from a Google checkpoint with
--init_checkpoint (--init_heads=fresh starts new pretraining heads, for a release that has
none). --input_format=text (one sentence per line, blank lines between documents) or
=wikiextractor reads raw text, paired and masked on the fly with a new mask every epoch;
--pair_task=nsp|sop|none picks next-sentence, ALBERT's sentence-order, or no second task.
--input_file takes comma-separated files or globs; --max_seq_length and
--max_predictions_per_seq default to the records' _meta.json (raw text: 128 and 20).
The vocab comes from --vocab_file, else beside --init_checkpoint or --bert_config_file.
Every --save_checkpoints_steps steps the run backs itself up (an interrupted run resumes
when started again with the same flags; other flags, or a finished run, need
--overwrite_output_dir) and writes OUTPUT_DIR/pretrainer.keras; at the end
OUTPUT_DIR/model.ckpt-NUM_TRAIN_STEPS is a Google checkpoint with bert_config.json and
vocab.txt beside it.

  kbert-run-pretraining --input_file='out/train.tfrecord-*' --output_dir=pretrained \\
      --bert_config_file=bert_config.json --vocab_file=vocab.txt --train_batch_size=32 \\
      --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=1e-4
  kbert-run-pretraining --input_format=wikiextractor --input_file='wiki/*/wiki_*' \\
      --pair_task=sop --do_whole_word_mask --init_checkpoint=release --init_heads=fresh \\
      --output_dir=adapted --num_train_steps=10000 --num_warmup_steps=1000

--train_batch_size is global. Add --distribution_strategy=mirrored to train on every local
GPU, =multi_worker_mirrored (and TF_CONFIG) on several hosts, =tpu with --tpu on a Cloud TPU;
--mixed_precision=mixed_bfloat16 or mixed_float16 for mixed precision, --jit_compile for XLA.
"""

from kbert.cli import config_flags
from kbert.tasks import configs

# `run` is the `kbert-run-pretraining` command.
CONFIG_FLAGS, main, run = config_flags.recipe_command(
    configs.PretrainingConfig, "kbert.tasks.pretraining:run_pretraining")

if __name__ == "__main__":
    run()
