"""Where and in what precision a recipe trains: tf.distribute strategies, mixed precision, XLA.

The recipes (`kbert.tasks.glue`, `squad`, `ner`, `pretraining`) take the same four settings:

    distribution_strategy  "one_device" (the first GPU, else the CPU), "mirrored" (every
                           local GPU, synchronous), "multi_worker_mirrored" (several hosts;
                           the cluster and this process's task are read from `TF_CONFIG`) or
                           "tpu" (a Cloud TPU named by `tpu`).
    tpu                    the TPU's name or gRPC address, "local" on a TPU VM.
    mixed_precision        "float32", "mixed_float16" (GPUs; Keras adds dynamic loss scaling)
                           or "mixed_bfloat16" (TPUs, Ampere and newer GPUs, recent CPUs).
                           Variables stay float32; the classifier, span labeler and
                           tagger return float32 logits, and Keras computes losses in
                           float32.
    jit_compile            XLA-compile the train step.

They build the model and optimizer under `strategy.scope()` and hand `fit` a dataset of
GLOBAL batches, as Keras does: `train_batch_size=32` on 4 replicas gives each replica 8
examples a step, and the gradients are averaged over all 32. Keep the batch size when adding
replicas to get the same training; multiply it (and usually the learning rate) to go faster.
One difference stays: Keras 3 clips gradients (BERT's `global_clipnorm=1.0`) on each
replica's share before summing them, so while clipping bites, N replicas clip more loosely
than one device. A partial batch that does not split evenly weighs its examples slightly
unevenly (each replica's mean loss counts alike).

With several workers, every worker runs the whole recipe. The chief (task "chief", or worker
0 when there is none) writes to `output_dir`; worker N writes its identical copy to
`output_dir/worker_N`, so no two processes write one file and each resumes from its own backup.
"""

import contextlib
import functools
import json
import os

import keras
import tensorflow as tf
from absl import logging

from kbert.tasks import configs

STRATEGIES = configs.STRATEGIES
PRECISIONS = configs.PRECISIONS


def check(distribution_strategy="one_device", mixed_precision="float32"):
    """Raises ValueError on an unknown strategy or precision name (a `Strategy` passes)."""
    if (not isinstance(distribution_strategy, tf.distribute.Strategy)
            and distribution_strategy not in STRATEGIES):
        raise ValueError(f"distribution_strategy must be one of {', '.join(STRATEGIES)}, "
                         f"got {distribution_strategy!r}")
    if mixed_precision not in PRECISIONS:
        raise ValueError(f"mixed_precision must be one of {', '.join(PRECISIONS)}, "
                         f"got {mixed_precision!r}")


def make_strategy(name="one_device", tpu=None):
    """The `tf.distribute.Strategy` called `name`, made once per process and then reused.

    "multi_worker_mirrored" must be made before TensorFlow runs its first op (TensorFlow
    configures its collective ops at startup), so a recipe makes its strategy first.

    Args:
        name: str, one of `STRATEGIES`, or a `tf.distribute.Strategy`, returned as is.
            Defaults to "one_device".
        tpu: str or None. For "tpu": the TPU name or `grpc://` address given to
            `TPUClusterResolver`; "local" on a TPU VM. Defaults to the `TPU_NAME` variable.

    Returns:
        `tf.distribute.Strategy`.
    """
    if isinstance(name, tf.distribute.Strategy):
        return name
    check(name)
    return _make_strategy(name, tpu or os.environ.get("TPU_NAME"))


# One strategy of each kind per process: a second MirroredStrategy's collective ops can clash
# with the first's ("Shape mismatch in the collective instance"), a multi-worker strategy
# can only be made at startup, and a TPU system is initialised once.
@functools.cache
def _make_strategy(name, tpu):
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        # Every GPU; without GPUs every CPU device (one, unless split into logical devices
        # with `tf.config.set_logical_device_configuration`), where Keras would take only one.
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.MirroredStrategy(
            None if gpus else [d.name for d in tf.config.list_logical_devices("CPU")])
    if name == "multi_worker_mirrored":
        _check_tf_config()
        try:
            return _MultiWorkerMirroredStrategy()
        except RuntimeError as e:
            raise RuntimeError(
                "multi_worker_mirrored: the strategy must be made before TensorFlow runs any "
                "op (make it first thing in the program)") from e
    return _tpu_strategy(tpu)


class _MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """`tf.distribute.MultiWorkerMirroredStrategy` whose `reduce` takes what Keras 3 gives it.

    Keras 3 `fit` calls `reduce` on a whole `({inputs}, labels)` batch to build the model
    (keras-team/keras#20329), and with `axis=0` on the scalar loss and metrics of every step
    (tensorflow/tensorflow#72388); this strategy takes one tensor at a time and no axis on a
    scalar. So: tensor by tensor, and no axis on scalars. (Keras' metric variables already sum
    their updates over all replicas, so the mean of a scalar over replicas is that value.)
    """

    def reduce(self, reduce_op, value, axis):
        parent = super()

        def reduce_one(v):
            rank = getattr(v, "values", (v,))[0].shape.rank
            return parent.reduce(reduce_op, v, None if rank == 0 else axis)

        return tf.nest.map_structure(reduce_one, value)


def _tpu_strategy(tpu):
    if not tpu:
        raise ValueError("distribution_strategy=tpu needs tpu (--tpu=NAME, a grpc:// "
                         "address, or 'local' on a TPU VM) or the TPU_NAME variable")
    # Any failure to reach the TPU (unknown name, no TPU devices, no TPU kernels in this
    # TensorFlow) becomes one error naming the TPU.
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except Exception as e:
        raise ValueError(f"distribution_strategy=tpu: no TPU reachable at tpu={tpu!r} "
                         f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from e


def _check_tf_config():
    text = os.environ.get("TF_CONFIG")
    if not text:
        return  # a cluster of one: this process alone
    try:
        tf_config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON ({e}): {text[:200]}") from None
    if not isinstance(tf_config, dict) or not {"cluster", "task"} <= set(tf_config):
        raise ValueError(f"TF_CONFIG needs 'cluster' and 'task' keys, e.g. "
                         f'{{"cluster": {{"worker": ["host1:2222", "host2:2222"]}}, '
                         f'"task": {{"type": "worker", "index": 0}}}}; got: {text[:200]}')


def set_mixed_precision(policy):
    """Sets Keras' global dtype policy to `policy` (one of `PRECISIONS`); returns the old one.

    Models built afterwards compute in `policy`'s compute dtype with float32 variables; under
    "mixed_float16" `compile` wraps the optimizer in `keras.optimizers.LossScaleOptimizer`.
    """
    check(mixed_precision=policy)
    if policy == "mixed_bfloat16" and emulates_bfloat16():
        logging.warning(
            "mixed_bfloat16 on a CPU without AVX512_BF16 or AMX and no GPU: TensorFlow emulates "
            "the bfloat16 matmuls, which is usually slower than float32 (BENCHMARKS.md)")
    previous = keras.config.dtype_policy().name
    keras.config.set_dtype_policy(policy)
    return previous


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The words of the CPU's "flags" line in `cpuinfo` (Linux), a set (empty without such a
    line); None where the file cannot be read."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            return set(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return None


def emulates_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether training here would run bfloat16 matmuls in emulation: no GPU or TPU, and a
    CPU whose `cpuinfo` flags lack avx512_bf16 and amx_bf16. False where unknown (no flags)."""
    if tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"):
        return False
    flags = cpu_flags(cpuinfo)
    return bool(flags) and not {"avx512_bf16", "amx_bf16"} & flags


@contextlib.contextmanager
def mixed_precision_scope(policy):
    """`set_mixed_precision(policy)` for the `with` block, then the previous policy again."""
    previous = set_mixed_precision(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def is_chief(strategy):
    """Whether this process writes the results: always, except on non-chief workers."""
    return strategy.extended.should_checkpoint


def worker_output_dir(output_dir, strategy):
    """`output_dir` on the chief; `output_dir/<task type>_<index>` on the other workers."""
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, f"{resolver.task_type}_{resolver.task_id}")


def load_in_precision(path, mixed_precision="float32"):
    """`keras.saving.load_model(path)` in `mixed_precision`, whatever policy it was saved in.

    A `.keras` file records the dtype policy of each model it holds; when that differs, the
    model is rebuilt from its config without them, under `mixed_precision` as the global
    policy (as a model built fresh in it), and the weights are copied in.
    """
    model = keras.saving.load_model(path)
    if model.dtype_policy.name == mixed_precision:
        return model
    with mixed_precision_scope(mixed_precision):
        rebuilt = type(model).from_config(_without_policies(model.get_config()))
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def _without_policies(config):
    # Drops every "dtype" entry that is a serialized DTypePolicy (the models' and their
    # encoders'), so that each takes the global policy.
    if isinstance(config, list):
        return [_without_policies(value) for value in config]
    if not isinstance(config, dict):
        return config
    return {key: _without_policies(value) for key, value in config.items()
            if not (key == "dtype" and isinstance(value, dict)
                    and "DTypePolicy" in str(value.get("class_name")))}


def shard_by_data(dataset):
    """`dataset` with auto-sharding by element, for input that is not read from files.

    Each worker builds the same (seeded) stream and keeps its part of every global batch;
    TensorFlow would otherwise try to shard by file first and warn.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA)
    return dataset.with_options(options)


def global_step(model):
    """Optimizer steps taken by `model`, an int; None before it is compiled.

    `int(model.optimizer.iterations)` fails on a mirrored variable, and NumPy conversion
    fails on one inside `strategy.scope()`; a tensor conversion reads any.
    """
    optimizer = getattr(model, "optimizer", None)  # uncompiled Keras 3 models have none
    if optimizer is None:
        return None
    return int(tf.convert_to_tensor(optimizer.iterations.value))
