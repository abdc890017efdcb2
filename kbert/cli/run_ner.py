"""Fine-tunes BERT for named-entity recognition with model.fit, evaluates and predicts.

Data: CoNLL-2003 files (`word POS chunk NER`, -DOCSTART- lines; --data_format=conll) or
`token label` files such as character-level Chinese NER (--data_format=two_column). Labels in
IOB1, BIO, BMES or BIOES are converted to BIO. Each word's label goes on its first word-piece;
sentences longer than --max_seq_length are split into windows (overlapping with
--window_stride). --document_context fills each window with the neighbouring sentences of the
same document as context (scored and predicted on the target sentence only; serving tags
single texts without context). --use_crf adds a CRF output layer with Viterbi decoding.
Scores are entity-level precision/recall/F1 as seqeval's default. Writes to --output_dir:
model.keras, bert_model.ckpt (the tagger in Google's format, head cls/ner/*), vocab.txt,
bert_config.json, export_settings.json, labels.txt, eval_results.txt/.json (dev_* and
test_*), dev_predictions.txt and test_predictions.txt (`word gold predicted` lines),
train_results.json, training_log.csv and TensorBoard logs/. An interrupted run, restarted
with the same flags, resumes from its last finished epoch; other flags need
--overwrite_output_dir.

  kbert-run-ner --train_file=conll2003/train.txt --dev_file=conll2003/dev.txt \\
      --test_file=conll2003/test.txt --init_checkpoint=cased_L-12_H-768_A-12 \\
      --do_lower_case=false --do_train --do_eval --do_predict --num_train_epochs=3 \\
      --output_dir=/tmp/ner

Batch sizes are global; --distribution_strategy and --mixed_precision as in kbert-run-classifier.
"""

from kbert.cli import config_flags
from kbert.tasks import configs

# `run` is the `kbert-run-ner` command.
CONFIG_FLAGS, main, run = config_flags.recipe_command(
    configs.NerConfig, "kbert.tasks.ner:run_ner")

if __name__ == "__main__":
    run()
