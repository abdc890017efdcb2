"""The by-article split of SQuAD v1.1 dev that bench/squad.py and its peer train and score on.

Only `dev-v1.1.json` is available, so it is split by article, deterministically: articles whose
0-based index in the file is `every - 1` mod `every` are held out, the others trained on.
"""

import json
import os
import types

from absl import flags

from bench import runs

# The flags this module declares are the caller's (`--help` lists them with its own).
flags.disclaim_key_flags()


def split(dev_file, every):
    """(train, held_out) SQuAD datasets (dicts with "version" and "data") of `dev_file`."""
    with open(dev_file, encoding="utf-8") as f:
        dataset = json.load(f)
    articles = dataset["data"]
    held_out = [a for i, a in enumerate(articles) if i % every == every - 1]
    train = [a for i, a in enumerate(articles) if i % every != every - 1]
    return ({"version": dataset["version"], "data": train},
            {"version": dataset["version"], "data": held_out})


def count(dataset):
    """Questions in a SQuAD dataset."""
    return sum(len(p["qas"]) for a in dataset["data"] for p in a["paragraphs"])


def define_split_flags():
    """Declares --dev_file (default: SQuAD v1.1 dev beside this repository) and --every;
    returns their holders by name."""
    return types.SimpleNamespace(
        dev_file=flags.DEFINE_string(
            "dev_file", os.path.join(runs.SHARED_DATA, "squad", "v1.1", "dev.json"),
            "SQuAD v1.1 (default: beside this repository)."),
        every=flags.DEFINE_integer(
            "every", 5, "Hold out articles with index %% every == every-1.", lower_bound=1))

