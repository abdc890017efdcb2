"""CPU inference in bfloat16 (and int8) vs float32: speed-up and SST-2 dev accuracy, same run.

The MiniLM SST-2 classifier of bench/serving.py (--model, or fine-tuned once into --work_dir)
in each --variants precision:

  float32    the model as trained
  bfloat16   `kbert.with_compute_dtype(model, "bfloat16")`: Keras' mixed_bfloat16 policy,
             float32 weights, bfloat16 matmuls (native with AVX512_BF16 or AMX, emulated
             otherwise: correct, usually slower)
  int8       Keras' dynamic-range int8 (`model.quantize("int8")`: int8 weights, activations
             quantized per call) on a copy, where it runs; otherwise the row says why.
             (2026-11-24, Keras 3.15 / TF 2.21: it fails on kbert's layers, whose fused
             attention and feed-forward matmuls read the float kernels directly; and where it
             runs, e.g. on a plain Dense stack, TensorFlow lowers the int8 matmul to
             BatchMatMulV3 with int32 output, about 3x the CPU time of float32 on this VM, so
             it offers no speed-up here. TFLite's dynamic-range converter needs the token-id
             signature, not raw strings, and `tf.lite.Interpreter` is deprecated.)

Two paths, each interleaved over the variants in a rotating order, --repeats rounds:
`predict` (the dev set pre-tokenized by `kbert.BertPreprocessor`, in --batch_size batches,
`model.predict`), and the exported SavedModel (`kbert.export_saved_model(...,
compute_dtype=...)`, `serving_default` on raw strings: batch --batch_size throughput and
batch-1 p50 over --latency_examples sentences). Reported: sentences/s, speed-up against
float32, dev accuracy and its change in points (target: within 0.3), and labels that differ
from float32's. The CPU's bf16/int8 instruction sets (from /proc/cpuinfo) are printed first.

  python -m bench.cpu_inference --output=/tmp/cpu_inference.json
"""

import os
import re
import statistics
import time

import numpy as np
from absl import app
from absl import flags

from bench import runs
from bench import sst2_model

_SERVED = sst2_model.define_flags(latency_examples=200)
_VARIANTS = flags.DEFINE_list("variants", ["float32", "bfloat16", "int8"], "Precisions.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Truncation length.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Interleaved rounds over the dev set.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")

CPU_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_vnni", "amx_int8", "avx512f")


def cpu_flags():
    """The bf16/int8-relevant flags this CPU reports (Linux /proc/cpuinfo; {} elsewhere)."""
    from kbert import cpu_features

    reported = cpu_features.cpu_flags()
    if reported is None:
        return {}
    return {flag: flag in reported for flag in CPU_FLAGS}


def variant_models(model):
    """{variant: model or the reason it cannot run here}."""
    import keras

    from kbert.models import precision

    models = {}
    for variant in _VARIANTS.value:
        if variant in ("float32", "bfloat16"):
            models[variant] = precision.with_compute_dtype(model, variant)
            continue
        copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
        copy.set_weights(model.get_weights())
        try:
            copy.quantize(variant)
            probe = {k: np.ones((1, 4), "int32") for k in ("token_ids", "padding_mask")}
            copy.predict_on_batch({**probe, "segment_ids": np.zeros((1, 4), "int32")})
            models[variant] = copy
        except Exception as e:  # noqa: BLE001  (any failure means: not available here)
            # Keras wraps the op error: keep its lines, without the terminal colour codes.
            lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
                     for line in str(e).splitlines() if line.strip()]
            models[variant] = f"unavailable: {type(e).__name__}: {' / '.join(lines[:2])}"
    return models


def rotate(order):
    return order[1:] + order[:1]


def time_predict(models, batches):
    """{variant: (median seconds per dev pass, label ids)}; passes interleaved."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature={
            k: tf.TensorSpec([None, None], tf.int32) for k in batches[0]})
    times = {v: [] for v in models}
    labels = {}
    order = list(models)
    for v in order:  # trace
        labels[v] = np.argmax(models[v].predict(dataset, verbose=0), axis=-1)
    for _ in range(_REPEATS.value):
        for v in order:
            start = time.perf_counter()
            models[v].predict(dataset, verbose=0)
            times[v].append(time.perf_counter() - start)
        order = rotate(order)
    return {v: (statistics.median(times[v]), labels[v]) for v in models}


def time_saved_models(servers, texts):
    """{variant: (median seconds per dev pass, label ids, batch-1 p50 seconds)}."""
    import tensorflow as tf

    def call(v, batch):
        return servers[v](text=tf.constant(batch))["label_id"].numpy()

    size = _SERVED.batch_size.value
    batches = [texts[i:i + size] for i in range(0, len(texts), size)]
    labels = {v: np.concatenate([call(v, b) for b in batches]) for v in servers}  # + trace
    passes = {v: [] for v in servers}
    order = list(servers)
    for _ in range(_REPEATS.value):
        for v in order:
            start = time.perf_counter()
            for b in batches:
                call(v, b)
            passes[v].append(time.perf_counter() - start)
        order = rotate(order)
    singles = {v: [] for v in servers}
    for text in texts[:_SERVED.latency_examples.value]:
        for v in order:
            call(v, [text])
            start = time.perf_counter()
            call(v, [text])
            singles[v].append(time.perf_counter() - start)
        order = rotate(order)
    return {v: (statistics.median(passes[v]), labels[v], statistics.median(singles[v]))
            for v in servers}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    import kbert

    flags_here = cpu_flags()
    print("CPU:", ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in flags_here.items()))
    if flags_here and not (flags_here["avx512_bf16"] or flags_here["amx_bf16"]):
        print("This CPU lacks AVX512_BF16 and AMX: bfloat16 matmuls are emulated (expect a "
              "slow-down, not a speed-up); the option still works.")
    model_path, vocab_file, texts, gold = sst2_model.prepare(_SERVED)
    size = _SERVED.batch_size.value
    model = keras.saving.load_model(model_path)
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "cpu_flags": flags_here,
               "model": model_path, "dev_examples": len(texts), "batch_size": size, "rows": []}
    models = variant_models(model)
    runnable = {v: m for v, m in models.items() if not isinstance(m, str)}
    preprocessor = kbert.BertPreprocessor(vocab_file, max_seq_length=_MAX_SEQ.value,
                                          pad_to_max_length=False)
    batches = [{k: v.numpy() for k, v in preprocessor(tf.constant(texts[i:i + size])).items()}
               for i in range(0, len(texts), size)]
    predicted = time_predict(runnable, batches)
    servers = {}
    for v in runnable:
        if v in ("float32", "bfloat16"):  # the export's compute_dtype option
            path = kbert.export_saved_model(
                model, os.path.join(_SERVED.work_dir.value, f"saved_model_{v}"), vocab_file,
                max_seq_length=_MAX_SEQ.value, compute_dtype=v, overwrite=True)
            servers[v] = tf.saved_model.load(path).signatures["serving_default"]
    served = time_saved_models(servers, texts)
    for v in _VARIANTS.value:
        if v not in runnable:
            results["rows"].append({"variant": v, "status": models[v]})
            continue
        timed = [("predict", predicted[v])] + ([("saved_model", served[v])] if v in served
                                                else [])
        for path, (seconds, labels, *p50) in timed:
            row = {"variant": v, "path": path,
                   "sentences_per_s": round(len(texts) / seconds, 1),
                   "dev_accuracy": round(100 * float(np.mean(labels == gold)), 2)}
            if p50:
                row["batch1_p50_ms"] = round(1000 * p50[0], 2)
            base = predicted if path == "predict" else served
            if "float32" in base:
                row["speedup_vs_float32"] = round(base["float32"][0] / seconds, 2)
                row["accuracy_change_points"] = round(
                    row["dev_accuracy"] - 100 * float(np.mean(base["float32"][1] == gold)), 2)
                row["labels_differing_from_float32"] = int(np.sum(labels != base["float32"][1]))
            results["rows"].append(row)
    if _OUTPUT.value:
        runs.write_json(_OUTPUT.value, results)
    print("\n| variant | path | sentences/s | vs float32 | batch-1 p50 ms | dev acc | "
          "change (points) | labels != fp32 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results["rows"]:
        if "status" in r:
            print(f"| {r['variant']} | - | {r['status']} | | | | | |")
            continue
        print(f"| {r['variant']} | {r['path']} | {r['sentences_per_s']} | "
              f"{r.get('speedup_vs_float32', '')} | {r.get('batch1_p50_ms', '')} | "
              f"{r['dev_accuracy']} | {r.get('accuracy_change_points', '')} | "
              f"{r.get('labels_differing_from_float32', '')} |")


if __name__ == "__main__":
    app.run(main)
