"""`cpu_batch_parts`: the recipes' batches as row blocks side by side on a CPU, TensorFlow's
intra-op pool at one thread."""

import pathlib
from unittest import mock

import pytest

from kbert.models.task import BertTask
from kbert.tasks import glue
from kbert.tasks import strategies
from tests.tasks.test_distribution import glue_settings

SETTER = "tensorflow.config.threading.set_intra_op_parallelism_threads"


@pytest.fixture
def intra_op_setter(monkeypatch):
    """The setter, mocked: the test process's TensorFlow keeps its threads."""
    monkeypatch.delenv(strategies.INTRA_OP_THREADS_VARIABLE, raising=False)
    with mock.patch(SETTER) as setter:
        yield setter


def test_one_part_leaves_the_threads(intra_op_setter):
    strategies.one_intra_op_thread_for(1)
    intra_op_setter.assert_not_called()


def test_parts_set_one_intra_op_thread(intra_op_setter):
    strategies.one_intra_op_thread_for(2)
    intra_op_setter.assert_called_once_with(1)


def test_the_variable_at_one_is_enough(intra_op_setter, monkeypatch):
    monkeypatch.setenv(strategies.INTRA_OP_THREADS_VARIABLE, "1")
    strategies.one_intra_op_thread_for(2)
    intra_op_setter.assert_not_called()


def test_tensorflow_already_started_is_a_clear_error(intra_op_setter):
    intra_op_setter.side_effect = RuntimeError(
        "Intra op parallelism cannot be modified after initialization.")
    with pytest.raises(RuntimeError, match="before TensorFlow runs its first op: run the "
                       "recipe first in the process, or set TF_NUM_INTRAOP_THREADS=1"):
        strategies.one_intra_op_thread_for(2)


def test_a_gpu_is_refused(intra_op_setter):
    with (mock.patch("tensorflow.config.list_physical_devices", return_value=["GPU:0"]),
          pytest.raises(ValueError, match="cpu_batch_parts is for training on the CPU")):
        strategies.one_intra_op_thread_for(2)
    intra_op_setter.assert_not_called()


@pytest.mark.parametrize("wrong, message", [
    (dict(cpu_batch_parts=0), "cpu_batch_parts must be >= 1, got 0"),
    (dict(cpu_batch_parts=2, distribution_strategy="mirrored"),
     "cpu_batch_parts splits batches on one CPU"),
])
def test_the_config_checks_the_setting(tmp_path, wrong, message):
    with pytest.raises(ValueError, match=message):
        glue.GlueConfig(output_dir=str(tmp_path / "out"), do_eval=True, **wrong,
                        **glue_settings(tmp_path))


def _cells(text):
    """The numbers of a predictions file, row by row (its header and names dropped)."""
    return [float(cell) for line in text.splitlines() for cell in line.split("\t")
            if _is_number(cell)]


def _is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_the_recipe_runs_its_batches_in_parts(tiny_google_dir, tmp_path, monkeypatch):
    """Scores and predictions as without parts; training, scoring and predicting split."""
    monkeypatch.setenv(strategies.INTRA_OP_THREADS_VARIABLE, "1")  # as if set at the start
    split_calls = []
    call_in_parts = BertTask._call_in_parts

    def spy(self, inputs, parts, *args, **kwargs):
        split_calls.append((parts, kwargs.get("training")))
        return call_in_parts(self, inputs, parts, *args, **kwargs)

    def scored(parts):
        run = glue.run_glue(glue.GlueConfig(
            output_dir=str(tmp_path / f"eval_{parts}"), do_eval=True, do_predict=True,
            cpu_batch_parts=parts, **glue_settings(tiny_google_dir)))
        return run["eval"]["dev"], pathlib.Path(run["predict"]["MRPC"]).read_text("utf-8")

    with mock.patch.object(BertTask, "_call_in_parts", spy):
        whole = scored(1)
        assert split_calls == []
        split = scored(2)
        assert split_calls and {call[0] for call in split_calls} == {2}
        assert _cells(split[1]) == pytest.approx(_cells(whole[1]), rel=1e-5)
        assert split[0].keys() == whole[0].keys()
        for key, value in whole[0].items():
            assert split[0][key] == pytest.approx(value, rel=1e-5), key
        split_calls.clear()
        glue.run_glue(glue.GlueConfig(
            output_dir=str(tmp_path / "train"), do_train=True, train_batch_size=4,
            num_train_epochs=1, max_train_examples=8, cpu_batch_parts=2,
            **glue_settings(tiny_google_dir)))
    assert (2, True) in split_calls
