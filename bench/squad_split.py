"""The by-article split of SQuAD v1.1 dev that bench/squad.py and its peer train and score on.

Only `dev-v1.1.json` is available, so it is split by article, deterministically: articles whose
0-based index in the file is `every - 1` mod `every` are held out, the others trained on.
"""

import json


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
