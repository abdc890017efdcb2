"""BertClassifier: the encoder's pooled output, dropout and a dense layer, for GLUE-style tasks
and multi-label classification."""

import keras
import numpy as np

from kbert.models.encoder import input_names
from kbert.models.task import BertTask


@keras.saving.register_keras_serializable(package="kbert")
class BertClassifier(BertTask):
    """Sequence classification (or regression) on BERT's pooled output.

    As Google's run_classifier.py `create_model`: dropout on the pooled `[CLS]` vector, then a
    dense layer (truncated-normal 0.02 kernel, zero bias). `num_classes=1` makes it a
    regression head (STS-B), whose `compile` default loss is mean squared error.
    `multi_label=True` makes each output an independent yes/no logit (any number of labels
    per example, sigmoid rather than softmax), trained with binary cross-entropy; one label
    (`num_classes=1`) is then a binary classifier, not a regression.

    Args:
        encoder: `kbert.BertEncoder`.
        num_classes: int. Number of classes (labels, with `multi_label`); 1 for regression.
        dropout: float. Dropout on the pooled output. Defaults to 0.1.
        dtype: dtype or `keras.DTypePolicy`. Defaults to the encoder's policy.
        multi_label: bool. One logit per label, each its own binary decision. Defaults to
            False.

    Inputs (dict of int32 [batch, seq]): token_ids, segment_ids, padding_mask. On a `packed`
        encoder, also its position_ids and example_ids, and cls_positions [batch, examples]:
        where each example of a row starts (see `kbert.data.packing`).

    Outputs:
        [batch, num_classes] float32 logits (or regression scores for `num_classes=1`
        without `multi_label`);
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

    CONFIG_KEYS = ("num_classes", "dropout", "multi_label")

    def __init__(self, encoder, num_classes, dropout=0.1, dtype=None, multi_label=False,
                 **kwargs):
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
        self.multi_label = multi_label

    @property
    def is_regression(self):
        return self.num_classes == 1 and not self.multi_label

    def start_at_label_shares(self, shares):
        """Sets a multi-label head's bias to each label's log-odds, log(p / (1 - p)), where
        `shares` [num_classes] is the fraction of training examples with the label.

        A fresh head starts every label at p = 0.5; AdamW moves a bias by about the learning
        rate a step, so a rare label's bias needs thousands of steps to reach its prior
        (~-4) and the first epochs learn little else (the prior init of RetinaNet's focal loss
        paper, Lin et al. 2017).
        """
        shares = np.clip(np.asarray(shares, np.float64), 1e-4, 1 - 1e-4)
        self.output_dense.bias.assign(np.log(shares / (1 - shares)).astype("float32"))

    def default_loss(self):
        """The loss of `compile(loss="auto")`.

        Sparse categorical cross-entropy on logits; binary cross-entropy on logits for
        `multi_label` (float 0/1 targets [batch, labels]); mean squared error for regression.
        """
        if self.multi_label:
            return keras.losses.BinaryCrossentropy(from_logits=True)
        if self.is_regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        """The metrics of `compile(metrics="auto")`.

        Sparse categorical accuracy; binary accuracy (the fraction of label decisions right,
        at probability 0.5) for `multi_label`; none for regression.
        """
        if self.multi_label:
            # BinaryAccuracy compares its input with `threshold` (y_pred > threshold); on
            # logits 0 is probability 0.5.
            return [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)]
        return [] if self.is_regression else [
            keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    @classmethod
    def from_google_checkpoint(cls, path, num_classes, config=None, dropout=0.1,
                               multi_label=False, **kwargs) -> "BertClassifier":
        """Builds the classifier on an encoder loaded from a Google checkpoint.

        A pretrained release gives a fresh head. A checkpoint written by Google's
        run_classifier.py also restores its head (`output_weights`, `output_bias`) when their
        shape matches `num_classes`.

        Args:
            path: str. Release directory, training directory or checkpoint prefix; or
                an open `GoogleCheckpoint` (any format: `kbert.models.opening`).
            num_classes: int. Number of classes; 1 for regression.
            config: `BertConfig` or path of a `bert_config.json`. Defaults to the one beside
                the checkpoint.
            dropout: float. Dropout on the pooled output. Defaults to 0.1.
            multi_label: bool. See the class. Defaults to False.
            **kwargs: passed to `BertEncoder` (e.g. `dtype`).
        """
        return cls._from_google_checkpoint(path, config, kwargs, num_classes=num_classes,
                                           dropout=dropout, multi_label=multi_label)
