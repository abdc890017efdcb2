"""Where a recipe trains: tf.distribute strategies, the multi-worker output layout, sharding.

The recipes (`kbert.tasks.glue`, `squad`, `ner`, `pretraining`) take the same four settings:

    distribution_strategy  "one_device" (the first GPU, else the CPU), "mirrored" (every
                           local GPU, synchronous), "multi_worker_mirrored" (several hosts;
                           the cluster and this process's task are read from `TF_CONFIG`) or
                           "tpu" (a Cloud TPU named by `tpu`).
    tpu                    the TPU's name or gRPC address, "local" on a TPU VM.
    mixed_precision        the dtype policy: `kbert.tasks.precision`.
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

import tensorflow as tf

from kbert import artifacts
from kbert.tasks import configs
from kbert.tasks import precision

STRATEGIES = configs.STRATEGIES
INTRA_OP_THREADS_VARIABLE = "TF_NUM_INTRAOP_THREADS"


def check(distribution_strategy):
    """Raises ValueError on an unknown strategy name (a `Strategy` passes)."""
    if (not isinstance(distribution_strategy, tf.distribute.Strategy)
            and distribution_strategy not in STRATEGIES):
        raise ValueError(f"distribution_strategy must be one of {', '.join(STRATEGIES)}, "
                         f"got {distribution_strategy!r}")


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


@contextlib.contextmanager
def run_scope(config):
    """The scope a training run works in, for a `kbert.tasks.configs.RunConfig`: its strategy
    (made first: a multi-worker strategy must exist before TensorFlow runs an op), the lock of
    its output dir (`kbert.artifacts.locked`: a second run into it is refused at once) and its
    mixed-precision policy. Yields (strategy, this worker's output dir: `worker_output_dir`).
    """
    one_intra_op_thread_for(config.cpu_batch_parts)
    strategy = make_strategy(config.distribution_strategy, config.tpu)
    output_dir = worker_output_dir(config.output_dir, strategy)
    with artifacts.locked(output_dir), precision.mixed_precision_scope(
            config.mixed_precision), strategy.scope():
        yield strategy, output_dir


def one_intra_op_thread_for(batch_parts):
    """With `batch_parts` > 1 (`RunConfig.cpu_batch_parts`): TensorFlow's intra-op pool at
    one thread, so that each part's ops keep to one core and the parts run side by side
    (`kbert.models.task.BertTask`: two parts each asking the 2-thread pool for both threads
    ran no faster than one batch). Raises ValueError on a machine with a GPU, RuntimeError
    where TensorFlow has already started with another intra-op setting.
    """
    if batch_parts == 1:
        return
    if tf.config.list_physical_devices("GPU"):
        raise ValueError("cpu_batch_parts is for training on the CPU and this machine has a "
                         "GPU: leave it at 1")
    if os.environ.get(INTRA_OP_THREADS_VARIABLE) == "1":  # TensorFlow read it at its start
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError as e:
        raise RuntimeError(
            "cpu_batch_parts needs TensorFlow's intra-op pool at one thread, which can only "
            "be set before TensorFlow runs its first op: run the recipe first in the process, "
            f"or set {INTRA_OP_THREADS_VARIABLE}=1 in its environment") from e


# One strategy of each kind per process: a second MirroredStrategy's collective ops can clash
# with the first's ("Shape mismatch in the collective instance"), a multi-worker strategy
# can only be made at startup, and a TPU system is initialised once.
@functools.cache
def _make_strategy(name, tpu):
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return tf.distribute.OneDeviceStrategy(gpus[0].name)
        if not tf.distribute.has_strategy():
            # On the CPU, TensorFlow's default strategy: `fit` then reads the recipe's dataset
            # as it is. OneDeviceStrategy("/cpu:0") reads it through a MultiDeviceIterator,
            # whose per-device datasets keep tf.data's autotuning on whatever the recipe's
            # options say, and destroying their unfinished iterator at the end of every
            # `fit` and `predict` waits for the autotuning thread's next wake-up (17-56 s
            # after minute-long epochs; `kbert.data.pipeline.prefetched`).
            return tf.distribute.get_strategy()
        return tf.distribute.OneDeviceStrategy("/cpu:0")
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


def is_chief(strategy):
    """Whether this process writes the results: always, except on non-chief workers."""
    return strategy.extended.should_checkpoint


def worker_output_dir(output_dir, strategy):
    """`output_dir` on the chief; `output_dir/<task type>_<index>` on the other workers."""
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, f"{resolver.task_type}_{resolver.task_id}")


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
