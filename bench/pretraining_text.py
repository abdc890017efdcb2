"""Pretraining from raw text: is the on-the-fly pipeline fast enough, and does it learn as well?

Three measurements (`--mode`):

  throughput  examples/s that `kbert.data.pretraining_text_dataset` delivers (WikiExtractor
              text, seq 128, batch 32, NSP, with and without whole-word masking) against the
              training step rate of `BertPretrainer` at the MiniLM and Base shapes (the same
              batches, already in memory). The bar: the pipeline at least 3x the Base step rate.
  compare     the same tiny BERT, the same text, the same steps and seed, trained twice with
              `kbert.tasks.pretraining.run_pretraining`: from static TFRecords
              (`create_pretraining_data`, --dupe_factor masks per instance) and from the raw text
              (a new mask every epoch); then the held-out MLM loss and accuracy of each on one
              set of held-out records (the last corpus file).
  resume      what a run resumed at step k pays to read on where it stopped: the seconds to
              the first batch with `skip_batches=k` (the text before it tokenized and paired
              again, not masked) against `skip_batches=0`, as examples re-read per second;
              with `throughput` in the same run, that rate over each training step's.

  python -m bench.pretraining_text --mode=throughput
  python -m bench.pretraining_text --mode=compare --num_train_steps=2000
  python -m bench.pretraining_text --mode=throughput --mode=resume --step_shapes=minilm
  python -m bench.pretraining_text --tiny   # a smoke run: a tiny model, a few steps
"""

import glob
import os
import time

import numpy as np
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
_MODE = flags.DEFINE_multi_enum("mode", ["throughput", "compare"],
                                ["throughput", "compare", "resume"], "What to measure.")
_TRAIN_FILES = flags.DEFINE_integer("train_files", 3, "Files to train on (~1 MB each).")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_text", "Scratch directory.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Examples per batch.")
_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
# Enough batches to pass several epochs of the training text, so the pipeline's buffers filled
# during the warm-up batches do not flatter the rate.
_BATCHES = flags.DEFINE_integer("batches", 2000, "Throughput: batches timed (after 20); "
                                "resume: the step resumed at.")
_SHAPES = flags.DEFINE_list("step_shapes", ["minilm", "base"],
                            "Throughput: training-step shapes timed (minilm, base).")
_STEPS = flags.DEFINE_integer("num_train_steps", 2000, "Compare: training steps.")
_DUPE = flags.DEFINE_integer("dupe_factor", 5, "Compare: masks per instance, static records.")
_TINY = flags.DEFINE_bool("tiny", False, "Smoke run: tiny shapes, few batches and steps.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")

SHAPES = {"minilm": (6, 384, 12, 1536), "base": (12, 768, 12, 3072)}  # layers, hidden, heads, ff
TINY_SHAPE = (1, 16, 2, 24)


def bert_config(shape):
    layers, hidden, heads, ff = shape
    return kbert.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, intermediate_size=ff,
                            max_position_embeddings=max(_SEQ.value, 128))


def text_config(whole_word=False):
    return data.PretrainingDataConfig(max_seq_length=_SEQ.value, max_predictions_per_seq=20,
                                      do_whole_word_mask=whole_word, dupe_factor=_DUPE.value)


def throughput(train_files):
    batches = 5 if _TINY.value else _BATCHES.value
    results = {}
    for whole_word in (False, True):
        ds = data.pretraining_text_dataset(",".join(train_files), runs.minilm_vocab(), _BATCH.value,
                                           config=text_config(whole_word),
                                           input_format="wikiextractor")
        iterator = iter(ds)
        for _ in range(2 if _TINY.value else 20):  # start-up: tokenizer, tracing, first chunk
            batch = next(iterator)
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        seconds = time.perf_counter() - start
        results["pipeline_wwm" if whole_word else "pipeline"] = round(
            batches * _BATCH.value / seconds, 1)
    shapes = {"tiny": TINY_SHAPE} if _TINY.value else {k: SHAPES[k] for k in _SHAPES.value}
    for name, shape in shapes.items():
        model = kbert.BertPretrainer(kbert.BertEncoder(**bert_config(shape).encoder_kwargs()))
        pretraining.compile_pretrainer(model, optimization.create_optimizer(1e-4, 1000, 100),
                                       jit_compile=True)
        x, y, w = batch
        for _ in range(3):
            model.train_on_batch(x, y, sample_weight=w)
        steps = 3 if _TINY.value else 30
        start = time.perf_counter()
        for _ in range(steps):
            loss = model.train_on_batch(x, y, sample_weight=w)
        float(np.asarray(loss[0] if isinstance(loss, list) else loss))  # wait for the device
        rate = steps * _BATCH.value / (time.perf_counter() - start)
        results[f"train_step_{name}"] = round(rate, 1)
        results[f"pipeline_over_{name}"] = round(results["pipeline_wwm"] / rate, 2)
    results["batches_timed"] = batches
    return results


def resume(train_files):
    skip = 5 if _TINY.value else _BATCHES.value
    seconds = {}
    for skip_batches in (0, skip, 0):  # the first run of 0 warms the file cache and tf.data
        ds = data.pretraining_text_dataset(",".join(train_files), runs.minilm_vocab(),
                                           _BATCH.value, config=text_config(),
                                           input_format="wikiextractor",
                                           skip_batches=skip_batches)
        start = time.perf_counter()
        next(iter(ds))
        seconds[skip_batches] = time.perf_counter() - start
    extra = seconds[skip] - seconds[0]
    # None when the skipped batches fit in the shuffle buffer the first batch fills anyway.
    rate = round(skip * _BATCH.value / extra, 1) if extra > 0 else None
    return {"resumed_at_step": skip, "seconds_to_first_batch": round(seconds[0], 2),
            f"seconds_to_first_batch_at_step_{skip}": round(seconds[skip], 2),
            "examples_reread_per_second": rate}


def compare(train_files, heldout_file):
    shape = TINY_SHAPE if _TINY.value else (2, 128, 2, 512)
    steps = 4 if _TINY.value else _STEPS.value
    work = _WORK.value
    config_file = os.path.join(work, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(bert_config(shape).to_json_string())
    records = {}
    for name, files in (("train", train_files), ("heldout", [heldout_file])):
        records[name] = os.path.join(work, name, "records.tfrecord")
        if not os.path.exists(records[name]):
            data.create_pretraining_data(",".join(files), records[name], runs.minilm_vocab(),
                                         config=text_config(), input_format="wikiextractor",
                                         random_seed=1 if name == "heldout" else 12345,
                                         progress=False)
    common = dict(bert_config_file=config_file, vocab_file=runs.minilm_vocab(),
                  train_batch_size=_BATCH.value, learning_rate=1e-3, num_train_steps=steps,
                  num_warmup_steps=max(steps // 10, 1), save_checkpoints_steps=max(steps // 4, 1),
                  max_seq_length=_SEQ.value, max_predictions_per_seq=20, seed=0)
    configs = {
        "static_records": pretraining.PretrainingConfig(
            input_file=records["train"], output_dir=os.path.join(work, "static"), **common),
        "from_text": pretraining.PretrainingConfig(
            input_file=",".join(train_files), input_format="wikiextractor",
            output_dir=os.path.join(work, "text"), **common),
    }
    heldout = pretraining.PretrainingConfig(
        input_file=records["heldout"], eval_input_file=records["heldout"], output_dir=work,
        max_eval_steps=5 if _TINY.value else 100, eval_batch_size=32, **common)
    results = {"steps": steps, "model": "L={} H={} A={} I={}".format(*shape)}
    for name, run in configs.items():
        start = time.perf_counter()
        trained = pretraining.run_pretraining(run)
        model = kbert.BertPretrainer.from_google_checkpoint(trained["checkpoint"])
        pretraining.compile_pretrainer(model, optimization.create_optimizer(1e-3, 10, 1))
        scores = pretraining.evaluate(model, heldout)
        results[name] = {"seconds": round(time.perf_counter() - start, 1),
                         "heldout_masked_lm_loss": round(float(scores["masked_lm_loss"]), 4),
                         "heldout_masked_lm_accuracy": round(
                             float(scores["masked_lm_accuracy"]), 4)}
    return results


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    files = sorted(glob.glob(_CORPUS.value))
    if len(files) < 2:
        raise app.UsageError(f"--corpus={_CORPUS.value}: needs at least two files")
    train_files = files[:min(_TRAIN_FILES.value, len(files) - 1)]
    os.makedirs(_WORK.value, exist_ok=True)
    summary = {"batch_size": _BATCH.value, "max_seq_length": _SEQ.value,
               "train_mb": round(sum(os.path.getsize(f) for f in train_files) / 1e6, 1)}
    if "throughput" in _MODE.value:
        summary["examples_per_second"] = throughput(train_files)
    if "resume" in _MODE.value:
        summary["resume"] = resume(train_files)
        for name, rate in summary.get("examples_per_second", {}).items():
            if name.startswith("train_step_") and summary["resume"]["examples_reread_per_second"]:
                summary["resume"][f"reread_over_{name}"] = round(
                    summary["resume"]["examples_reread_per_second"] / rate, 1)
    if "compare" in _MODE.value:
        summary["compare"] = compare(train_files, files[-1])
    runs.report(summary, _OUTPUT.value, indent=2)


if __name__ == "__main__":
    app.run(main)
