"""Offline records and tf.data input pipelines; never builds a model."""

from kbert.data.features import PRETRAINING_FEATURES
from kbert.data.pretraining import PretrainingDataConfig
from kbert.data.pretraining_data import create_pretraining_data
from kbert.data.pretraining_input import pretraining_dataset

__all__ = ["PRETRAINING_FEATURES", "PretrainingDataConfig", "create_pretraining_data",
           "pretraining_dataset"]
