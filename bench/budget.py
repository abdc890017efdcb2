"""The budget of a peer comparison, declared once for the runners and for their peers.

A runner (`bench/finetune.py`, `ner.py`, `squad.py`, `multi_label.py`) and each peer it starts
(the Trainer's `bench/hf_peer.py`, `hf_ner_peer.py`, `hf_squad_peer.py`,
`hf_multi_label_peer.py`; keras-hub's `bench/glue_peer.py`) declare the training budget with
`define_budget_flags`, under the flag names of kbert's tools and with their own defaults, so a
runner hands one budget to every side (`arguments`). `--precision` sets the arithmetic of every
side: kbert's `--mixed_precision` and the Keras dtype policy of a keras-hub peer (one name for
both, `MIXED_PRECISION`), the Trainer's `bf16`/`fp16` (`bench.hf_common`), the dtype of a
Hugging Face pipeline (`bench/serving.py`).
"""

import re
import types

from absl import flags

# The flags this module declares are the caller's (`--help` lists them with its own).
flags.disclaim_key_flags()

PRECISIONS = ("float32", "bfloat16", "float16")
# --precision -> kbert's --mixed_precision, which is also the name of the Keras dtype policy.
MIXED_PRECISION = {"float32": "float32", "bfloat16": "mixed_bfloat16",
                   "float16": "mixed_float16"}

_INTEGER = flags.DEFINE_integer
_FLOAT = flags.DEFINE_float
# name: (definer, help, lower bound); num_train_epochs's definer follows its default.
_FLAGS = {
    "max_seq_length": (_INTEGER, "Longest sequence (window in SQuAD), in pieces.", 1),
    "doc_stride": (_INTEGER, "SQuAD windows: kbert's distance between window starts, the "
                   "Trainer's overlap of consecutive windows (its recipe passes it as `stride`).",
                   1),
    "train_batch_size": (_INTEGER, "Training batch size.", 1),
    "eval_batch_size": (_INTEGER, "Evaluation batch size.", 1),
    "predict_batch_size": (_INTEGER, "Prediction batch size.", 1),
    "learning_rate": (_FLOAT, "Peak learning rate.", 0),
    "num_train_epochs": (None, "Passes over the training data.", None),
    "warmup_proportion": (_FLOAT, "Warm-up fraction of the steps.", 0),
    "max_train_examples": (_INTEGER, "Seeded training subset (NER: sentences); default: the "
                           "whole training set.", 1),
    "seed": (_INTEGER, "Seed of the subset, shuffle, dropout and head.", 0),
}


def define_budget_flags(**defaults):
    """Declares `--precision` and the budget flags named in `defaults`.

    Args:
        **defaults: flag name (`max_seq_length`, `doc_stride`, `train_batch_size`,
            `eval_batch_size`, `predict_batch_size`, `learning_rate`, `num_train_epochs`,
            `warmup_proportion`, `max_train_examples`, `seed`, `precision`) -> its default.
            A float default makes num_train_epochs a float flag (fractions of an epoch, as
            in SQuAD); an int one, whole epochs (Keras `fit`'s). precision defaults to float32.

    Returns:
        A namespace of the flags' holders by name: `budget.seed.value`.
    """
    holders = {"precision": flags.DEFINE_enum(
        "precision", defaults.pop("precision", "float32"), PRECISIONS,
        "Arithmetic of every side: kbert's --mixed_precision (mixed_bfloat16, mixed_float16: "
        "float32 variables), keras-hub's Keras dtype policy of the same name, the Trainer's "
        "bf16/fp16 (torch.autocast, float32 weights), a Hugging Face pipeline's dtype. "
        "float16 is for GPUs.")}
    for name, default in defaults.items():
        define, help_text, lower_bound = _FLAGS[name]
        if define is None:
            define, lower_bound = (_FLOAT, 0) if isinstance(default, float) else (_INTEGER, 1)
        holders[name] = define(name, default, help_text, lower_bound=lower_bound)
    return types.SimpleNamespace(**holders)


def define_seeds_flag(default, help_text):
    """`--seeds`: a list of non-negative whole numbers, refused at parsing otherwise."""
    holder = flags.DEFINE_list("seeds", default, help_text)
    flags.register_validator(holder,
                             lambda seeds: all(re.fullmatch(r"\d+", s) for s in seeds),
                             message="--seeds: expected non-negative integers")
    return holder


def define_kbert_flags(tool, example):
    """`--kbert_flags`: more flags for kbert's `tool` alone; --mixed_precision is refused there,
    as --precision sets it on every side at once."""
    holder = flags.DEFINE_list("kbert_flags", [],
                               f"Extra {tool} flags, e.g. --kbert_flags={example}.")
    flags.register_validator(
        holder, lambda values: not any(v.lstrip("-").startswith("mixed_precision") for v in values),
        message="--kbert_flags: no --mixed_precision; --precision sets both sides' precision")
    return holder


def arguments(budget, kbert=False):
    """`--name=value` of each flag in `budget` that has a value, for a child run; for kbert's
    tools (`kbert`) --precision becomes their --mixed_precision."""
    args = []
    for name, holder in vars(budget).items():
        if holder.value is None:
            continue
        if kbert and name == "precision":
            args.append(f"--mixed_precision={MIXED_PRECISION[holder.value]}")
        else:
            args.append(f"--{name}={holder.value}")
    return args


def settings(budget):
    """{flag name: value} of `budget`, for a results JSON."""
    return {name: holder.value for name, holder in vars(budget).items()}
