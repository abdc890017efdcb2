"""Does pretraining learn? A tiny BERT, `model.fit` on a few MB of real text, held-out MLM accuracy.

Writes pretraining records with `kbert.data.create_pretraining_data` from the first
--train_files WikiExtractor files (train) and the last one (held out), then runs
`kbert.tasks.pretraining.run_pretraining` from scratch (BERT's AdamW, warm-up + linear decay)
and evaluates on the held-out records before and after. The bar to clear: the MLM loss falls
well below its initial value (log of the vocab size for an untrained model) and the MLM
accuracy rises above the unigram baseline (always predicting the most frequent masked token).

  python -m bench.pretraining_fit --work_dir=/tmp/kbert_fit --num_train_steps=1000
"""

import glob
import os
import time

from absl import app
from absl import flags

import kbert
from bench import runs
from kbert import data
from kbert.tasks import optimization
from kbert.tasks import pretraining

_CORPUS = flags.DEFINE_string(
    "corpus", os.path.join(runs.WIKI_CORPUS, "wiki_*"),
    "WikiExtractor files (glob); the last one is held out.")
_TRAIN_FILES = flags.DEFINE_integer("train_files", 3, "Files to train on (~1 MB each).")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_fit", "Scratch directory.")
_STEPS = flags.DEFINE_integer("num_train_steps", 1000, "Training steps.")
_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Batch size.")
_LR = flags.DEFINE_float("learning_rate", 1e-3, "Peak learning rate.")
_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
_LAYERS = flags.DEFINE_integer("num_hidden_layers", 2, "Tiny BERT: layers.")
_HIDDEN = flags.DEFINE_integer("hidden_size", 128, "Tiny BERT: width.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def main(argv):
    del argv
    vocab = runs.minilm_vocab()
    files = sorted(glob.glob(_CORPUS.value))
    os.makedirs(_WORK.value, exist_ok=True)
    config = data.PretrainingDataConfig(max_seq_length=_SEQ.value, max_predictions_per_seq=20,
                                        dupe_factor=2)
    sets = {"train": files[:_TRAIN_FILES.value], "heldout": files[-1:]}
    patterns = {}
    for name, subset in sets.items():
        output = os.path.join(_WORK.value, name, "records.tfrecord")
        if not os.path.exists(output):
            data.create_pretraining_data(",".join(subset), output, vocab, config=config,
                                         input_format="wikiextractor", progress=False)
        patterns[name] = output
    bert_config = os.path.join(_WORK.value, "bert_config.json")
    with open(bert_config, "w", encoding="utf-8") as f:
        f.write(kbert.BertConfig(
            vocab_size=30522, hidden_size=_HIDDEN.value, num_hidden_layers=_LAYERS.value,
            num_attention_heads=2, intermediate_size=4 * _HIDDEN.value,
            max_position_embeddings=_SEQ.value).to_json_string())
    run = pretraining.PretrainingConfig(
        input_file=patterns["train"], output_dir=os.path.join(_WORK.value, "run"),
        bert_config_file=bert_config, vocab_file=vocab, train_batch_size=_BATCH.value,
        learning_rate=_LR.value, num_train_steps=_STEPS.value,
        num_warmup_steps=_STEPS.value // 10, save_checkpoints_steps=_STEPS.value // 4,
        eval_input_file=patterns["heldout"], max_eval_steps=100, eval_batch_size=32, seed=0)

    model, _ = pretraining.build_pretrainer(run)  # the same seeded init run_pretraining makes
    pretraining.compile_pretrainer(model, optimization.create_optimizer(1e-3, 10, 1))
    before = pretraining.evaluate(model, run)
    start = time.perf_counter()
    results = pretraining.run_pretraining(run)
    summary = {
        "train_records": sum(1 for _ in data.pretraining_dataset(
            patterns["train"], 1, shuffle=False, repeat=False)),
        "train_mb": round(sum(os.path.getsize(f) for f in sets["train"]) / 1e6, 1),
        "steps": _STEPS.value, "batch": _BATCH.value, "seconds": round(
            time.perf_counter() - start, 1),
        "model": f"L={_LAYERS.value} H={_HIDDEN.value} A=2 vocab=30522 seq={_SEQ.value}",
        "unigram_baseline_accuracy": round(pretraining.unigram_accuracy(patterns["heldout"]), 4),
        "heldout_before": {k: round(float(v), 4) for k, v in before.items()},
        "heldout_after": {k: round(float(v), 4) for k, v in results["eval"].items()},
        "train_last_epoch": {k: round(float(v), 4) for k, v in results["train"].items()},
    }
    runs.report(summary, _OUTPUT.value, indent=2)


if __name__ == "__main__":
    app.run(main)
