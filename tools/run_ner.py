"""Fine-tunes BERT for named-entity recognition with model.fit, evaluates and predicts.

Data: CoNLL-2003 files (`word POS chunk NER`, -DOCSTART- lines; --data_format=conll) or
`token label` files such as character-level Chinese NER (--data_format=two_column). Labels in
IOB1, BIO, BMES or BIOES are converted to BIO. Each word's label goes on its first word-piece;
sentences longer than --max_seq_length are split into windows. --use_crf adds a CRF output
layer with Viterbi decoding. Scores are entity-level precision/recall/F1 as seqeval's default.
Writes to --output_dir: eval_results.txt/.json (dev_* and test_*), dev_predictions.txt and
test_predictions.txt (`word gold predicted` lines), train_results.json, labels.txt, vocab.txt,
model.keras, training_log.csv and TensorBoard logs/; an interrupted run, restarted with the same
flags, resumes from its last finished epoch.

  python tools/run_ner.py --train_file=conll2003/train.txt --dev_file=conll2003/dev.txt \\
      --test_file=conll2003/test.txt --init_checkpoint=cased_L-12_H-768_A-12 \\
      --do_lower_case=false --do_train --do_eval --do_predict --num_train_epochs=3 \\
      --output_dir=/tmp/ner

Batch sizes are global; --distribution_strategy and --mixed_precision as in run_classifier.py.
"""

import _cli
import _flags
from absl import app
from absl import flags
from absl import logging

from kbert.tasks import ner

flags.adopt_module_key_flags(_flags)

_TRAIN_FILE = flags.DEFINE_string("train_file", None, "Training data (needs --do_train).")
_DEV_FILE = flags.DEFINE_string("dev_file", None, "Dev data, scored with --do_eval.")
_TEST_FILE = flags.DEFINE_string("test_file", None, "Test data, predicted with --do_predict.")
_FORMAT = flags.DEFINE_enum("data_format", "conll", ["conll", "two_column"], "File format.")
_SCHEME = flags.DEFINE_enum("tag_scheme", "auto", ["auto", "bio", "iob1", "iob2", "bmes",
                                                   "bioes", "iobes"], "Label scheme of the files.")
_OUTPUT = flags.DEFINE_string("output_dir", None, "Where results go.", required=True)
_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Google checkpoint (release dir or prefix) to train from, or a "
    ".keras BertTokenClassifier. Defaults to --output_dir/model.keras without --do_train.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "Defaults to vocab.txt beside the checkpoint.")
_CONFIG = flags.DEFINE_string("bert_config_file", None, "Defaults to the one beside the ckpt.")
_LOWER = flags.DEFINE_bool("do_lower_case", True, "Whether the model is uncased.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Pieces per window.")
_TRAIN_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_EVAL_BATCH = flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, _cli.LEARNING_RATE_HELP)
_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs (a whole number).")
_WARMUP = flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps of linear warm-up.")
_CRF = flags.DEFINE_bool("use_crf", False, "Add a CRF output layer (Viterbi decoding).")
_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
_EVAL = flags.DEFINE_bool("do_eval", False, "Score --dev_file.")
_PREDICT = flags.DEFINE_bool("do_predict", False, "Predict (and score) --test_file.")
_MAX_TRAIN = flags.DEFINE_integer("max_train_sentences", None,
                                  "Train on a seeded random subset of this many sentences.")
_EPOCH_EVAL = flags.DEFINE_bool("evaluate_every_epoch", True,
                                "Score --dev_file at the end of every training epoch.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seeds the subset, shuffle, dropout and head.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = ner.NerConfig(
            output_dir=_OUTPUT.value, train_file=_TRAIN_FILE.value, dev_file=_DEV_FILE.value,
            test_file=_TEST_FILE.value, data_format=_FORMAT.value, tag_scheme=_SCHEME.value,
            init_checkpoint=_CHECKPOINT.value, vocab_file=_VOCAB.value,
            bert_config_file=_CONFIG.value, do_lower_case=_LOWER.value,
            max_seq_length=_MAX_SEQ.value, train_batch_size=_TRAIN_BATCH.value,
            eval_batch_size=_EVAL_BATCH.value, learning_rate=_LR.value,
            num_train_epochs=_EPOCHS.value, warmup_proportion=_WARMUP.value,
            use_crf=_CRF.value, do_train=_TRAIN.value, do_eval=_EVAL.value,
            do_predict=_PREDICT.value, max_train_sentences=_MAX_TRAIN.value,
            evaluate_every_epoch=_EPOCH_EVAL.value, seed=_SEED.value,
            **_flags.distribution_settings())
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    results = ner.run_ner(config)
    for split, scores in results.get("eval", {}).items():
        logging.info("%s: entity F1 %.4f (precision %.4f, recall %.4f)", split, scores["f1"],
                     scores["precision"], scores["recall"])
    logging.info("Results written to %s", _OUTPUT.value)


if __name__ == "__main__":
    _cli.run(main)
