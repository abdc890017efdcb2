import numpy as np
import pytest

import kbert
from kbert.models.classifier import BertClassifier
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.task_model import TaskModel
from kbert.models.token_classifier import BertTokenClassifier


@pytest.mark.parametrize("model_class", [BertClassifier, BertTokenClassifier, BertSpanLabeler,
                                         BertPretrainer])
def test_trainable_models_are_task_models(model_class):
    assert issubclass(model_class, TaskModel)


def test_fit_builds_the_optimizer_before_tracing_the_train_step_once(tiny_encoder):
    """Without a strategy: TensorFlow traces the step once, not again after a first trace
    that made the optimizer's variables."""
    model = BertClassifier(tiny_encoder, 2)
    model.compile(optimizer=kbert.create_optimizer(1e-3, 10, 1))
    traces = []
    train_step = model.train_step

    def counting_train_step(data):
        traces.append(model.optimizer.built)
        return train_step(data)

    model.train_step = counting_train_step
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 31, (4, 7)).astype("int32"),
         "segment_ids": np.zeros((4, 7), "int32"), "padding_mask": np.ones((4, 7), "int32")}
    model.fit(x, rng.integers(0, 2, 4), batch_size=2, epochs=2, verbose=0)
    assert traces == [True]
    assert int(model.optimizer.iterations) == 4
