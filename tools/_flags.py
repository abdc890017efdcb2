"""Flags shared by the training tools: where (devices, hosts, TPU) and in what precision to train.

A tool imports this module and calls `flags.adopt_module_key_flags(_flags)`, so these flags
show in its --help; `distribution_settings()` gives them as keyword arguments of the
`kbert.tasks` recipes. The batch size flags of every tool are GLOBAL batch sizes, split over
the replicas.
"""

from absl import flags

from kbert.tasks import distribution

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
    "GPUs (with loss scaling), mixed_bfloat16 for TPUs and Ampere or newer GPUs.")
JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile", False, "XLA-compile the train step. It pays with fixed shapes "
    "(run_pretraining); GLUE and SQuAD batches come in many widths and XLA compiles each "
    "one, seconds every time.")


def distribution_settings():
    """The flags' values as `kbert.tasks` keyword arguments."""
    return dict(distribution_strategy=DISTRIBUTION_STRATEGY.value, tpu=TPU.value,
                mixed_precision=MIXED_PRECISION.value, jit_compile=JIT_COMPILE.value)
