"""Flags shared by the training tools: where (devices, hosts, TPU) and in what precision to train.

A tool imports this module and calls `flags.adopt_module_key_flags(_flags)`, so these flags
show in its --help; `distribution_settings()` gives them as keyword arguments of the
`kbert.tasks` recipes. The batch size flags of every tool are GLOBAL batch sizes, split over
the replicas.
"""

import _cli
from absl import flags

from kbert.tasks import distribution
from kbert.tasks import fine_tuning

DISTRIBUTION_STRATEGY = flags.DEFINE_enum(
    "distribution_strategy", "one_device", distribution.STRATEGIES,
    "one_device: the first GPU, else the CPU. mirrored: every local GPU. "
    "multi_worker_mirrored: several hosts, each running the same command with its own "
    "TF_CONFIG (cluster and task). tpu: a Cloud TPU, see --tpu.")
TPU = flags.DEFINE_string(
    "tpu", None, "With --distribution_strategy=tpu: the TPU name or grpc:// address, 'local' "
    "on a TPU VM. Defaults to $TPU_NAME.")
MIXED_PRECISION = flags.DEFINE_enum(
    "mixed_precision", "float32", distribution.PRECISIONS,
    "Compute dtype policy; variables, logits and losses stay float32. mixed_float16 for "
    "GPUs (with loss scaling); mixed_bfloat16 for TPUs, Ampere or newer GPUs and CPUs with "
    "AVX512_BF16 or AMX (on other CPUs bfloat16 is emulated, slower than float32).")
JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile", False, "XLA-compile the train step. It pays with fixed shapes "
    "(run_pretraining); GLUE and SQuAD batches come in many widths and XLA compiles each "
    "one, seconds every time.")


def distribution_settings():
    """The flags' values as `kbert.tasks` keyword arguments."""
    return dict(distribution_strategy=DISTRIBUTION_STRATEGY.value, tpu=TPU.value,
                mixed_precision=MIXED_PRECISION.value, jit_compile=JIT_COMPILE.value)


class FineTuningFlags:
    """The flags of `kbert.tasks.fine_tuning.FineTuningConfig`, defined by the tool that
    calls `define_fine_tuning_flags` (so run_pretraining, which has its own, has none of them).
    """

    def __init__(self, defaults, steps):
        d = {**_FINE_TUNING_DEFAULTS, **defaults}
        self.holders = {
            "output_dir": flags.DEFINE_string(
                "output_dir", None, "Where the model, results and logs go.", required=True),
            "init_checkpoint": flags.DEFINE_string(
                "init_checkpoint", None, "Google checkpoint (release dir, training dir or "
                "prefix) or a .keras model. Defaults to --output_dir/model.keras without "
                "--do_train."),
            "vocab_file": flags.DEFINE_string(
                "vocab_file", None, "Defaults to vocab.txt beside the checkpoint."),
            "bert_config_file": flags.DEFINE_string(
                "bert_config_file", None, "Defaults to bert_config.json beside the checkpoint."),
            "do_lower_case": flags.DEFINE_bool(
                "do_lower_case", True, "Whether the model is uncased (checked against the "
                "release name and the vocab)."),
            "allow_casing_mismatch": flags.DEFINE_bool(
                "allow_casing_mismatch", False, "Skip the --do_lower_case check."),
            "max_seq_length": flags.DEFINE_integer(
                "max_seq_length", d["max_seq_length"], "Word pieces per input or window."),
            "train_batch_size": flags.DEFINE_integer(
                "train_batch_size", 32, "Training batch size (global)."),
            "eval_batch_size": flags.DEFINE_integer(
                "eval_batch_size", d["eval_batch_size"], "Evaluation batch size (global)."),
            "predict_batch_size": flags.DEFINE_integer(
                "predict_batch_size", 8, "Prediction batch size (global)."),
            "learning_rate": flags.DEFINE_float(
                "learning_rate", 5e-5, _cli.LEARNING_RATE_HELP),
            "num_train_epochs": flags.DEFINE_float(
                "num_train_epochs", 3.0, d["epochs_help"]),
            "warmup_proportion": flags.DEFINE_float(
                "warmup_proportion", 0.1, "Fraction of steps of linear warm-up."),
            **{step: flags.DEFINE_bool(step, False, d[f"{step}_help"]) for step in steps},
            "keep_best_epoch": flags.DEFINE_bool(
                "keep_best_epoch", True, "With a dev set (--do_eval; run_squad: a --predict_file "
                "with answers and more than one epoch), score it after every epoch and save "
                "the best epoch; --nokeep_best_epoch saves the last one."),
            "overwrite_output_dir": flags.DEFINE_bool(
                "overwrite_output_dir", False, "Start over in an --output_dir that holds "
                "another run, or a finished one."),
            "allow_untrained_head": flags.DEFINE_bool(
                "allow_untrained_head", False, "Evaluate or predict, without --do_train, "
                "from a Google checkpoint that has no head for this task (a pretrained "
                "release): the head is random, so are the scores."),
            "seed": flags.DEFINE_integer(
                "seed", 12345, "Seeds the data order, dropout and the new head."),
            "embedding_updates": flags.DEFINE_enum(
                "embedding_updates", "dense", fine_tuning.EMBEDDING_UPDATES,
                "dense: exact AdamW over the whole word table. sparse: update only the rows "
                "a batch used (lazy AdamW: unused rows are not decayed), much less work per "
                "step for a 30k-row table."),
            "head_learning_rate_multiplier": flags.DEFINE_float(
                "head_learning_rate_multiplier", 1.0, "The task head (e.g. the CRF's "
                "transitions) learns at --learning_rate times this."),
            "layerwise_lr_decay": flags.DEFINE_float(
                "layerwise_lr_decay", None, "ELECTRA's layer-wise decay, e.g. 0.8: "
                "transformer layer i of L learns at decay^(L+1-i) of the rate, the embeddings "
                "at decay^(L+2), the pooler and head at the full rate."),
            "steps_per_execution": flags.DEFINE_integer(
                "steps_per_execution", 1, "Train steps per graph call (Keras compile); "
                "the same results, less per-step dispatch, callbacks see every N steps."),
        }

    def settings(self):
        """The flags' values (these and the distribution flags) as config keyword arguments."""
        return {**{name: holder.value for name, holder in self.holders.items()},
                **distribution_settings()}


_FINE_TUNING_DEFAULTS = dict(
    max_seq_length=128, eval_batch_size=8,
    epochs_help="Training epochs (a whole number).", do_train_help="Fine-tune.",
    do_eval_help="Evaluate on the dev set.", do_predict_help="Predict the test set.")


def define_fine_tuning_flags(steps=("do_train", "do_eval", "do_predict"), **defaults):
    """Defines the shared fine-tuning flags, with the step flags in `steps`; `defaults`
    changes a few defaults and helps (max_seq_length, eval_batch_size, epochs_help,
    do_train_help, do_eval_help, do_predict_help)."""
    return FineTuningFlags(defaults, steps)
