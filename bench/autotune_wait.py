"""tf.data's autotuning wait: epoch and `fit` times with kbert's datasets, autotuning on vs off.

Keras ends each epoch after the steps it counted, leaving that epoch's tf.data iterator
unfinished, and destroying an unfinished iterator waits for the autotuning thread's next
wake-up. kbert's recipe datasets therefore turn autotuning off
(`kbert.data.pipeline.prefetched`). This fits the real MiniLM classifier on the SST-2
pipeline of the GLUE recipe (a seeded subset, length-grouped batches, sparse rows and
bfloat16 as the fast recipe) for a few epochs, alternating the two settings on the same
model, and prints each epoch's seconds and the whole `fit`'s.

  python -m bench.autotune_wait --examples=1600 --epochs=3 --rounds=2
"""

import os
import time

from absl import app
from absl import flags

from bench import runs

_GLUE = flags.DEFINE_string("glue_dir", os.path.join(runs.SHARED_DATA, "glue"),
                            "Directory with SST-2/.")
_WORK = flags.DEFINE_string("work_dir", "/tmp/kbert_bench_autotune", "Scratch directory.")
_EXAMPLES = flags.DEFINE_integer("examples", 1600, "Seeded SST-2 training subset.")
_EPOCHS = flags.DEFINE_integer("epochs", 3, "Epochs per fit.")
_ROUNDS = flags.DEFINE_integer("rounds", 2, "Fits per setting, alternating.")
_SEED = flags.DEFINE_integer("seed", 12345, "Subset, shuffle and head seed.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    checkpoint = runs.google_checkpoint(_WORK.value)
    import keras
    import tensorflow as tf

    from kbert.data import pipeline
    from kbert.models.classifier import BertClassifier
    from kbert.tasks import fine_tuning
    from kbert.tasks import glue
    from kbert.tokenization import BertPreprocessor

    keras.config.set_dtype_policy("mixed_bfloat16")
    config = glue.GlueConfig(
        task_name="SST-2", data_dir=os.path.join(_GLUE.value, "SST-2"), output_dir=_WORK.value,
        init_checkpoint=os.path.join(checkpoint, "bert_model.ckpt"), max_seq_length=64,
        do_train=True, do_eval=False)
    spec = glue.task_spec(config)
    examples = glue.read_split(config, spec, "train").sample(_EXAMPLES.value, seed=_SEED.value)
    preprocessor = BertPreprocessor(os.path.join(checkpoint, "vocab.txt"), do_lower_case=True,
                                    max_seq_length=64, pad_to_max_length=False)
    tokenized = pipeline.tokenize(examples, preprocessor)
    keras.utils.set_random_seed(_SEED.value)
    model = BertClassifier.from_google_checkpoint(
        os.path.join(checkpoint, "bert_model.ckpt"), spec.num_classes)
    fine_tuning.compile_model(model, 10 ** 6, learning_rate=1e-4, warmup_proportion=0.0,
                              embedding_updates="sparse")
    autotuned = tf.data.Options()
    autotuned.autotune.enabled = True

    epoch_seconds = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: epoch_seconds.append(time.perf_counter()),
        on_epoch_end=lambda epoch, logs: epoch_seconds.append(
            time.perf_counter() - epoch_seconds.pop()))
    dataset, steps = pipeline.training_dataset(tokenized, examples.label, 32, seed=_SEED.value)
    model.fit(dataset, epochs=1, verbose=0)  # trace and warm up
    print(f"{_EXAMPLES.value} examples, {steps} steps per epoch, {_EPOCHS.value} epochs")
    print("| tf.data autotuning | round | epoch seconds | fit seconds | fit − epochs |")
    print("|---|---:|---|---:|---:|")
    for round_ in range(_ROUNDS.value):
        for setting in ("on (TensorFlow's default)", "off (kbert)"):
            dataset, _ = pipeline.training_dataset(tokenized, examples.label, 32,
                                                   seed=_SEED.value)
            if setting.startswith("on"):
                dataset = dataset.with_options(autotuned)
            epoch_seconds.clear()
            start = time.perf_counter()
            model.fit(dataset, epochs=_EPOCHS.value, verbose=0, callbacks=[timer])
            seconds = time.perf_counter() - start
            print(f"| {setting} | {round_ + 1} | {', '.join(f'{t:.2f}' for t in epoch_seconds)} "
                  f"| {seconds:.2f} | {seconds - sum(epoch_seconds):.2f} |", flush=True)


if __name__ == "__main__":
    app.run(main)
