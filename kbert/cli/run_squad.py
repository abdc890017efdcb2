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

  kbert-run-squad --do_train --do_predict --init_checkpoint=uncased_L-12_H-768_A-12 \\
      --train_file=train-v1.1.json --predict_file=dev-v1.1.json --output_dir=squad_out \\
      --max_seq_length=384 --doc_stride=128 --train_batch_size=32 --learning_rate=3e-5 \\
      --num_train_epochs=2.0

Batch sizes are global; --distribution_strategy and --mixed_precision as in kbert-run-classifier.
"""

from kbert.cli import config_flags
from kbert.tasks import configs

# `run` is the `kbert-run-squad` command.
CONFIG_FLAGS, main, run = config_flags.recipe_command(
    configs.SquadConfig, "kbert.tasks.squad:run_squad")

if __name__ == "__main__":
    run()
