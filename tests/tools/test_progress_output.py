"""Every training run shows steps, steps/s and ETA while it runs (`kbert.tasks.progress`)."""

import functools
import os
import re

from absl import logging

from tests.tools.runner import run_tool

MRPC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "glue", "MRPC")
run = functools.partial(run_tool, "run_classifier.py")
# "epoch 1/2 step 1/2 (50%) 3.52 steps/s 14.1 examples/s accuracy 0.5 loss 0.6931 ETA 0s
# (epoch), 1s (run)"
STEP_LINE = re.compile(r"epoch (\d)/2 step (\d)/2 \(\d+%\) [\d.,]+ steps/s .*\bloss [\d.e+-]+ "
                       r".*ETA \w+ \(epoch\), \w+ \(run\)$", re.MULTILINE)


def test_training_shows_steps_rate_and_eta(tiny_google_dir, tmp_path):
    # As a SavedModel saved earlier in this process leaves absl: its verbosity set (to
    # WARNING) rather than at its default; the run must still show INFO, as a fresh one.
    logging.set_verbosity(logging.WARNING)
    # 6 examples in batches of 4: 2 steps an epoch; the runner gives absl's lines on stderr.
    result = run("--task_name=MRPC", f"--data_dir={MRPC}", f"--init_checkpoint={tiny_google_dir}",
                 f"--output_dir={tmp_path}", "--do_train", "--max_seq_length=16",
                 "--train_batch_size=4", "--num_train_epochs=2", "--max_train_examples=6",
                 "--log_every_n_steps=1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert [m.groups() for m in STEP_LINE.finditer(result.stderr)] == [
        ("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")], result.stderr[-3000:]
    assert re.search(r"epoch 1/2 done: 2 steps in \w+, [\d.,]+ steps/s.* loss .*; ETA \w+ "
                     r"\(run\)$", result.stderr, re.MULTILINE), result.stderr[-3000:]
    assert "epoch 2/2 done: 2 steps in " in result.stderr
