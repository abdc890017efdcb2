"""The MiniLM SST-2 classifier that bench/serving.py and bench/cpu_inference.py serve.

`define_flags` declares what both take to get it; `prepare` returns a run_classifier.py
`model.keras` (the one given, or one fine-tuned once, cached in the work directory, from MiniLM
on a seeded subset of SST-2's train set, so that the labels the benches compare mean
something), its vocabulary and the dev set.
"""

import os
import types

import numpy as np
from absl import flags

from bench import runs

# The flags this module declares are the caller's (`--help` lists them with its own).
flags.disclaim_key_flags()


def define_flags(latency_examples):
    """Declares --model, --vocab_file, --glue_dir, --work_dir, --train_examples, --batch_size,
    --latency_examples and --max_dev_examples; returns their holders by name."""
    return types.SimpleNamespace(
        model=flags.DEFINE_string(
            "model", None, "A run_classifier.py model.keras for SST-2; by default one is "
            "fine-tuned from MiniLM into --work_dir."),
        vocab_file=flags.DEFINE_string("vocab_file", None,
                                       "Defaults to vocab.txt beside --model."),
        glue_dir=flags.DEFINE_string("glue_dir", os.path.join(runs.SHARED_DATA, "glue"),
                                     "Directory with SST-2/{train,dev}.tsv."),
        work_dir=flags.DEFINE_string(
            "work_dir", "/tmp/kbert_bench_serving", "Scratch directory (shared by "
            "bench/serving.py and bench/cpu_inference.py: the fine-tuned model is reused)."),
        train_examples=flags.DEFINE_integer(
            "train_examples", 8000, "Fine-tuning budget without --model: SST-2 examples.",
            lower_bound=1),
        batch_size=flags.DEFINE_integer("batch_size", 32, "Throughput batch size.",
                                        lower_bound=1),
        latency_examples=flags.DEFINE_integer(
            "latency_examples", latency_examples, "Dev sentences sent one at a time.",
            lower_bound=0),
        max_dev_examples=flags.DEFINE_integer(
            "max_dev_examples", None, "Use only this many dev sentences.", lower_bound=1))


def prepare(holders):
    """(model.keras path, its vocab.txt, dev sentences, gold label ids) of `define_flags`'s
    flags; fine-tunes the model first where --model is not given."""
    os.makedirs(holders.work_dir.value, exist_ok=True)
    model_path = holders.model.value or fine_tuned_model(
        holders.work_dir.value, holders.glue_dir.value, holders.train_examples.value)
    vocab_file = holders.vocab_file.value or os.path.join(
        os.path.dirname(os.path.abspath(model_path)), "vocab.txt")
    return (model_path, vocab_file,
            *read_dev(holders.glue_dir.value, holders.max_dev_examples.value))


def fine_tuned_model(work_dir, glue_dir, train_examples):
    """work_dir/sst2_N/model.keras, fine-tuned (1 epoch, seq 64) if missing."""
    out = os.path.join(work_dir, f"sst2_{train_examples}")
    if not os.path.exists(os.path.join(out, "model.keras")):
        runs.run(["tools/run_classifier.py", "--task_name=SST-2",
                  f"--data_dir={os.path.join(glue_dir, 'SST-2')}",
                  f"--init_checkpoint={runs.google_checkpoint(work_dir)}", f"--output_dir={out}",
                  "--do_train", "--max_seq_length=64", "--train_batch_size=32",
                  "--learning_rate=1e-4", "--num_train_epochs=1",
                  f"--max_train_examples={train_examples}"])
    return os.path.join(out, "model.keras")


def read_dev(glue_dir, max_examples=None):
    """SST-2 dev sentences and gold label ids."""
    from kbert.data import glue

    dev = glue.read_glue(os.path.join(glue_dir, "SST-2"), glue.get_task("SST-2"), "dev")
    texts, labels = list(dev.text_a), np.asarray(dev.label)
    return texts[:max_examples], labels[:max_examples]
