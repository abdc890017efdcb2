"""kbert.ranges: one declaration per range, read by the configs' checks and by the tools."""

import dataclasses
import math
import typing

import pytest

from kbert import ranges
from kbert.data import records
from kbert.data.pretraining.instances import PretrainingDataConfig
from kbert.tasks import configs
from kbert.tasks import pretraining
from kbert.tasks import squad
from tests.test_options import TOOLS


def test_ranges_read_and_print():
    assert str(ranges.at_least(1)) == ">= 1" and 1 in ranges.at_least(1)
    assert 0 not in ranges.at_least(1)
    assert str(ranges.above(0)) == "> 0" and 0 not in ranges.above(0) and 1e-9 in ranges.above(0)
    assert str(ranges.between(0, 1)) == "in [0, 1]" and 0 in ranges.between(0, 1)
    decay = ranges.between(0, 1, low_open=True)
    assert str(decay) == "in (0, 1]" and 0 not in decay and 1 in decay
    assert math.nan not in ranges.above(0) and math.inf not in ranges.above(0)


def test_a_subclass_that_changes_a_default_keeps_the_range():
    found = ranges.of(squad.SquadConfig)
    assert found["max_seq_length"] == ranges.at_least(3)  # re-declared with default 384
    assert found["n_best_size"] == ranges.at_least(1)
    assert ranges.of(pretraining.PretrainingConfig)["masked_lm_prob"] == (
        ranges.of(PretrainingDataConfig)["masked_lm_prob"])


@pytest.mark.parametrize(("config", "message"), [
    (lambda: configs.FineTuningConfig(output_dir="o", do_train=True, train_batch_size=0),
     "train_batch_size must be >= 1, got 0"),
    (lambda: squad.SquadConfig(output_dir="o", do_predict=True, max_answer_length=0),
     "max_answer_length must be >= 1, got 0"),
    (lambda: pretraining.PretrainingConfig(input_file="i", output_dir="o",
                                           bert_config_file="c", learning_rate=-1e-4),
     r"learning_rate must be in \(0, 1\], got -0.0001"),
    (lambda: PretrainingDataConfig(dupe_factor=0), "dupe_factor must be >= 1, got 0"),
])
def test_configs_check_their_ranges(config, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        config()


def test_no_float_option_takes_nan_or_inf():
    for cls in {*TOOLS.values(), PretrainingDataConfig}:
        floats = [f.name for f in dataclasses.fields(cls)
                  if f.type is float or float in typing.get_args(f.type)]
        for name in floats:
            for value in (math.nan, math.inf, -math.inf):
                assert value not in ranges.of(cls)[name], (cls.__name__, name, value)
    assert str(ranges.FINITE) == "a finite number" and -1e9 in ranges.FINITE
    with pytest.raises(ValueError, match="^null_score_diff_threshold must be a finite number, "
                       "got nan$"):
        squad.SquadConfig(output_dir="o", do_predict=True, null_score_diff_threshold=math.nan)


def test_zero_shards_is_an_error_not_one_shard():
    with pytest.raises(ValueError, match="num_shards must be positive, got 0"):
        records.shard_paths("out/train.tfrecord", num_shards=0)
    assert records.shard_paths("out/train.tfrecord") == ["out/train.tfrecord"]
