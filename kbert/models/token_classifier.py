"""BertTokenClassifier: a label score per word-piece, for NER; optionally with a CRF."""

import keras

from kbert.layers.crf import CRF
from kbert.models.task import BertTask


@keras.saving.register_keras_serializable(package="kbert")
class BertTokenClassifier(BertTask):
    """Token classification (NER) on BERT's sequence output.

    Dropout, then a dense layer (truncated-normal 0.02 kernel, zero bias) on every position
    of the sequence output. Without a CRF, the outputs are per-piece logits and `compile`'s
    default loss is sparse cross-entropy averaged over the positions whose sample weight is
    nonzero (pass the label weights of `kbert.data.conll` as sample weights: 1 on the first
    piece of each word). With `use_crf`, the same outputs are the unary potentials of a
    linear-chain `kbert.layers.crf.CRF` over those positions: the loss is its negative
    log-likelihood (summed over each window's chain, averaged over the weighted positions),
    and `decode` runs Viterbi. The encoder's pooler, which the head does not use, is frozen.

    Args:
        encoder: `kbert.BertEncoder`.
        num_labels: int. Number of labels.
        use_crf: bool. Add a CRF output layer. Defaults to False.
        dropout: float. Dropout on the sequence output. Defaults to 0.1.
        dtype: dtype or `keras.DTypePolicy`. Defaults to the encoder's policy.

    Inputs (dict of int32 [batch, seq]): token_ids, segment_ids, padding_mask.

    Outputs:
        float32 [batch, seq, num_labels]: logits, or CRF unary potentials.

    Example:
    ```python
    tagger = kbert.BertTokenClassifier.from_google_checkpoint(
        "cased_L-12_H-768_A-12", num_labels=9, use_crf=True)
    tagger.compile(optimizer=kbert.create_optimizer(5e-5, steps, steps // 10))
    tagger.fit(train_ds, epochs=3)  # (inputs, label_ids, label_weights) batches
    label_ids = tagger.decode(tagger.predict_on_batch(inputs), label_weights)
    ```
    """

    CONFIG_KEYS = ("num_labels", "use_crf", "dropout")

    def __init__(self, encoder, num_labels, use_crf=False, dropout=0.1, dtype=None, **kwargs):
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        dtype = dtype or encoder.dtype_policy

        # === Layers ===
        self.encoder = encoder
        # The head never reads the pooled output: freeze the pooler rather than have every
        # optimizer step warn that it has no gradient.
        encoder.pooler.trainable = False
        self.output_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_labels, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype=dtype, name="logits")
        self.crf = CRF(num_labels, dtype="float32", name="crf") if use_crf else None

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ("token_ids", "segment_ids", "padding_mask")}
        sequence = encoder(inputs)["sequence_output"]
        logits = self.output_dense(self.output_dropout(sequence))
        # Float32 under mixed precision, so the loss is computed in full precision.
        if use_crf:
            outputs = self.crf(logits)
        else:
            outputs = keras.layers.Activation("linear", dtype="float32", name="output")(logits)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.num_labels = num_labels
        self.use_crf = use_crf
        self.dropout = dropout

    def default_loss(self):
        """The loss of `compile(loss="auto")`.

        Sparse categorical cross-entropy on the logits, averaged over the sample weights
        (`reduction="mean_with_sample_weight"`); None with a CRF, whose loss is always its
        own (see `compute_loss`).
        """
        if self.use_crf:
            return None
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")

    def default_metrics(self):
        """The metrics of `compile(metrics="auto")`.

        Sparse categorical accuracy of the per-position argmax, weighted by the sample
        weights (word accuracy, for label weights).
        """
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`BertTask.compile`; with a CRF, `loss` must be "auto" or None."""
        if self.use_crf and loss not in ("auto", None):
            raise ValueError("a CRF tagger trains on the CRF negative log-likelihood; "
                             f"compile it with loss='auto' or None, not {loss!r}")
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss; with a CRF, its negative log-likelihood.

        The CRF loss is the sum over the batch of each window's negative log-likelihood over
        the positions with a nonzero sample weight (all unpadded positions without sample
        weights), divided by the number of those positions, plus any layer losses.
        """
        if not self.use_crf:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        mask = sample_weight if sample_weight is not None else x["padding_mask"]
        mask = keras.ops.cast(keras.ops.not_equal(mask, 0), "float32")
        nll = -keras.ops.sum(self.crf.log_likelihood(y_pred, y, mask))
        loss = nll / keras.ops.maximum(keras.ops.sum(mask), 1.0)
        for extra in self.losses:
            loss = loss + keras.ops.cast(extra, "float32")
        return loss

    def decode(self, outputs, mask):
        """Label ids from the model's outputs: argmax, or Viterbi with a CRF.

        Args:
            outputs: float [batch, seq, num_labels]. The model's outputs.
            mask: [batch, seq], nonzero at the scored positions (the first piece of each
                word). The CRF chains these positions; argmax ignores the mask.

        Returns:
            int32 [batch, seq]. Read at the masked positions only.
        """
        if self.use_crf:
            return self.crf.decode(outputs, mask)
        return keras.ops.cast(keras.ops.argmax(outputs, axis=-1), "int32")

    @classmethod
    def from_google_checkpoint(cls, path, num_labels, use_crf=False, config=None, dropout=0.1,
                               **kwargs) -> "BertTokenClassifier":
        """Builds the tagger on an encoder loaded from a Google checkpoint.

        A pretrained release gives a fresh head; a checkpoint that kbert wrote for a tagger
        also restores its head (`cls/ner/*`, see `kbert.checkpoints.tf1_names`).

        Args:
            path: str. Release directory, training directory or checkpoint prefix; or
                an open `GoogleCheckpoint` (any format: `kbert.models.opening`).
            num_labels: int. Number of labels.
            use_crf: bool. Add a CRF output layer. Defaults to False.
            config: `BertConfig` or path of a `bert_config.json`. Defaults to the one beside
                the checkpoint.
            dropout: float. Dropout on the sequence output. Defaults to 0.1.
            **kwargs: passed to `BertEncoder` (e.g. `dtype`).
        """
        return cls._from_google_checkpoint(path, config, kwargs, num_labels=num_labels,
                                           use_crf=use_crf, dropout=dropout)
