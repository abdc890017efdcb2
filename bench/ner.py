"""End-to-end CoNLL-2003 NER fine-tuning: kbert's recipe vs the Hugging Face Trainer.

Runs as separate processes, one after the other, on the same real MiniLM weights (converted
once to a Google checkpoint for kbert, read from the Hugging Face directory by the peer), with
the same seeded training sentences, epochs, batch size, learning rate, warm-up, weight decay,
sequence length and precision (`bench.budget`: --precision=bfloat16 is kbert's
--mixed_precision=mixed_bfloat16 and the Trainer's bf16 autocast):
  kbert        `tools/run_ner.py` (length-grouped batches, long sentences split into
               windows), last epoch kept, plus any --kbert_flags
  huggingface  `bench/hf_ner_peer.py`: `transformers.Trainer` with
               `BertForTokenClassification`, transformers' documented token-classification
               recipe (long sentences truncated)
Prints one row: dev and test entity precision/recall/F1 of each, training examples
(sentences) per second over the whole `fit` and over the epochs alone (kbert's `fit` also
writes its per-epoch backup), kbert's ratio to the peer and the precision each side ran in;
then a table of the epochs' speeds.

  python -m bench.ner --num_train_epochs=3 --max_seq_length=128 --learning_rate=2e-4 \\
      --work_dir=/tmp/kbert_bench_ner --output=ner.json
"""

import json
import os

from absl import app
from absl import flags

from bench import budget
from bench import runs

_DATA = flags.DEFINE_string(
    "data_dir", os.path.join(runs.SHARED_DATA, "conll2003"),
    "Directory with CoNLL-2003's train.txt, dev.txt and test.txt.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_ner", "Scratch directory.")
_BUDGET = budget.define_budget_flags(
    max_seq_length=128, train_batch_size=32, eval_batch_size=32, learning_rate=2e-4,
    num_train_epochs=3, max_train_examples=None, seed=12345)
_OUTPUT = flags.DEFINE_string("output", None, "Write the row as JSON here.")
_KBERT_FLAGS = budget.define_kbert_flags("run_ner.py", "--embedding_updates=sparse")

PEER_SCRIPTS = {"huggingface": "bench.hf_ner_peer"}
_PEERS = flags.DEFINE_list("peers", ["huggingface"], "Peers to run: huggingface.")
runs.validate_peers(_PEERS, PEER_SCRIPTS)
_SCORES = ("precision", "recall", "f1")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    common = [f"--{split}_file={os.path.join(_DATA.value, split + '.txt')}"
              for split in ("train", "dev", "test")]
    os.makedirs(_WORK.value, exist_ok=True)
    kbert_dir = os.path.join(_WORK.value, "kbert")
    runs.run(["tools/run_ner.py", *common, *budget.arguments(_BUDGET, kbert=True),
              f"--init_checkpoint={runs.google_checkpoint(_WORK.value)}",
              f"--output_dir={kbert_dir}", "--do_train", "--do_eval", "--do_predict",
              # As the peer: the last epoch, no dev scoring between epochs; a re-run starts over.
              "--noevaluate_every_epoch", "--nokeep_best_epoch", "--overwrite_output_dir",
              *_KBERT_FLAGS.value])
    kbert_train = runs.read_json(os.path.join(kbert_dir, "train_results.json"))
    kbert_eval = runs.read_json(os.path.join(kbert_dir, "eval_results.json"))
    sentences = kbert_train["sentences"]
    row = {"task": "CoNLL-2003", "max_seq_length": _BUDGET.max_seq_length.value,
           "epochs": _BUDGET.num_train_epochs.value, "train_sentences": sentences,
           "precision": _BUDGET.precision.value,
           "kbert_precision": runs.kbert_precision(kbert_dir)}
    examples = sentences * _BUDGET.num_train_epochs.value
    runs.add_speeds(row, "kbert", examples, kbert_train)
    for split in ("dev", "test"):
        row[f"kbert_{split}"] = {key: kbert_eval[split][key] for key in _SCORES}
    for peer in _PEERS.value:
        result = runs.run_peer(row, peer,
                               [PEER_SCRIPTS[peer], *common, *budget.arguments(_BUDGET)],
                               os.path.join(_WORK.value, f"{peer}.json"))
        if result["train"]["examples"] != sentences:
            raise AssertionError(f"{peer} trained on {result['train']['examples']} sentences, "
                                 f"kbert on {sentences}")
        runs.add_speeds(row, peer, examples, result["train"])
        for split in ("dev", "test"):
            scores = result["eval"][split]
            row[f"{peer}_{split}"] = {key: scores[key] for key in (*_SCORES, "truncated_words")}
    print(json.dumps(row), flush=True)
    print(runs.precision_table([row], ["kbert", *_PEERS.value], "sentences/s over the epochs"),
          flush=True)
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, row)


if __name__ == "__main__":
    app.run(main)
