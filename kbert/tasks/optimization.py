"""BERT's optimizer: AdamW with decoupled weight decay, linear warm-up, then linear decay to 0.

As Google's optimization.py `create_optimizer`, for fine-tuning and pretraining alike, built
from Keras parts: `keras.optimizers.AdamW` with `exclude_from_weight_decay`, and a schedule.
One difference stays: Keras' Adam corrects the moment bias, Google's `AdamWeightDecayOptimizer`
does not (TF Model Garden's port corrects it too); it only changes the first few hundred steps.

`sparse_embedding_updates=True` updates only the embedding-table rows a batch used (lazy
AdamW, see `AdamW`): the same arithmetic for those rows, a fraction of the work for a 30,522-row
word table of which a fine-tuning batch touches a few hundred rows.

`learning_rate_multipliers` gives some variables their own rate, lr × factor (decay included):
a faster task head, or ELECTRA's layer-wise decay (`layer_multipliers`).
"""

import re

import keras
import tensorflow as tf

from kbert import cpu_features
from kbert.tasks import fused_adamw

# Google excludes "LayerNorm", "layer_norm" and "bias" by variable name. Keras matches
# `variable.name`, the last path component: LayerNorm weights are "gamma" and "beta", and
# "bias" also covers the MLM head's "output_bias".
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")


def _tf_variable(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


# The update of a weight with a dense gradient, one XLA program per weight shape; a name of
# this module's, so that a test can record the step's calls apart from the compiles ahead.
_fused_adamw_step = fused_adamw.adamw_step


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
    """`keras.optimizers.AdamW` whose weight-decay exclusions survive `model.save`, with an
    XLA-compiled update and an optional sparse (lazy) update of embedding tables.

    Keras' `exclude_from_weight_decay` is not part of the optimizer config, so a reloaded
    model would start decaying LayerNorm weights and biases; here the names are an argument.

    With `sparse_embedding_updates`, a gradient that arrives as `tf.IndexedSlices` (the word
    and segment tables': a gather's gradient) updates only the rows it names. Its repeated
    rows (a token used twice) are summed first, so for every updated row the step is exactly
    the dense one: global-norm clipping over all gradients, decay `w -= lr * weight_decay * w`
    (unless excluded by name), then bias-corrected Adam on that row's moments. A row the batch
    did not use is left as it is, moments included, where dense AdamW would still decay it,
    decay its moments (`m *= beta_1`, `v *= beta_2`) and move it by its remaining momentum:
    "lazy Adam", as TF Addons' `LazyAdam` or PyTorch's `SparseAdam`. Rarely used tokens then
    move less than under dense AdamW (no decay and no momentum between their batches).

    With `learning_rate_multipliers`, a variable whose `path` matches a pattern learns at the
    scheduled rate times its factor, in the decay as in the Adam step (as ELECTRA's per-layer
    rates, which scale the whole update); the first matching pattern counts, others learn at
    the scheduled rate. Each path's factor is fixed when the optimizer is built.

    Args:
        weight_decay_exclusions: sequence of str. Regular expressions; variables whose
            `name` matches one are not decayed. Defaults to `NO_WEIGHT_DECAY`.
        sparse_embedding_updates: bool. Update only the rows of sparse (embedding) gradients,
            as above, instead of the whole table. Needs `global_clipnorm` or no clipping,
            and one replica (several fall back to the dense update). Defaults to False.
        learning_rate_multipliers: dict of str -> float. Regular expression searched in
            `variable.path` -> factor of the learning rate (e.g. `layer_multipliers(...)`).
            Defaults to None (every variable at the scheduled rate).
        **kwargs: `keras.optimizers.AdamW` arguments.
    """

    def __init__(self, weight_decay_exclusions=NO_WEIGHT_DECAY, sparse_embedding_updates=False,
                 learning_rate_multipliers=None, **kwargs):
        super().__init__(**kwargs)
        self.learning_rate_multipliers = {str(pattern): float(factor) for pattern, factor
                                          in (learning_rate_multipliers or {}).items()}
        for pattern, factor in self.learning_rate_multipliers.items():
            re.compile(pattern)  # raises on a bad pattern now, not at the first step
            if factor < 0:
                raise ValueError(f"learning_rate_multipliers[{pattern!r}] must be >= 0, got "
                                 f"{factor}")
        if sparse_embedding_updates and (self.clipnorm or self.clipvalue):
            raise ValueError("sparse_embedding_updates supports global_clipnorm only, got "
                             f"clipnorm={self.clipnorm}, clipvalue={self.clipvalue}")
        if sparse_embedding_updates and (self.use_ema or self.gradient_accumulation_steps):
            raise ValueError("sparse_embedding_updates does not support use_ema or "
                             "gradient_accumulation_steps")
        self.weight_decay_exclusions = tuple(weight_decay_exclusions)
        self.sparse_embedding_updates = sparse_embedding_updates
        self.exclude_from_weight_decay(var_names=list(self.weight_decay_exclusions))
        self._factors = None  # per variable index, set by build

    def learning_rate_factor(self, path):
        """The factor of the variable at `path`: its first matching multiplier, else 1."""
        for pattern, factor in self.learning_rate_multipliers.items():
            if re.search(pattern, path):
                return factor
        return 1.0

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._factors = [self.learning_rate_factor(variable.path) for variable in var_list]

    def _factor(self, variable):
        if not self.learning_rate_multipliers:
            return 1.0
        return self._factors[self._get_variable_index(variable)]

    def update_step(self, gradient, variable, learning_rate):
        factor = self._factor(variable)
        super().update_step(gradient, variable,
                            learning_rate if factor == 1.0 else learning_rate * factor)

    def _apply_weight_decay(self, variables):
        if self.weight_decay is None or not self.learning_rate_multipliers:
            return super()._apply_weight_decay(variables)

        # Keras' TF-backend decay with each variable's own rate (Keras' uses the global one).
        def decay(distribution, variables):
            def decay_one(variable):
                if self._use_weight_decay(variable):
                    lr = tf.cast(self.learning_rate, variable.dtype) * self._factor(variable)
                    variable.assign_sub(
                        variable * tf.cast(self.weight_decay, variable.dtype) * lr)

            for variable in variables:
                distribution.extended.update(_tf_variable(variable), decay_one, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            decay, self._distribution_strategy, variables)

    def _backend_apply_gradients(self, grads, trainable_variables):
        if keras.backend.backend() != "tensorflow":
            return super()._backend_apply_gradients(grads, trainable_variables)
        if not self._fused_update_applies():
            # A word-table gradient is IndexedSlices, one row per token; Keras' Adam squares
            # the rows before summing a repeated token's (a wrong second moment): dense first.
            return super()._backend_apply_gradients(
                [tf.convert_to_tensor(grad) for grad in grads], trainable_variables)
        variables = list(trainable_variables)
        sparse = {}
        if self.sparse_embedding_updates:
            for i, grad in enumerate(grads):
                if isinstance(grad, tf.IndexedSlices):
                    # Keras' Adam would square a repeated row's parts before summing them.
                    rows, position = tf.unique(grad.indices)
                    sparse[i] = (rows, tf.math.unsorted_segment_sum(
                        grad.values, position, num_segments=tf.size(rows)))
        # Any other IndexedSlices (a word table's, with dense updates) is made dense here.
        dense = {i: tf.convert_to_tensor(grad) for i, grad in enumerate(grads)
                 if i not in sparse}
        scale = self._clipping_scale(
            list(dense.values()) + [values for _, values in sparse.values()])
        learning_rate = tf.cast(self.learning_rate, "float32")
        step = tf.cast(self.iterations + 1, "float32")
        beta_1_power, beta_2_power = tf.pow(self.beta_1, step), tf.pow(self.beta_2, step)
        step_sizes = {}  # learning-rate factor -> (rate, alpha), shared by its weights
        signatures = []  # of the fused updates
        for i, variable in enumerate(variables):
            factor = self._factor(variable)
            if factor not in step_sizes:
                rate = learning_rate * factor
                step_sizes[factor] = (rate, rate * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power))
            rate, alpha = step_sizes[factor]
            decayed = self.weight_decay is not None and self._use_weight_decay(variable)
            if i in sparse:
                rows, values = sparse[i]
                self._update_rows(variable, rows, values * tf.cast(scale, values.dtype), rate,
                                  alpha, decayed)
                continue
            index = self._get_variable_index(variable)
            weight = _tf_variable(variable)
            handles = (weight.handle, self._momentums[index].value.handle,
                       self._velocities[index].value.handle)
            signature = fused_adamw.StepSignature(
                tuple(dense[i].shape), weight.dtype, dense[i].dtype, decayed,
                self.weight_decay or 0.0, self.beta_1, self.beta_2, self.epsilon)
            _fused_adamw_step(handles, signature.dtype, dense[i], scale, rate, alpha,
                              decayed=decayed, weight_decay=signature.weight_decay,
                              beta_1=signature.beta_1, beta_2=signature.beta_2,
                              epsilon=signature.epsilon)
            signatures.append(signature)
        if tf.inside_function() and cpu_features.runs_on_cpu():
            # The step's trace ends here: its XLA programs compile on another core while
            # TensorFlow optimises the step's graph (`fused_adamw`). Measured on the CPU only.
            fused_adamw.compile_in_background(s for s in signatures if None not in s.shape)

    def _fused_update_applies(self):
        """Whether `_fused_adamw_step` can do the update: one replica (several update through
        merge_call, which cannot run inside XLA), none of Keras' per-variable clipping, EMA,
        gradient accumulation or AMSGrad (Keras' own update does those)."""
        replicated = tf.distribute.has_strategy() and not isinstance(
            tf.distribute.get_strategy(), tf.distribute.OneDeviceStrategy)
        return not (replicated or self.clipnorm or self.clipvalue or self.use_ema
                    or self.gradient_accumulation_steps or self.amsgrad)

    def _clipping_scale(self, grads):
        """The factor `global_clipnorm` clips every gradient by (1.0 without clipping)."""
        if not self.global_clipnorm:
            return tf.constant(1.0)
        # 2 * l2_loss: the squared norm in one pass, without a squared copy of each gradient;
        # doubled once after the sum (exact: a power of two), not once per gradient.
        norm = tf.sqrt(2.0 * tf.add_n([tf.nn.l2_loss(tf.cast(g, "float32")) for g in grads]))
        # As keras' clip_by_global_norm: NaN for a non-finite norm.
        scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
        return scale + (norm - norm)

    def _update_rows(self, variable, rows, grad, rate, alpha, decayed):
        """Keras' AdamW `update_step` (decay first, then Adam) on `rows` of `variable` alone,
        at learning rate `rate` and Adam step size `alpha`."""
        value = _tf_variable(variable)
        dtype = value.dtype
        grad = tf.cast(grad, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index].value, self._velocities[index].value
        weights = tf.gather(value, rows)
        if decayed:
            weights -= weights * tf.cast(self.weight_decay, dtype) * tf.cast(rate, dtype)
        m_rows = tf.gather(m, rows)
        m_rows += (grad - m_rows) * (1 - self.beta_1)
        v_rows = tf.gather(v, rows)
        v_rows += (tf.square(grad) - v_rows) * (1 - self.beta_2)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        value.scatter_update(tf.IndexedSlices(
            weights - m_rows * tf.cast(alpha, dtype) / (tf.sqrt(v_rows) + self.epsilon), rows))

    def get_config(self):
        config = super().get_config()
        config["weight_decay_exclusions"] = list(self.weight_decay_exclusions)
        config["sparse_embedding_updates"] = self.sparse_embedding_updates
        config["learning_rate_multipliers"] = dict(self.learning_rate_multipliers)
        return config


def layer_multipliers(embeddings, transformer_layers, head_layers=(), head_multiplier=1.0,
                      layerwise_decay=None):
    """`AdamW(learning_rate_multipliers=...)` for a task head's rate and layer-wise decay.

    Layer-wise decay is ELECTRA's fine-tuning (model/optimization.py `_get_layer_lrs`): depth 0
    for the embeddings, i + 1 for transformer layer i, L + 2 for the task head, and the rate
    lr × decay^(L + 2 - depth). So the embeddings learn at decay^(L + 2), layer i at
    decay^(L + 1 - i) (the top one at decay^2: ELECTRA leaves depth L + 1 empty) and the head
    at the full rate. ELECTRA has no pooler; BERT's learns at the full rate, as the head.

    Args:
        embeddings: str. The embeddings layer's name.
        transformer_layers: sequence of str. The transformer layers' names, input first.
        head_layers: sequence of str. The task head's layer names (e.g. "logits", "crf").
        head_multiplier: float. The head's factor (× the decay's 1). Defaults to 1.
        layerwise_decay: float in (0, 1] or None. Defaults to None (no decay).

    Returns:
        dict of path pattern -> factor; factors of 1 are left out.
    """
    if layerwise_decay is not None and not 0 < layerwise_decay <= 1:
        raise ValueError(f"layerwise_decay must be in (0, 1], got {layerwise_decay}")
    if head_multiplier <= 0:
        raise ValueError(f"head_multiplier must be > 0, got {head_multiplier}")
    pattern = lambda name: f"(^|/){re.escape(name)}/"  # noqa: E731
    factors = {pattern(name): head_multiplier for name in head_layers}
    if layerwise_decay is not None:
        depth_of_head = len(transformer_layers) + 2
        factors[pattern(embeddings)] = layerwise_decay ** depth_of_head
        for i, name in enumerate(transformer_layers):
            factors[pattern(name)] = layerwise_decay ** (depth_of_head - (i + 1))
    return {key: factor for key, factor in factors.items() if factor != 1.0}


def create_optimizer(learning_rate, num_train_steps, num_warmup_steps, weight_decay=0.01,
                     global_clipnorm=1.0, sparse_embedding_updates=False,
                     learning_rate_multipliers=None) -> "AdamW":
    """The BERT optimizer, as Google's optimization.py `create_optimizer`.

    Args:
        learning_rate: float. Peak learning rate (e.g. 2e-5 to 5e-5 to fine-tune).
        num_train_steps: int. Total optimizer steps; the rate reaches 0 there.
        num_warmup_steps: int. Linear warm-up steps (Google: 10% of `num_train_steps`).
        weight_decay: float. Decoupled weight decay, not applied to LayerNorm weights and
            biases. Defaults to 0.01.
        global_clipnorm: float. Clip gradients to this global norm, as Google (1.0).
        sparse_embedding_updates: bool. Update only the embedding rows a batch used (lazy
            AdamW; see `AdamW`) instead of the whole table. Defaults to False (exact AdamW).
        learning_rate_multipliers: dict of path pattern -> factor (see `AdamW` and
            `layer_multipliers`). Defaults to None (one rate for all).

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
                 epsilon=1e-6, global_clipnorm=global_clipnorm,
                 sparse_embedding_updates=sparse_embedding_updates,
                 learning_rate_multipliers=learning_rate_multipliers)
