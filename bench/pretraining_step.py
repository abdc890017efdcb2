"""One pretraining step: kbert BertPretrainer vs keras-hub BertMaskedLM vs HF BertForPreTraining.

The same real batches (--batch_size x --seq_length, written once by
tools/create_pretraining_data.py from the shared WikiExtractor corpus with MiniLM's vocab,
read by `kbert.data.pretraining.record_input.pretraining_dataset` and held in memory) go through one
full training step (forward, backward, optimizer update) of each implementation, from random
weights of the same shape (vocab 30,522):

  kbert       `BertPretrainer` compiled by `kbert.tasks.pretraining.compile_pretrainer` with
              `kbert.create_optimizer`: exactly tools/run_pretraining.py's step (MLM + NSP,
              Google's losses and metrics), called with `train_on_batch`
  keras_hub   `keras_hub.models.BertMaskedLM` (no preprocessor): MLM ONLY (keras-hub has no
              next-sentence head), same optimizer, `train_on_batch`
  hf          `transformers.BertForPreTraining` on PyTorch CPU (MLM + NSP), torch AdamW
              (weight decay 0.01, eps 1e-6) with gradient clipping at 1.0 as Google's. Note
              it projects every position onto the vocab, not only the masked ones.

Timing as bench/encoder.py: interleaved rounds in a rotating order, --steps per turn after
an untimed one, until every implementation has --repeats turns and --min_seconds; examples/s
from the median step. Target (issue 24): kbert >= 1.2x both.

--profile_dir traces --profile_steps kbert steps with the TensorFlow profiler (open with
TensorBoard's profile plugin) and prints the top ops by self time, grouped by op type.

  python -m bench.pretraining_step --configs=minilm,base --output=/tmp/pretraining_step.json
  python -m bench.pretraining_step --configs=minilm --impls=kbert --profile_dir=/tmp/prof
Needs the bench extra: pip install -e .[bench] (torch, transformers).
"""

import collections
import glob
import json
import os
import statistics
import time

import numpy as np
from absl import app
from absl import flags

from bench import runs

_CONFIGS = flags.DEFINE_list("configs", ["minilm", "base"], "Model shapes: minilm, base.")
_IMPLS = flags.DEFINE_list("impls", ["kbert", "keras_hub", "hf"], "Implementations to time.")
_CORPUS = flags.DEFINE_string(
    "corpus", os.path.join(runs.WIKI_CORPUS, "wiki_0[0-1]"),
    "WikiExtractor files (glob) for the records.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_pretraining_step", "Scratch dir.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Examples per step.", lower_bound=1)
_SEQ = flags.DEFINE_integer("seq_length", 128, "max_seq_length of the records.", lower_bound=3)
_PREDICTIONS = flags.DEFINE_integer("max_predictions_per_seq", 20, "Of the records.",
                                    lower_bound=1)
_NUM_BATCHES = flags.DEFINE_integer("num_batches", 8, "Distinct batches held in memory.",
                                    lower_bound=1)
_STEPS = flags.DEFINE_integer("steps", 3, "Timed steps per turn.", lower_bound=1)
_REPEATS = flags.DEFINE_integer("repeats", 5, "Least turns per implementation.", lower_bound=1)
_MIN_SECONDS = flags.DEFINE_float("min_seconds", 10.0, "Least timed seconds per implementation.",
                                  lower_bound=0)
_PROFILE = flags.DEFINE_string("profile_dir", None, "Trace kbert's step here (tf.profiler).")
_PROFILE_STEPS = flags.DEFINE_integer("profile_steps", 5, "kbert steps traced.", lower_bound=1)
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")

SHAPES = {"minilm": (6, 384, 12, 1536), "base": (12, 768, 12, 3072)}  # layers, hidden, heads, ff
VOCAB = 30522


def make_records():
    """Records from tools/create_pretraining_data.py (made once per corpus and length)."""
    out_dir = os.path.join(_WORK.value, f"records_{_SEQ.value}_{_PREDICTIONS.value}")
    pattern = os.path.join(out_dir, "train.tfrecord")
    if not os.path.exists(pattern):
        files = ",".join(sorted(glob.glob(_CORPUS.value)))
        if not files:
            raise app.UsageError(f"--corpus {_CORPUS.value}: no files")
        runs.run(["tools/create_pretraining_data.py", f"--input_file={files}",
                  f"--output_file={pattern}", f"--vocab_file={runs.minilm_vocab()}",
                  "--input_format=wikiextractor", f"--max_seq_length={_SEQ.value}",
                  f"--max_predictions_per_seq={_PREDICTIONS.value}", "--dupe_factor=1"])
    return pattern


def load_batches(pattern):
    """--num_batches (inputs, labels, sample_weights) batches as numpy, in file order."""
    from kbert.data.pretraining import record_input

    dataset = record_input.pretraining_dataset(pattern, _BATCH.value, shuffle=False,
                                                    repeat=True)
    return [tuple({k: v.numpy() for k, v in part.items()} for part in batch)
            for batch in dataset.take(_NUM_BATCHES.value)]


def kbert_step(config, batches):
    import keras

    from kbert.models.encoder import BertEncoder
    from kbert.models.pretrainer import BertPretrainer
    from kbert.tasks import optimization
    from kbert.tasks import pretraining

    keras.utils.set_random_seed(0)
    layers, hidden, heads, ff = SHAPES[config]
    model = BertPretrainer(BertEncoder(VOCAB, layers, heads, hidden, ff))
    pretraining.compile_pretrainer(model, optimization.create_optimizer(1e-4, 10000, 1000))
    return lambda i: model.train_on_batch(*batches[i % len(batches)])


def keras_hub_step(config, batches):
    import keras
    import keras_hub

    from kbert.tasks import optimization

    keras.utils.set_random_seed(0)
    layers, hidden, heads, ff = SHAPES[config]
    backbone = keras_hub.models.BertBackbone(VOCAB, layers, heads, hidden, ff,
                                             max_sequence_length=512)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=optimization.create_optimizer(1e-4, 10000, 1000),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()])
    mlm_only = [(x, y["mlm_logits"], w["mlm_logits"]) for x, y, w in batches]
    return lambda i: model.train_on_batch(*mlm_only[i % len(mlm_only)])


def hf_step(config, batches):
    import torch
    import transformers

    torch.manual_seed(0)
    layers, hidden, heads, ff = SHAPES[config]
    model = transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=ff, hidden_act="gelu_new", attn_implementation="sdpa"))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    tensors = []
    for x, y, w in batches:
        # HF takes MLM labels per position, -100 where nothing is predicted.
        labels = np.full(x["token_ids"].shape, -100, np.int64)
        rows, cols = np.nonzero(w["mlm_logits"] > 0)
        labels[rows, x["mask_positions"][rows, cols]] = y["mlm_logits"][rows, cols]
        tensors.append({"input_ids": torch.from_numpy(x["token_ids"].astype(np.int64)),
                        "token_type_ids": torch.from_numpy(x["segment_ids"].astype(np.int64)),
                        "attention_mask": torch.from_numpy(x["padding_mask"].astype(np.int64)),
                        "labels": torch.from_numpy(labels),
                        "next_sentence_label": torch.from_numpy(
                            y["nsp_logits"].astype(np.int64))})

    def step(i):
        optimizer.zero_grad(set_to_none=True)
        loss = model(**tensors[i % len(tensors)]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()
    return step


def time_config(config, batches):
    """Median seconds per step of each implementation, interleaved and rotated."""
    builders = {"kbert": kbert_step, "keras_hub": keras_hub_step, "hf": hf_step}
    steps = {impl: builders[impl](config, batches) for impl in _IMPLS.value}
    counters = dict.fromkeys(steps, 0)

    def run(impl):
        steps[impl](counters[impl])
        counters[impl] += 1

    for impl in steps:  # trace and warm up
        run(impl)
        run(impl)
    times = {impl: [] for impl in steps}
    order = list(steps)
    while (min(map(len, times.values())) < _REPEATS.value * _STEPS.value
           or min(map(sum, times.values())) < _MIN_SECONDS.value):
        for impl in order:
            run(impl)  # untimed: absorbs the previous library's spinning threads
            for _ in range(_STEPS.value):
                start = time.perf_counter()
                run(impl)
                times[impl].append(time.perf_counter() - start)
        order = order[1:] + order[:1]
    return {impl: statistics.median(t) for impl, t in times.items()}, steps


def profile(step, profile_dir):
    """Traces kbert's step; returns [(op type, self ms per step, share)] by self time."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    step(0)
    tf.profiler.experimental.start(profile_dir)
    for i in range(_PROFILE_STEPS.value):
        step(i)
    tf.profiler.experimental.stop()
    newest = max(glob.glob(os.path.join(profile_dir, "plugins", "profile", "*", "*.xplane.pb")),
                 key=os.path.getmtime)
    space = xplane_pb2.XSpace()
    with open(newest, "rb") as f:
        space.ParseFromString(f.read())
    by_type = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            # The executor's op events are named "node name:OpType"; other lines (Python,
            # tf.data, the runtime) would double count.
            if line.name not in ("TensorFlow Ops", "tf_op"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                by_type[name.rsplit(":", 1)[-1]] += event.duration_ps
    if not by_type:  # older/newer trace layouts: every CPU event named "x:Op"
        for plane in space.planes:
            for line in plane.lines:
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if ":" in name and "/" in name:
                        by_type[name.rsplit(":", 1)[-1]] += event.duration_ps
    total = sum(by_type.values()) or 1
    return [(op, round(ps / 1e9 / _PROFILE_STEPS.value, 2), round(ps / total, 3))
            for op, ps in by_type.most_common(20)]


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    batches = load_batches(make_records())
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
               "batch_size": _BATCH.value, "seq_length": _SEQ.value,
               "keras_hub_note": "MLM only (no next-sentence head)", "rows": []}
    for config in _CONFIGS.value:
        seconds, steps = time_config(config, batches)
        row = {"config": config}
        for impl, s in seconds.items():
            row[f"{impl}_ex_per_s"] = round(_BATCH.value / s, 2)
        for impl in seconds:
            if impl != "kbert" and "kbert" in seconds:
                row[f"kbert_over_{impl}"] = round(seconds[impl] / seconds["kbert"], 2)
        if _PROFILE.value and "kbert" in steps:
            row["kbert_profile_top_ops"] = profile(steps["kbert"],
                                                   os.path.join(_PROFILE.value, config))
            print(f"\n{config}: kbert step, self time by op type (ms/step, share):")
            for op, ms, share in row["kbert_profile_top_ops"]:
                print(f"  {op:40s} {ms:9.2f} {share:6.1%}")
        print(json.dumps(row), flush=True)
        results["rows"].append(row)
        if _OUTPUT.value:
            runs.write_json(_OUTPUT.value, results)


if __name__ == "__main__":
    app.run(main)
