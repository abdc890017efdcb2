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

_SHARED = _flags.define_fine_tuning_flags(
    eval_batch_size=32, do_train_help="Fine-tune on --train_file.",
    do_eval_help="Score --dev_file.", do_predict_help="Predict (and score) --test_file.")
# After the definitions above: a module's key flags are those it has defined so far.
flags.adopt_module_key_flags(_flags)

_TRAIN_FILE = flags.DEFINE_string("train_file", None, "Training data (needs --do_train).")
_DEV_FILE = flags.DEFINE_string("dev_file", None, "Dev data, scored with --do_eval.")
_TEST_FILE = flags.DEFINE_string("test_file", None, "Test data, predicted with --do_predict.")
_FORMAT = flags.DEFINE_enum("data_format", "conll", ["conll", "two_column"], "File format.")
_SCHEME = flags.DEFINE_enum("tag_scheme", "auto", ["auto", "bio", "iob1", "iob2", "bmes",
                                                   "bioes", "iobes"], "Label scheme of the files.")
_CRF = flags.DEFINE_bool("use_crf", False, "Add a CRF output layer (Viterbi decoding).")
_MAX_TRAIN = flags.DEFINE_integer("max_train_sentences", None,
                                  "Train on a seeded random subset of this many sentences.")
_CONTEXT = flags.DEFINE_bool(
    "document_context", False, "Fill each window with the neighbouring sentences of the same "
    "document (-DOCSTART- lines split documents; a file without them is one document) as "
    "context; labels, loss and predictions only on the target sentence. Serving "
    "(export_saved_model) tags single texts, without context.")
_STRIDE = flags.DEFINE_integer(
    "window_stride", None, "Split sentences longer than --max_seq_length into overlapping "
    "windows this many pieces apart; each word is predicted from the window where it has "
    "the most context. Default: consecutive windows (as serving splits long texts).")
_EPOCH_EVAL = flags.DEFINE_bool("evaluate_every_epoch", True,
                                "Score --dev_file at the end of every training epoch.")
_cli.validate_ranges(ner.NerConfig)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = ner.NerConfig(
            train_file=_TRAIN_FILE.value, dev_file=_DEV_FILE.value, test_file=_TEST_FILE.value,
            data_format=_FORMAT.value, tag_scheme=_SCHEME.value, use_crf=_CRF.value,
            max_train_sentences=_MAX_TRAIN.value, evaluate_every_epoch=_EPOCH_EVAL.value,
            document_context=_CONTEXT.value, window_stride=_STRIDE.value,
            **_SHARED.settings())
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    results = ner.run_ner(config)
    for split, scores in results.get("eval", {}).items():
        logging.info("%s: entity F1 %.4f (precision %.4f, recall %.4f)", split, scores["f1"],
                     scores["precision"], scores["recall"])
    logging.info("Results written to %s", config.output_dir)


if __name__ == "__main__":
    _cli.run(main)
