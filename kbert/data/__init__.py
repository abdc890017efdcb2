"""Offline records and tf.data input pipelines; never builds a model.

Each public name imports its module when first read (`kbert.lazy`): the tools read
`kbert.data.pretraining.instances`'s config for their --help without starting TensorFlow.
"""

import typing

from kbert import lazy

if typing.TYPE_CHECKING:  # the public names, imported when first read (kbert.lazy)
    from kbert.data.features import PRETRAINING_FEATURES
    from kbert.data.pretraining.instances import PretrainingDataConfig
    from kbert.data.pretraining.record_input import pretraining_dataset
    from kbert.data.pretraining.text_input import pretraining_text_dataset
    from kbert.data.pretraining.text_input import write_text_records
    from kbert.data.pretraining.writer import create_pretraining_data

__all__ = ["PRETRAINING_FEATURES", "PretrainingDataConfig", "create_pretraining_data",
           "pretraining_dataset", "pretraining_text_dataset", "write_text_records"]

__getattr__, __dir__ = lazy.attach(__name__)
