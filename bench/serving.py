"""Serving raw text: kbert's SavedModel vs Hugging Face's pipeline vs keras-hub, same weights.

One fine-tuned MiniLM SST-2 classifier (by default fine-tuned here with tools/run_classifier.py
on a seeded --train_examples subset, so the labels mean something; or --model, a
run_classifier.py `model.keras`) is served three ways, each from raw strings to labels,
tokenization included in the time:

  kbert       `kbert.export_saved_model` (tokenization in the graph), reloaded with
              `tf.saved_model.load` and called through its `serving_default` signature, as
              TensorFlow Serving calls it
  hf          `transformers.pipeline("text-classification")` on PyTorch CPU: the encoder
              converted with `kbert.convert_google_to_huggingface`, the classifier head copied
              into `BertForSequenceClassification` here (weight transposed), the fast tokenizer
  keras_hub   `keras_hub.models.BertTextClassifier` with its preprocessor, from the same
              Hugging Face directory, head copied, called with `predict_on_batch` on strings
              (`predict` adds a tf.data pipeline per call, slower still at batch 1)

Batch 1: each of the first --latency_examples dev sentences is sent alone to every
implementation in a rotating order (an untimed call first, so one library's spinning worker
threads are not charged to the next); p50 and p99 latency. Batch --batch_size: the dev set in
batches, interleaved the same way; sentences/s. Labels of every implementation on the whole
dev set are compared with kbert's (the count of disagreements) and with the gold labels.
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

from bench import sst2_model

_MODEL = flags.DEFINE_string("model", None, "A run_classifier.py model.keras for SST-2; by "
                             "default one is fine-tuned from MiniLM into --work_dir.")
_VOCAB = flags.DEFINE_string("vocab_file", None, "Defaults to vocab.txt beside --model.")
_GLUE = flags.DEFINE_string("glue_dir", sst2_model.DEFAULT_GLUE,
                            "Directory with SST-2/{train,dev}.tsv.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_serving", "Scratch directory.")
_TRAIN_EXAMPLES = flags.DEFINE_integer("train_examples", 8000,
                                       "Fine-tuning budget without --model: SST-2 examples.")
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Serving truncation length (all).")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Throughput batch size.")
_LATENCY = flags.DEFINE_integer("latency_examples", 300, "Dev sentences sent one at a time.")
_MAX_DEV = flags.DEFINE_integer("max_dev_examples", None, "Use only this many dev sentences.")
_IMPLS = flags.DEFINE_list("impls", ["kbert", "hf", "keras_hub"], "Implementations to time.")
_OUTPUT = flags.DEFINE_string("output", None, "Write results as JSON here.")


def build_servers(model_path, vocab_file):
    """{impl: fn(list of str) -> int label ids}, each from the same classifier weights."""
    import keras

    import kbert

    model = keras.saving.load_model(model_path)
    servers = {}
    # The encoder as a Google checkpoint, then a Hugging Face directory: the one conversion
    # path kbert ships; the classifier head (Google's output_weights/output_bias) is copied
    # below for each peer, as no converter writes a sequence-classification head.
    google = os.path.join(_WORK.value, "served_google")
    kbert.save_google_checkpoint(model.encoder, os.path.join(google, "bert_model.ckpt"),
                                 vocab_file)
    hf_dir = os.path.join(_WORK.value, "served_hf")
    kbert.convert_google_to_huggingface(google, hf_dir)
    # keras-hub's Hugging Face loader reads the casing from here (MiniLM is uncased).
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                   "model_max_length": _MAX_SEQ.value}, f)
    kernel = model.output_dense.kernel.numpy()  # [hidden, classes]
    bias = model.output_dense.bias.numpy()
    if "kbert" in _IMPLS.value:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

        export_dir = kbert.export_saved_model(
            model, os.path.join(_WORK.value, "saved_model"), vocab_file,
            max_seq_length=_MAX_SEQ.value, overwrite=True)
        serve = tf.saved_model.load(export_dir).signatures["serving_default"]
        servers["kbert"] = lambda texts: serve(text=tf.constant(texts))["label_id"].numpy()
    if "hf" in _IMPLS.value:
        import torch
        import transformers

        hf_model = transformers.BertForSequenceClassification.from_pretrained(
            hf_dir, num_labels=kernel.shape[1])
        with torch.no_grad():
            hf_model.classifier.weight.copy_(torch.from_numpy(kernel.T.copy()))
            hf_model.classifier.bias.copy_(torch.from_numpy(bias))
        hf_model.eval()
        tokenizer = transformers.BertTokenizerFast(
            os.path.join(hf_dir, "vocab.txt"), do_lower_case=True,
            model_max_length=_MAX_SEQ.value)
        pipe = transformers.pipeline("text-classification", model=hf_model,
                                     tokenizer=tokenizer, device="cpu")
        label2id = hf_model.config.label2id

        def serve_hf(texts):
            out = pipe(texts, batch_size=len(texts), truncation=True)
            return np.array([label2id[o["label"]] for o in out])
        servers["hf"] = serve_hf
    if "keras_hub" in _IMPLS.value:
        import keras_hub
        import tensorflow as tf

        backbone = keras_hub.models.BertBackbone.from_preset(hf_dir)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
            hf_dir, sequence_length=_MAX_SEQ.value)
        classifier = keras_hub.models.BertTextClassifier(
            backbone, num_classes=kernel.shape[1], preprocessor=preprocessor)
        classifier.output_dense.set_weights([kernel, bias])
        servers["keras_hub"] = lambda texts: np.argmax(
            classifier.predict_on_batch(tf.constant(texts)), axis=-1)
    return servers


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


def write_results(results):
    if _OUTPUT.value:
        with open(_OUTPUT.value + ".tmp", "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        os.replace(_OUTPUT.value + ".tmp", _OUTPUT.value)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    os.makedirs(_WORK.value, exist_ok=True)
    model_path = sst2_model.fine_tuned_model(_WORK.value, _GLUE.value, _TRAIN_EXAMPLES.value,
                                             _MODEL.value)
    vocab_file = _VOCAB.value or sst2_model.vocab_beside(model_path)
    texts, gold = sst2_model.read_dev(_GLUE.value, _MAX_DEV.value)
    servers = build_servers(model_path, vocab_file)
    for serve in servers.values():  # trace, build, warm up: both batch shapes
        serve(texts[:1])
        serve(texts[:_BATCH.value])
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "model": model_path,
               "dev_examples": len(texts), "batch_size": _BATCH.value}
    batches = [texts[i:i + _BATCH.value] for i in range(0, len(texts), _BATCH.value)]
    seconds, labels = interleaved(servers, batches)
    for impl in servers:
        results[f"{impl}_sentences_per_s"] = round(len(texts) / sum(seconds[impl]), 1)
        results[f"{impl}_dev_accuracy"] = round(float(np.mean(labels[impl] == gold)), 4)
        results[f"{impl}_disagreements_with_kbert"] = int(np.sum(labels[impl] != labels["kbert"])
                                                          ) if "kbert" in labels else None
    singles = [[t] for t in texts[:_LATENCY.value]]
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
    print(json.dumps(results, indent=1))
    print(f"\n| impl | batch-{_BATCH.value} sentences/s | batch-1 p50 ms | p99 ms | "
          "dev accuracy | labels != kbert |")
    print("|---|---:|---:|---:|---:|---:|")
    for impl in servers:
        print(f"| {impl} | {results[f'{impl}_sentences_per_s']} | {results[f'{impl}_p50_ms']} | "
              f"{results[f'{impl}_p99_ms']} | {results[f'{impl}_dev_accuracy']} | "
              f"{results[f'{impl}_disagreements_with_kbert']} |")
    write_results(results)


if __name__ == "__main__":
    app.run(main)
