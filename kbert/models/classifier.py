"""BertClassifier: the encoder's pooled output, dropout and a dense layer, for GLUE-style tasks."""

import keras

from kbert import checkpoints
from kbert.models.encoder import BertEncoder
from kbert.models.encoder import input_names
from kbert.models.task_model import TaskModel


@keras.saving.register_keras_serializable(package="kbert")
class BertClassifier(TaskModel):
    """Sequence classification (or regression) on BERT's pooled output.

    As Google's run_classifier.py `create_model`: dropout on the pooled `[CLS]` vector, then a
    dense layer (truncated-normal 0.02 kernel, zero bias). `num_classes=1` makes it a
    regression head (STS-B), whose `compile` default loss is mean squared error.

    Args:
        encoder: `kbert.BertEncoder`.
        num_classes: int. Number of classes; 1 for regression.
        dropout: float. Dropout on the pooled output. Defaults to 0.1.
        dtype: dtype or `keras.DTypePolicy`. Defaults to the encoder's policy.

    Inputs (dict of int32 [batch, seq]): token_ids, segment_ids, padding_mask. On a `packed`
        encoder, also its position_ids and example_ids, and cls_positions [batch, examples]:
        where each example of a row starts (see `kbert.data.packing`).

    Outputs:
        [batch, num_classes] float32 logits (or regression scores for `num_classes=1`);
        [batch, examples, num_classes] on a packed encoder, one row per example slot.

    Example:
    ```python
    classifier = kbert.BertClassifier.from_google_checkpoint(
        "uncased_L-12_H-768_A-12", num_classes=2)
    classifier.compile(optimizer=kbert.create_optimizer(2e-5, steps, steps // 10))
    classifier.fit(train_ds, epochs=3)
    logits = classifier.predict(preprocessor(["a gripping, funny film"]))
    ```
    """

    def __init__(self, encoder, num_classes, dropout=0.1, dtype=None, **kwargs):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1 (1 = regression), got {num_classes}")
        dtype = dtype or encoder.dtype_policy

        # === Layers ===
        self.encoder = encoder
        self.output_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype=dtype, name="logits")

        # === Functional graph ===
        names = input_names(encoder.packed) + (
            ("cls_positions",) if encoder.packed else ())
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in names}
        pooled = encoder.pooled_output(inputs, inputs.get("cls_positions"))
        # Logits in float32 under mixed precision, so the loss is computed in full precision.
        logits = keras.layers.Activation("linear", dtype="float32", name="output")(
            self.output_dense(self.output_dropout(pooled)))
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout

    @property
    def bert_config(self):
        """The encoder's hyper-parameters as a `kbert.BertConfig`."""
        return self.encoder.bert_config

    @property
    def is_regression(self):
        return self.num_classes == 1

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`keras.Model.compile` with defaults for this head.

        Args:
            optimizer: a Keras optimizer; "auto" is Adam at 5e-5 (for fine-tuning prefer
                `kbert.create_optimizer`, BERT's AdamW with warm-up and decay).
            loss: "auto" is sparse categorical cross-entropy on logits, or mean squared error
                for regression.
            metrics: "auto" is sparse categorical accuracy, or none for regression.
            **kwargs: passed to `keras.Model.compile` (e.g. `jit_compile`).
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(5e-5)
        if loss == "auto":
            loss = (keras.losses.MeanSquaredError() if self.is_regression
                    else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if metrics == "auto":
            metrics = [] if self.is_regression else [
                keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        # Keras skips restoring the compile state of a model that overrides `compile`; the
        # saved config holds the resolved optimizer, loss and metrics, so compile with them.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @classmethod
    def from_google_checkpoint(cls, path, num_classes, config=None, dropout=0.1,
                               **kwargs) -> "BertClassifier":
        """Builds the classifier on an encoder loaded from a Google checkpoint.

        A pretrained release gives a fresh head. A checkpoint written by Google's
        run_classifier.py also restores its head (`output_weights`, `output_bias`) when their
        shape matches `num_classes`.

        Args:
            path: str. Release directory, training directory or checkpoint prefix.
            num_classes: int. Number of classes; 1 for regression.
            config: `BertConfig` or path of a `bert_config.json`. Defaults to the one beside
                the checkpoint.
            dropout: float. Dropout on the pooled output. Defaults to 0.1.
            **kwargs: passed to `BertEncoder` (e.g. `dtype`).
        """
        source = checkpoints.GoogleCheckpoint.open(path, config)
        model = cls(BertEncoder(**source.config.encoder_kwargs(), **kwargs), num_classes,
                    dropout=dropout)
        checkpoints.load_google_weights(model, source, new_head=True)
        return model

    def get_config(self):
        config = super().get_config()
        config.update({
            "encoder": keras.layers.serialize(self.encoder),
            "num_classes": self.num_classes,
            "dropout": self.dropout,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)
