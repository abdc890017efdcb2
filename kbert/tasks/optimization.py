"""BERT's optimizer: AdamW with decoupled weight decay, linear warm-up, then linear decay to 0.

As Google's optimization.py `create_optimizer`, for fine-tuning and pretraining alike, built
from Keras parts: `keras.optimizers.AdamW` with `exclude_from_weight_decay`, and a schedule.
One difference stays: Keras' Adam corrects the moment bias, Google's `AdamWeightDecayOptimizer`
does not (TF Model Garden's port corrects it too); it only changes the first few hundred steps.
"""

import keras
import tensorflow as tf

# Google excludes "LayerNorm", "layer_norm" and "bias" by variable name. Keras matches
# `variable.name`, the last path component: LayerNorm weights are "gamma" and "beta", and
# "bias" also covers the MLM head's "output_bias".
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")


# Keras has no warm-up + linear decay schedule: `PolynomialDecay` has no warm-up and
# `CosineDecay`'s warm-up is followed by a cosine, not a linear, decay. So a small one.
@keras.saving.register_keras_serializable(package="kbert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0, then linear decay to 0 at `num_train_steps`, as Google's.

    At step `s` (0-based): `learning_rate * s / num_warmup_steps` while
    `s < num_warmup_steps`, else `learning_rate * (1 - min(s, num_train_steps) /
    num_train_steps)`. The decay counts from step 0, not from the end of warm-up, exactly as
    Google's optimization.py (`polynomial_decay` with power 1, then the warm-up override), so
    the rate steps down by a factor `1 - num_warmup_steps / num_train_steps` there.

    Args:
        learning_rate: float. The peak rate.
        num_train_steps: int. Steps to decay over; the rate is 0 from there on.
        num_warmup_steps: int. Steps of linear warm-up. Defaults to 0.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0):
        if num_train_steps <= 0 or not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(f"Need 0 <= num_warmup_steps ({num_warmup_steps}) <= "
                             f"num_train_steps ({num_train_steps}) and num_train_steps > 0")
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        decayed = self.learning_rate * (
            1.0 - keras.ops.minimum(step, float(self.num_train_steps)) / self.num_train_steps)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.learning_rate * step / self.num_warmup_steps
        return keras.ops.where(step < self.num_warmup_steps, warmup, decayed)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


@keras.saving.register_keras_serializable(package="kbert")
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` whose weight-decay exclusions survive `model.save`.

    Keras' `exclude_from_weight_decay` is not part of the optimizer config, so a reloaded
    model would start decaying LayerNorm weights and biases; here the names are an argument.

    Args:
        weight_decay_exclusions: sequence of str. Regular expressions; variables whose
            `name` matches one are not decayed. Defaults to `NO_WEIGHT_DECAY`.
        **kwargs: `keras.optimizers.AdamW` arguments.
    """

    def __init__(self, weight_decay_exclusions=NO_WEIGHT_DECAY, **kwargs):
        super().__init__(**kwargs)
        self.weight_decay_exclusions = tuple(weight_decay_exclusions)
        self.exclude_from_weight_decay(var_names=list(self.weight_decay_exclusions))
        self._fused_update = None

    # Keras updates each weight with a dozen element-wise TF ops (clip, decay, two moments, the
    # step), every one a full pass over the weight's memory: ~100 ms a step for MiniLM's 22.7M
    # weights on 2 CPU cores, a fixed cost that weighs most on short length-bucketed steps. XLA
    # fuses them into one loop per weight (~50 ms; the same arithmetic, equal to 1e-8). Keras only
    # compiles the update with the whole train step (`jit_compile=True`), which slows BERT's
    # forward and backward on CPU (bench/encoder.py), so the update is compiled on its own.
    def _backend_apply_gradients(self, grads, trainable_variables):
        if keras.backend.backend() != "tensorflow":
            return super()._backend_apply_gradients(grads, trainable_variables)
        # The word-embedding gradient is IndexedSlices, one row per token. Made dense: Keras'
        # Adam squares those rows before summing a repeated token's (a wrong second moment
        # whenever clipping has not already made it dense), and fixed shapes let XLA compile
        # the update once instead of at every batch length.
        grads = [tf.convert_to_tensor(grad) for grad in grads]
        if tf.distribute.has_strategy() and not isinstance(
                tf.distribute.get_strategy(), tf.distribute.OneDeviceStrategy):
            # Several replicas update through merge_call, which cannot run inside XLA.
            return super()._backend_apply_gradients(grads, trainable_variables)
        variables = list(trainable_variables)
        key = tuple(map(id, variables))  # recompiled only if Keras passes other weights
        if self._fused_update is None or self._fused_update[0] != key:
            parent = super()._backend_apply_gradients
            update = tf.function(lambda grads: parent(grads, variables), jit_compile=True)
            self._fused_update = (key, update)
        self._fused_update[1](grads)

    def get_config(self):
        config = super().get_config()
        config["weight_decay_exclusions"] = list(self.weight_decay_exclusions)
        return config


def create_optimizer(learning_rate, num_train_steps, num_warmup_steps, weight_decay=0.01,
                     global_clipnorm=1.0) -> "AdamW":
    """The BERT optimizer, as Google's optimization.py `create_optimizer`.

    Args:
        learning_rate: float. Peak learning rate (e.g. 2e-5 to 5e-5 to fine-tune).
        num_train_steps: int. Total optimizer steps; the rate reaches 0 there.
        num_warmup_steps: int. Linear warm-up steps (Google: 10% of `num_train_steps`).
        weight_decay: float. Decoupled weight decay, not applied to LayerNorm weights and
            biases. Defaults to 0.01.
        global_clipnorm: float. Clip gradients to this global norm, as Google (1.0).

    Returns:
        a `kbert.tasks.optimization.AdamW` (beta_1 0.9, beta_2 0.999, epsilon 1e-6).

    Example:
    ```python
    optimizer = kbert.create_optimizer(2e-5, num_train_steps=3 * steps_per_epoch,
                                       num_warmup_steps=int(0.3 * steps_per_epoch))
    classifier.compile(optimizer=optimizer)
    ```
    """
    schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps)
    return AdamW(learning_rate=schedule, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, global_clipnorm=global_clipnorm)
