"""Serving raw text: kbert's SavedModel vs Hugging Face's pipeline vs keras-hub, same weights.

One fine-tuned MiniLM SST-2 classifier (by default fine-tuned here with tools/run_classifier.py
on a seeded --train_examples subset, so the labels mean something; or --model, a
run_classifier.py `model.keras`) is served three ways, each from raw strings to labels,
tokenization included in the time, all in --precision (`bench.budget`):

  kbert       `kbert.export_saved_model(..., compute_dtype=--precision)` (tokenization in the
              graph; bfloat16: Keras' mixed_bfloat16, float32 weights), reloaded with
              `tf.saved_model.load` and called through its `serving_default` signature, as
              TensorFlow Serving calls it
  hf          `transformers.pipeline("text-classification")` on PyTorch CPU: the encoder
              converted with `kbert.convert_google_to_huggingface`, loaded into
              `BertForSequenceClassification` in the torch dtype of --precision (what
              `pipeline(..., dtype=...)` does with a directory), the classifier head copied
              here (weight transposed), the fast tokenizer
  keras_hub   `keras_hub.models.BertTextClassifier` with its preprocessor, from the same
              Hugging Face directory in the Keras dtype policy of --precision
              (mixed_bfloat16), head copied, called with `predict_on_batch` on strings
              (`predict` adds a tf.data pipeline per call, slower still at batch 1)

Batch 1: each of the first --latency_examples dev sentences is sent alone to every
implementation in a rotating order (an untimed call first, so one library's spinning worker
threads are not charged to the next); p50 and p99 latency. Batch --batch_size: the dev set in
batches, interleaved the same way; sentences/s. Labels of every implementation on the whole
dev set are compared with kbert's (the count of disagreements) and with the gold labels. The
JSON and the table name each side's precision.
Targets (issue 24): kbert >= 1.5x both peers' batch-32 throughput and a lower batch-1 p50.

  python -m bench.serving --output=/tmp/serving.json
  python -m bench.serving --model=/tmp/sst2/model.keras
Needs the bench extra: pip install -e .[bench] (torch, transformers).
"""

import json
import os
import statistics
import time

import numpy as np
from absl import app
from absl import flags

from bench import budget
from bench import runs
from bench import sst2_model

_SERVED = sst2_model.define_flags(latency_examples=300)
_BUDGET = budget.define_budget_flags(max_seq_length=128)
_IMPLS = flags.DEFINE_list("impls", ["kbert", "hf", "keras_hub"], "Implementations to time.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def build_servers(model_path, vocab_file):
    """({impl: fn(list of str) -> int label ids}, {impl: the precision it serves in}), each
    from the same classifier weights."""
    import keras

    import kbert

    precision, max_seq = _BUDGET.precision.value, _BUDGET.max_seq_length.value
    model = keras.saving.load_model(model_path)
    servers, precisions = {}, {}
    # The encoder as a Google checkpoint, then a Hugging Face directory: the one conversion
    # path kbert ships; the classifier head (Google's output_weights/output_bias) is copied
    # below for each peer, as no converter writes a sequence-classification head.
    work = _SERVED.work_dir.value
    google = os.path.join(work, "served_google")
    kbert.save_google_checkpoint(model.encoder, os.path.join(google, "bert_model.ckpt"),
                                 vocab_file)
    hf_dir = os.path.join(work, "served_hf")
    kbert.convert_google_to_huggingface(google, hf_dir)
    # keras-hub's Hugging Face loader reads the casing from here (MiniLM is uncased).
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                   "model_max_length": max_seq}, f)
    kernel = model.output_dense.kernel.numpy()  # [hidden, classes]
    bias = model.output_dense.bias.numpy()
    if "kbert" in _IMPLS.value:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

        export_dir = kbert.export_saved_model(
            model, os.path.join(work, "saved_model"), vocab_file, max_seq_length=max_seq,
            compute_dtype=precision, overwrite=True)
        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        servers["kbert"] = lambda texts: serve(text=tf.constant(texts))["label_id"].numpy()
        precisions["kbert"] = f"export_saved_model(compute_dtype={precision!r})"
    if "hf" in _IMPLS.value:
        import torch
        import transformers

        # A pipeline ignores `dtype` for a model it is handed, so the model is loaded in it.
        hf_model = transformers.BertForSequenceClassification.from_pretrained(
            hf_dir, num_labels=kernel.shape[1], dtype=getattr(torch, precision))
        with torch.no_grad():
            hf_model.classifier.weight.copy_(torch.from_numpy(kernel.T.copy()))
            hf_model.classifier.bias.copy_(torch.from_numpy(bias))
        hf_model.eval()
        tokenizer = transformers.BertTokenizerFast(
            os.path.join(hf_dir, "vocab.txt"), do_lower_case=True,
            model_max_length=max_seq)
        pipe = transformers.pipeline("text-classification", model=hf_model,
                                     tokenizer=tokenizer, device="cpu")
        label2id = hf_model.config.label2id

        def serve_hf(texts):
            out = pipe(texts, batch_size=len(texts), truncation=True)
            return np.array([label2id[o["label"]] for o in out])
        servers["hf"] = serve_hf
        precisions["hf"] = f"model in torch.{precision}"
    if "keras_hub" in _IMPLS.value:
        import keras_hub
        import tensorflow as tf

        policy = budget.MIXED_PRECISION[precision]
        backbone = keras_hub.models.BertBackbone.from_preset(hf_dir, dtype=policy)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
            hf_dir, sequence_length=max_seq)
        classifier = keras_hub.models.BertTextClassifier(
            backbone, num_classes=kernel.shape[1], preprocessor=preprocessor)
        classifier.output_dense.set_weights([kernel, bias])
        servers["keras_hub"] = lambda texts: np.argmax(
            classifier.predict_on_batch(tf.constant(texts)), axis=-1)
        precisions["keras_hub"] = f"Keras dtype policy {policy}"
    return servers, precisions


def interleaved(servers, batches):
    """Runs every batch through every server in a rotating order, each timed call after an
    untimed one; returns ({impl: [seconds]}, {impl: label ids, concatenated})."""
    seconds = {impl: [] for impl in servers}
    labels = {impl: [] for impl in servers}
    order = list(servers)
    for batch in batches:
        for impl in order:
            servers[impl](batch)  # absorbs the previous library's spinning threads
            start = time.perf_counter()
            ids = servers[impl](batch)
            seconds[impl].append(time.perf_counter() - start)
            labels[impl].append(np.asarray(ids).reshape(-1))
        order = order[1:] + order[:1]
    return seconds, {impl: np.concatenate(v) for impl, v in labels.items()}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    model_path, vocab_file, texts, gold = sst2_model.prepare(_SERVED)
    batch_size = _SERVED.batch_size.value
    servers, precisions = build_servers(model_path, vocab_file)
    for serve in servers.values():  # trace, build, warm up: both batch shapes
        serve(texts[:1])
        serve(texts[:batch_size])
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "model": model_path,
               "dev_examples": len(texts), "batch_size": batch_size,
               "precision": _BUDGET.precision.value,
               **{f"{impl}_precision": setting for impl, setting in precisions.items()}}
    batches = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
    seconds, labels = interleaved(servers, batches)
    for impl in servers:
        results[f"{impl}_sentences_per_s"] = round(len(texts) / sum(seconds[impl]), 1)
        results[f"{impl}_dev_accuracy"] = round(float(np.mean(labels[impl] == gold)), 4)
        results[f"{impl}_disagreements_with_kbert"] = int(np.sum(labels[impl] != labels["kbert"])
                                                          ) if "kbert" in labels else None
    singles = [[t] for t in texts[:_SERVED.latency_examples.value]]
    latency, _ = interleaved(servers, singles)
    for impl, values in latency.items():
        results[f"{impl}_p50_ms"] = round(1000 * statistics.median(values), 2)
        results[f"{impl}_p99_ms"] = round(1000 * float(np.percentile(values, 99)), 2)
    if "kbert" in servers:
        for impl in servers:
            if impl != "kbert":
                results[f"kbert_over_{impl}_throughput"] = round(
                    results["kbert_sentences_per_s"] / results[f"{impl}_sentences_per_s"], 2)
                results[f"{impl}_over_kbert_p50"] = round(
                    results[f"{impl}_p50_ms"] / results["kbert_p50_ms"], 2)
    runs.report(results, _OUTPUT.value, indent=1)
    print(f"\n| impl | precision | batch-{batch_size} sentences/s | batch-1 p50 ms | p99 ms | "
          "dev accuracy | labels != kbert |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for impl in servers:
        print(f"| {impl} | {precisions[impl]} | {results[f'{impl}_sentences_per_s']} | "
              f"{results[f'{impl}_p50_ms']} | {results[f'{impl}_p99_ms']} | "
              f"{results[f'{impl}_dev_accuracy']} | "
              f"{results[f'{impl}_disagreements_with_kbert']} |")


if __name__ == "__main__":
    app.run(main)
