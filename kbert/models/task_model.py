"""TaskModel: what kbert's trainable models add to `keras.Model` for `fit`."""

import keras


class TaskModel(keras.Model):
    """`keras.Model` whose `fit` builds the optimizer before the train step is traced.

    Without a distribution strategy Keras builds the optimizer inside the first trace of the
    train step, and TensorFlow then traces the whole step a second time because that trace
    created variables: ~12 s more at the start of every `fit` of a MiniLM classifier on
    2 CPU cores (BENCHMARKS.md, "The AdamW update compiled per weight shape"). Under a
    strategy Keras builds it first, as here.
    """

    def fit(self, *args, **kwargs):
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
        return super().fit(*args, **kwargs)
