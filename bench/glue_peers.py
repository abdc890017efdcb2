"""What the two GLUE peers share: keras-hub's `bench/glue_peer.py` and the Trainer's
`bench/hf_peer.py` take the same flags (`define_flags`), train on kbert's seeded subset of the
task (`training_data`) and score its dev sets alike (`score_dev`), so their JSON compares.
"""

import time
import types

from absl import app
from absl import flags

from bench import budget
from kbert.data import glue
from kbert.tasks import glue_metrics

# The flags this module declares are the caller's (`--help` lists them with its own).
flags.disclaim_key_flags()


def define_flags():
    """Declares --task_name, --data_dir, --hf_dir, --output and the budget (`bench.budget`,
    with the defaults of `tools/run_classifier.py`); returns their holders by name, the
    budget's under "budget"."""
    return types.SimpleNamespace(
        task_name=flags.DEFINE_string("task_name", "MRPC", "GLUE task."),
        data_dir=flags.DEFINE_string("data_dir", None, "GLUE task directory.", required=True),
        hf_dir=flags.DEFINE_string("hf_dir", None, "Hugging Face BERT directory.",
                                   required=True),
        output=flags.DEFINE_string("output", None, "Write the results JSON here."),
        budget=budget.define_budget_flags(
            max_seq_length=128, train_batch_size=32, eval_batch_size=32, learning_rate=5e-5,
            num_train_epochs=3, warmup_proportion=0.1, max_train_examples=None, seed=12345))


def training_data(peer):
    """(task spec, training examples): kbert's reader and seeded --max_train_examples subset
    of the task `peer` (`define_flags`'s holders) names; classification tasks only."""
    spec = glue.get_task(peer.task_name.value)
    if spec.num_classes == 1:
        raise app.UsageError("the peer covers classification tasks only")
    train = glue.read_glue(peer.data_dir.value, spec, "train", errors="warn").sample(
        peer.budget.max_train_examples.value, seed=peer.budget.seed.value)
    return spec, train


def score_dev(peer, spec, logits):
    """{dev split: the task's metrics and examples/s} of `logits`: fn(examples) -> float32
    [examples, classes], timed."""
    results = {}
    for split, _ in spec.dev_files:
        dev = glue.read_glue(peer.data_dir.value, spec, split)
        start = time.perf_counter()
        scores = glue_metrics.compute(spec.metric, dev.label, logits(dev))
        scores["examples_per_second"] = round(len(dev) / (time.perf_counter() - start), 2)
        results[split] = scores
    return results
