"""End-to-end CoNLL-2003 NER fine-tuning: kbert's recipe vs the Hugging Face Trainer.

Runs as separate processes, one after the other, on the same real MiniLM weights (converted
once to a Google checkpoint for kbert, read from the Hugging Face directory by the peer), with
the same seeded training sentences, epochs, batch size, learning rate, warm-up, weight decay
and sequence length:
  kbert        `tools/run_ner.py` (length-grouped batches, long sentences split into
               windows), last epoch kept, plus any --kbert_flags
  huggingface  `bench/hf_ner_peer.py`: `transformers.Trainer` with
               `BertForTokenClassification`, transformers' documented token-classification
               recipe (long sentences truncated)
Prints one row: dev and test entity precision/recall/F1 of each, training examples
(sentences) per second over the whole `fit` and over the epochs alone (kbert's `fit` also
writes its per-epoch backup), and kbert's ratio to the peer.

  python -m bench.ner --num_train_epochs=3 --max_seq_length=128 --learning_rate=2e-4 \\
      --work_dir=/tmp/kbert_bench_ner --output=ner.json
"""

import json
import os

from absl import app
from absl import flags

from bench import runs

_DATA = flags.DEFINE_string(
    "data_dir", os.path.join(runs.SHARED_DATA, "conll2003"),
    "Directory with CoNLL-2003's train.txt, dev.txt and test.txt.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_ner", "Scratch directory.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Pieces per sentence (both).")
_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size (both).")
_LR = flags.DEFINE_float("learning_rate", 2e-4, "Peak learning rate (both).")
_EPOCHS = flags.DEFINE_integer("num_train_epochs", 3, "Epochs (both).")
_MAX_TRAIN = flags.DEFINE_integer("max_train_sentences", 0,
                                  "Seeded training subset (both); 0 = the whole train set.")
_SEED = flags.DEFINE_integer("seed", 12345, "Subset, shuffle, dropout and head seed (both).")
_OUTPUT = flags.DEFINE_string("output", None, "Write the row as JSON here.")
_KBERT_FLAGS = flags.DEFINE_list(
    "kbert_flags", [], "Extra run_ner.py flags, e.g. --kbert_flags=--embedding_updates=sparse.")

PEER_SCRIPTS = {"huggingface": "bench.hf_ner_peer"}
_PEERS = flags.DEFINE_list("peers", ["huggingface"], "Peers to run: huggingface.")
runs.validate_peers(_PEERS, PEER_SCRIPTS)
_SCORES = ("precision", "recall", "f1")


def _speeds(sentences, train):
    """Sentences per second over the whole training call and over the epochs alone."""
    examples = sentences * _EPOCHS.value
    return (round(examples / train["seconds"], 2),
            round(examples / sum(train["epoch_seconds"]), 2))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    common = [f"--{split}_file={os.path.join(_DATA.value, split + '.txt')}"
              for split in ("train", "dev", "test")]
    common += [f"--max_seq_length={_MAX_SEQ.value}", f"--train_batch_size={_BATCH.value}",
               f"--learning_rate={_LR.value}", f"--num_train_epochs={_EPOCHS.value}",
               f"--seed={_SEED.value}", "--eval_batch_size=32"]
    if _MAX_TRAIN.value:
        common.append(f"--max_train_sentences={_MAX_TRAIN.value}")
    os.makedirs(_WORK.value, exist_ok=True)
    kbert_dir = os.path.join(_WORK.value, "kbert")
    runs.run(["tools/run_ner.py", *common,
              f"--init_checkpoint={runs.google_checkpoint(_WORK.value)}",
              f"--output_dir={kbert_dir}", "--do_train", "--do_eval", "--do_predict",
              # As the peer: the last epoch, no dev scoring between epochs; a re-run starts over.
              "--noevaluate_every_epoch", "--nokeep_best_epoch", "--overwrite_output_dir",
              *_KBERT_FLAGS.value])
    kbert_train = runs.read_json(os.path.join(kbert_dir, "train_results.json"))
    kbert_eval = runs.read_json(os.path.join(kbert_dir, "eval_results.json"))
    sentences = kbert_train["sentences"]
    row = {"task": "CoNLL-2003", "max_seq_length": _MAX_SEQ.value, "epochs": _EPOCHS.value,
           "train_sentences": sentences}
    row["kbert_examples_per_second"], row["kbert_epoch_examples_per_second"] = _speeds(
        sentences, kbert_train)
    for split in ("dev", "test"):
        row[f"kbert_{split}"] = {key: kbert_eval[split][key] for key in _SCORES}
    for peer in _PEERS.value:
        peer_json = os.path.join(_WORK.value, f"{peer}.json")
        runs.run(["-m", PEER_SCRIPTS[peer], *common, f"--hf_dir={runs.minilm_dir()}",
                  f"--output={peer_json}"])
        result = runs.read_json(peer_json)
        if result["train"]["examples"] != sentences:
            raise AssertionError(f"{peer} trained on {result['train']['examples']} sentences, "
                                 f"kbert on {sentences}")
        row[f"{peer}_examples_per_second"], row[f"{peer}_epoch_examples_per_second"] = _speeds(
            sentences, result["train"])
        for split in ("dev", "test"):
            scores = result["eval"][split]
            row[f"{peer}_{split}"] = {key: scores[key] for key in (*_SCORES, "truncated_words")}
        for kind in ("", "epoch_"):
            row[f"{kind}speedup_vs_{peer}"] = round(
                row[f"kbert_{kind}examples_per_second"]
                / row[f"{peer}_{kind}examples_per_second"], 2)
    print(json.dumps(row), flush=True)
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, row)


if __name__ == "__main__":
    app.run(main)
