"""BertTask: what every kbert head on a `BertEncoder` shares, as keras-hub's `Task`."""

import contextlib
import functools

import keras
import tensorflow as tf
from keras.src import backend as keras_backend

from kbert import checkpoints
from kbert import cpu_features
from kbert import graph_passes
from kbert.models import shared_reads
from kbert.models.encoder import BertEncoder

DEFAULT_LEARNING_RATE = 5e-5  # compile's "auto" Adam: run_classifier.py's --learning_rate default


class BertTask(keras.Model):
    """Base of kbert's heads: an `encoder` (`kbert.BertEncoder`) inside a functional model.

    A subclass sets `self.encoder` and its layers, builds the graph, calls
    `super().__init__(inputs=..., outputs=..., dtype=..., **kwargs)`, then sets one attribute
    per name of `CONFIG_KEYS`: its constructor arguments besides `encoder` and `dtype`. The
    base saves and restores the encoder and those arguments (`get_config`, `from_config`),
    gives `compile` its "auto" defaults (the subclass supplies `default_loss` and
    `default_metrics`), and builds the optimizer, loss and metrics before `fit` (or
    `evaluate`) traces its step, so the step is traced once; on the CPU the train step's
    graph is optimised with fewer Grappler passes than TensorFlow's default
    (`kbert.graph_passes`). The subclass's `from_google_checkpoint` declares its own
    arguments and calls `_from_google_checkpoint`; `from_preset` is the same by release name.

    `batch_parts` (default 1) splits every batch of `fit`, `evaluate` and `predict` by rows
    into that many parts, run through the model side by side and joined before the loss
    and metrics, which see the whole batch as before: the same step, its independent halves
    free to run on two cores at once. On a 2-core CPU TensorFlow's matmuls at fine-tuning
    sizes barely use the second core, so with its intra-op pool at one thread
    (`tf.config.threading.set_intra_op_parallelism_threads(1)` before the first op, as the
    recipes' `cpu_batch_parts` does) two parts keep both cores on the matmuls (BENCHMARKS.md,
    "Two halves of each batch at once"). It is skipped under XLA (`jit_compile`, where the
    whole step is one compiled program) and with several replicas (not measured there).
    """

    CONFIG_KEYS = ()  # constructor arguments, besides encoder and dtype, saved in the config

    _batch_parts = 1  # the setting (`batch_parts`)
    _parts_now = 1  # while a step is traced: the parts its call of the model splits into

    @property
    def batch_parts(self):
        """int. Parts each batch of `fit`, `evaluate` and `predict` runs as (see above)."""
        return self._batch_parts

    @batch_parts.setter
    def batch_parts(self, parts):
        if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
            raise ValueError(f"batch_parts must be a whole number >= 1, got {parts!r}")
        if parts != self._batch_parts:
            self._batch_parts = parts
            # The step functions Keras made are traced for the old setting: make them again.
            self.train_function = self.test_function = self.predict_function = None

    def train_step(self, data):
        with self._split_calls():
            return super().train_step(data)

    def test_step(self, data):
        with self._split_calls():
            return super().test_step(data)

    def predict_step(self, data):
        with self._split_calls():
            return super().predict_step(data)

    @contextlib.contextmanager
    def _split_calls(self):
        """While a step is traced, its call of the model splits the batch (`batch_parts`)."""
        if (self._batch_parts > 1 and not self.jit_compile
                and self.distribute_strategy.num_replicas_in_sync == 1):
            self._parts_now = self._batch_parts
        try:
            yield
        finally:
            self._parts_now = 1

    def __call__(self, inputs, *args, **kwargs):
        parts = self._parts_now
        if parts == 1:
            return super().__call__(inputs, *args, **kwargs)
        self._parts_now = 1  # the parts' own calls go straight to the model
        try:
            return self._call_in_parts(inputs, parts, *args, **kwargs)
        finally:
            self._parts_now = parts

    def _call_in_parts(self, inputs, parts, *args, **kwargs):
        """The model's outputs on `inputs`, computed as `parts` row blocks side by side.

        By hand: neither Keras nor TensorFlow runs one batch as concurrent parts on one
        device. In a traced step the parts go through one `tf.function` (traced once, called
        per part), so the step's graph and its tracing time grow by a call, not by a copy of
        the model (MiniLM's first `fit` step: 5.5 s against 5.9-6.2 s with a copy per part,
        and 3.9-4.0 s unsplit; BENCHMARKS.md). A part may be empty
        (a batch of fewer rows than parts): the model takes 0 rows.
        """
        flat = tf.nest.flatten(inputs)
        rows = tf.shape(flat[0])[0]
        sizes = tf.stack([(rows + parts - 1 - i) // parts for i in range(parts)])
        pieces = [tf.split(tensor, sizes, num=parts) for tensor in flat]

        def call(part):
            return super(BertTask, self).__call__(part, *args, **kwargs)

        if tf.inside_function():  # a traced step; eagerly (`run_eagerly`) each part just runs
            call = tf.function(call, autograph=False)
        with shared_reads.one_read_per_weight():  # under mixed precision: one cast per weight
            outputs = [call(tf.nest.pack_sequence_as(inputs, [piece[i] for piece in pieces]))
                       for i in range(parts)]
        return tf.nest.map_structure(lambda *blocks: tf.concat(blocks, axis=0), *outputs)

    @property
    def bert_config(self):
        """The encoder's hyper-parameters as a `kbert.BertConfig`."""
        return self.encoder.bert_config

    def default_loss(self):
        """The loss of `compile(loss="auto")`; None (no loss) unless the head has one."""
        return None

    def default_metrics(self):
        """The metrics of `compile(metrics="auto")`; None unless the head has some."""
        return None

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`keras.Model.compile` with defaults for this head.

        Args:
            optimizer: a Keras optimizer; "auto" is Adam at 5e-5 (to fine-tune prefer
                `kbert.create_optimizer`, BERT's AdamW with warm-up and decay).
            loss: "auto" is the head's `default_loss()`.
            metrics: "auto" is the head's `default_metrics()`.
            **kwargs: passed to `keras.Model.compile` (e.g. `jit_compile`).
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(DEFAULT_LEARNING_RATE)
        if loss == "auto":
            loss = self.default_loss()
        if metrics == "auto":
            metrics = self.default_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        # Keras skips restoring the compile state of a model that overrides `compile`; the
        # saved config holds the resolved optimizer, loss and metrics, so compile with them.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def fit(self, x=None, *args, **kwargs):
        # Without a distribution strategy Keras builds the optimizer, and the compiled loss
        # and metrics, inside the first trace of the train step, and TensorFlow then traces
        # the whole step a second time because that trace created variables: ~12 s more at
        # the start of every `fit` of a MiniLM classifier on 2 CPU cores for the optimizer
        # (BENCHMARKS.md, "The AdamW update compiled per weight shape"); for a metric given by
        # name, 1.3 s more (BENCHMARKS.md, "The first `fit` outside a strategy"). Under a
        # strategy Keras builds them first, as here.
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
        self._build_compiled_state(x)
        # Keras ignores `shuffle` for a dataset and warns that it does when it is left at its
        # default (True): a warning in every such `fit` otherwise. (`shuffle` is the eighth
        # argument after `x`.)
        if isinstance(x, tf.data.Dataset) and len(args) < 8 and "shuffle" not in kwargs:
            kwargs["shuffle"] = False
        return super().fit(x, *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        self._build_compiled_state(x)  # as in `fit`: one trace of the test step, not two
        return super().evaluate(x, *args, **kwargs)

    def make_train_function(self, force=False):
        # On the CPU, the train step's graph is optimised in one Grappler pass, without the
        # optimisers that change nothing in it, and in bfloat16 on AMX without the bias
        # fusion that keeps its products off AMX (`kbert.graph_passes`). Not the test and
        # predict steps: there the second pass fuses the feed-forward GELU into its matmul.
        made = self.train_function
        super().make_train_function(force)
        function = self.train_function  # (Keras returns it only when it was made before)
        if function is made or not cpu_features.runs_on_cpu():
            return function

        remapper = not (self.dtype_policy.compute_dtype == "bfloat16"
                        and cpu_features.has_amx_bfloat16())

        @functools.wraps(function)
        def train_function(iterator):
            with graph_passes.training_step_passes(remapper=remapper):
                return function(iterator)

        self.train_function = train_function
        return train_function

    def _build_compiled_state(self, x):
        """Builds the compiled loss and metrics from a dataset's element spec before the
        first trace, in the model's strategy's scope. Keras' `fit` builds them there itself
        under a strategy (its `_symbolic_build`, finding them built, then traces nothing),
        and without one inside the first trace, which TensorFlow then traces again. Other
        inputs are left to Keras.

        Keras' `_symbolic_build` gets the outputs to build them on by tracing the model's
        `call` in a scratch graph; a kbert model is a functional graph, which gives its
        outputs' spec by walking the graph (`compute_output_spec`), so only the loss and
        metrics are traced here: 0.02 s instead of 0.6-0.85 s for a MiniLM classifier
        (BENCHMARKS.md, AMD AVX-512 VM).
        """
        if not isinstance(x, tf.data.Dataset):
            return
        with self.distribute_strategy.scope():
            specs = tf.nest.flatten(x.element_spec)
            if not all(isinstance(spec, tf.TensorSpec) for spec in specs):
                self._symbolic_build(data_batch=x.element_spec)  # ragged or sparse: Keras'
                return
            batch = tf.nest.map_structure(
                lambda spec: keras.KerasTensor(spec.shape, keras.backend.standardize_dtype(
                    spec.dtype)), x.element_spec)
            inputs, y, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
            y_pred = self.compute_output_spec(inputs)
            if self._compile_metrics is not None and not self._compile_metrics.built:
                keras_backend.compute_output_spec(self.compute_metrics, inputs, y, y_pred,
                                                  sample_weight=sample_weight)
            if self._compile_loss is not None and not self._compile_loss.built:
                keras_backend.compute_output_spec(self._compute_loss, inputs, y, y_pred,
                                                  sample_weight=sample_weight, training=False)

    @classmethod
    def _from_google_checkpoint(cls, path, config, encoder_kwargs, new_head=True,
                                **head_kwargs):
        """The body of a head's `from_google_checkpoint`.

        Args:
            path: str. Release directory, training directory, checkpoint prefix or the name
                of a release (`kbert.list_presets()`); or a `GoogleCheckpoint` already open
                (`kbert.models.opening.open_model(...).google_checkpoint()`: any format).
            config: `BertConfig`, path of a `bert_config.json`, or None for the one beside
                the checkpoint (an open checkpoint has its own).
            encoder_kwargs: dict. Passed to `BertEncoder` (e.g. `dtype`).
            new_head: bool. A checkpoint without the head's tensors leaves the head new.
            **head_kwargs: passed to the head's constructor.
        """
        source = checkpoints.GoogleCheckpoint.opened(path, config)
        model = cls(BertEncoder(**source.config.encoder_kwargs(), **encoder_kwargs),
                    **head_kwargs)
        model._load_google_weights(source, new_head)
        return model

    def _load_google_weights(self, source, new_head):
        checkpoints.load_google_weights(self, source, new_head=new_head)

    @classmethod
    def from_preset(cls, name_or_path, **kwargs):
        """`from_google_checkpoint` on one of Google's releases by name (or any path).

        Args:
            name_or_path: str. A name of `kbert.list_presets()`, e.g.
                "uncased_L-12_H-768_A-12", downloaded once into `$KBERT_HOME`; or a path.
            **kwargs: passed to the head's `from_google_checkpoint`: its own arguments (e.g.
                `num_classes`) and the encoder's (e.g. `dtype`).

        Example:
        ```python
        classifier = kbert.BertClassifier.from_preset("uncased_L-12_H-768_A-12",
                                                      num_classes=2)
        ```
        """
        return cls.from_google_checkpoint(name_or_path, **kwargs)

    def get_config(self):
        # The init arguments only, not the functional graph, so `from_config` is `cls(**config)`.
        config = super().get_config()
        config["encoder"] = keras.layers.serialize(self.encoder)
        config.update({key: getattr(self, key) for key in self.CONFIG_KEYS})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)
