"""Fine-tunes BERT for text (pair) classification or regression: a GLUE task or your own files.

As Google's run_classifier.py, with the same flags. GLUE tasks: CoLA, SST-2, MRPC, STS-B, QQP,
MNLI, QNLI, RTE, WNLI, and AX (the diagnostic set: --do_predict with an MNLI model.keras), read
from --data_dir (--do_train needs train.tsv, --do_eval dev.tsv, --do_predict test.tsv).
Your own data: --train_file, --dev_file, --test_file (.csv or .tsv with a header, or .jsonl),
with --text_a_column, --text_b_column (pairs), --label_column; labels are those of the training
file (or --labels), --regression for real-valued labels, --multi_label for any number of labels
per text (--label_column of labels joined by --label_separator, or --label_columns of 0/1 each;
a threshold per label is tuned on dev and saved in export_settings.json).

Writes to --output_dir: model.keras, vocab.txt, bert_config.json, export_settings.json,
eval_results.txt/.json, <split>_predictions.tsv (dev: texts, gold, predicted, probabilities),
<TASK>.tsv test predictions in the GLUE server's format, train_results.json,
training_log.csv, TensorBoard logs/. An interrupted run, restarted with the same flags,
resumes from its last finished epoch; other flags need --overwrite_output_dir.

  kbert-run-classifier --task_name=MRPC --data_dir=glue_data/MRPC \\
      --init_checkpoint=uncased_L-12_H-768_A-12 --do_train --do_eval --do_predict \\
      --learning_rate=2e-5 --num_train_epochs=3 --output_dir=/tmp/mrpc

  kbert-run-classifier --train_file=reviews_train.csv --dev_file=reviews_dev.csv \\
      --text_a_column=review --label_column=stars --init_checkpoint=uncased_L-12_H-768_A-12 \\
      --do_train --do_eval --output_dir=/tmp/reviews

Batch sizes are global. Add --distribution_strategy=mirrored to train on every local GPU,
=multi_worker_mirrored (and TF_CONFIG) on several hosts, =tpu with --tpu on a Cloud TPU;
--mixed_precision=mixed_bfloat16 or mixed_float16 for mixed precision.
"""

from kbert.cli import config_flags
from kbert.tasks import configs

# `run` is the `kbert-run-classifier` command.
CONFIG_FLAGS, main, run = config_flags.recipe_command(
    configs.GlueConfig, "kbert.tasks.glue:run_glue")

if __name__ == "__main__":
    run()
