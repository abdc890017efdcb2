"""BertSpanLabeler: start and end logits over the context tokens, for SQuAD."""

import keras

from kbert.models.task import BertTask

MASKED_LOGIT = -1e9  # exp() of it is exactly 0 in float32; finite, so a loss never sees inf
_OUTPUTS = ("start_logits", "end_logits")  # the model's output names, each its own loss


@keras.saving.register_keras_serializable(package="kbert")
class ContextMask(keras.layers.Layer):
    """Keeps the span logits of context tokens and sets the others to `MASKED_LOGIT`.

    The context of a `[CLS] question [SEP] context [SEP]` window is the segment-1 tokens
    before the last real token (the final [SEP]). With `allow_null`, [CLS] (position 0) is
    kept too: SQuAD 2.0's "no answer".

    Args:
        allow_null: bool. Keep position 0. Defaults to False.

    Call args:
        logits: float [batch, seq, 2].
        segment_ids: int [batch, seq].
        padding_mask: int [batch, seq].

    Returns:
        (start_logits, end_logits), float32 [batch, seq] each.
    """

    def __init__(self, allow_null=False, **kwargs):
        super().__init__(**kwargs)
        self.allow_null = allow_null

    def call(self, logits, segment_ids, padding_mask):
        ops = keras.ops
        position = ops.arange(ops.shape(padding_mask)[1])[None, :]
        last = ops.sum(ops.cast(padding_mask, "int32"), axis=1, keepdims=True) - 1
        keep = (segment_ids == 1) & (padding_mask == 1) & (position != last)
        if self.allow_null:
            keep = keep | (position == 0)
        logits = ops.cast(logits, "float32")
        masked = ops.where(keep[..., None], logits, ops.full_like(logits, MASKED_LOGIT))
        return masked[..., 0], masked[..., 1]

    def compute_output_spec(self, logits, segment_ids, padding_mask):
        shape = logits.shape[:-1]
        return keras.KerasTensor(shape, "float32"), keras.KerasTensor(shape, "float32")

    def get_config(self):
        config = super().get_config()
        config["allow_null"] = self.allow_null
        return config


@keras.saving.register_keras_serializable(package="kbert")
class BertSpanLabeler(BertTask):
    """Extractive question answering: a start and an end logit per token.

    As Google's run_squad.py `create_model`: one dense layer with two outputs on the
    sequence output (truncated-normal 0.02 kernel, zero bias, no dropout). Unlike Google's,
    the logits of tokens that cannot start or end an answer (question, [SEP], padding; and
    [CLS] unless `allow_null`) are set to -1e9, so the softmax and the cross-entropy run over
    the context only. The encoder's pooler, which the head does not use, is frozen.

    Args:
        encoder: `kbert.BertEncoder`.
        allow_null: bool. [CLS] is a valid answer, meaning "no answer" (SQuAD 2.0). Defaults
            to False.
        dtype: dtype or `keras.DTypePolicy`. Defaults to the encoder's policy.

    Inputs (dict of int32 [batch, seq]): token_ids, segment_ids, padding_mask, packed as
        `[CLS] question [SEP] context [SEP]`.

    Outputs (dict of float32 [batch, seq]): start_logits, end_logits.

    Example:
    ```python
    model = kbert.BertSpanLabeler.from_google_checkpoint("uncased_L-12_H-768_A-12")
    model.compile(optimizer=kbert.create_optimizer(5e-5, steps, steps // 10))
    model.fit(features.inputs(), {"start_logits": features.start_positions,
                                  "end_logits": features.end_positions}, batch_size=32)
    ```
    """

    CONFIG_KEYS = ("allow_null",)

    def __init__(self, encoder, allow_null=False, dtype=None, **kwargs):
        dtype = dtype or encoder.dtype_policy

        # === Layers ===
        self.encoder = encoder
        # The head never reads the pooled output: freeze the pooler rather than have every
        # optimizer step warn that it has no gradient (Google's pooler also stays as loaded).
        encoder.pooler.trainable = False
        self.span_head = keras.layers.Dense(
            2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype=dtype, name="span_head")
        self.context_mask = ContextMask(allow_null, dtype=dtype, name="context_mask")

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ("token_ids", "segment_ids", "padding_mask")}
        logits = self.span_head(encoder(inputs)["sequence_output"])
        start, end = self.context_mask(logits, inputs["segment_ids"], inputs["padding_mask"])
        outputs = {"start_logits": start, "end_logits": end}
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.allow_null = allow_null

    def default_loss(self):
        """The loss of `compile(loss="auto")`.

        Google's: the mean of the start and end cross-entropies (sparse labels, positions
        into seq; targets keyed "start_logits", "end_logits"), through `compile`'s default
        `loss_weights`.
        """
        return {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                for name in _OUTPUTS}

    def default_metrics(self):
        """The metrics of `compile(metrics="auto")`.

        Sparse categorical accuracy of start and of end.
        """
        return {name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                for name in _OUTPUTS}

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`BertTask.compile`; `loss="auto"` also weighs start and end 0.5 each (a mean)."""
        if loss == "auto":
            kwargs.setdefault("loss_weights", dict.fromkeys(_OUTPUTS, 0.5))
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    @classmethod
    def from_google_checkpoint(cls, path, allow_null=False, config=None,
                               **kwargs) -> "BertSpanLabeler":
        """Builds the span labeler on an encoder loaded from a Google checkpoint.

        A pretrained release gives a fresh head; a checkpoint written by Google's
        run_squad.py also restores its head (`cls/squad/output_weights` [2, hidden],
        `cls/squad/output_bias` [2]).

        Args:
            path: str. Release directory, training directory or checkpoint prefix; or
                an open `GoogleCheckpoint` (any format: `kbert.models.opening`).
            allow_null: bool. [CLS] means "no answer" (SQuAD 2.0). Defaults to False.
            config: `BertConfig` or path of a `bert_config.json`. Defaults to the one beside
                the checkpoint.
            **kwargs: passed to `BertEncoder` (e.g. `dtype`).
        """
        return cls._from_google_checkpoint(path, config, kwargs, allow_null=allow_null)
