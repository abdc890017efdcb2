"""BertPretrainer: the encoder plus Google's masked-LM and next-sentence heads."""

import keras
import keras_nlp
from absl import logging

from kbert import checkpoints
from kbert.layers.embeddings import LAYER_NORM_EPSILON
from kbert.layers.transformer import get_activation
from kbert.models.task import BertTask


@keras.saving.register_keras_serializable(package="kbert")
class BertPretrainer(BertTask):
    """BERT with the pretraining heads of Google's run_pretraining.py.

    The masked-LM head is dense + `hidden_act` + LayerNorm, then the word-embedding table
    (tied, not copied) plus an output bias; the next-sentence head is a dense layer with two
    outputs on the pooled output (label 1 = random next sentence, as Google; for ALBERT's
    sentence-order prediction the same head, label 1 = swapped order).

    Args:
        encoder: `kbert.BertEncoder`. Its word table becomes the MLM output kernel.
        sentence_head: bool. Build the next-sentence (or sentence-order) head; False for
            masked-LM-only pretraining. Defaults to True.

    Inputs (dict of int32): token_ids, segment_ids, padding_mask [batch, seq];
        mask_positions [batch, predictions], indices into seq.

    Outputs (dict):
        mlm_logits: [batch, predictions, vocab].
        nsp_logits: [batch, 2] (with `sentence_head` only).

    Example:
    ```python
    pretrainer = kbert.BertPretrainer.from_google_checkpoint("uncased_L-12_H-768_A-12")
    logits = pretrainer({**encoder_inputs, "mask_positions": positions})["mlm_logits"]
    ```
    """

    HEADS = ("checkpoint", "fresh")  # where `from_google_checkpoint` takes the heads from
    # The encoder only, not the heads: they are rebuilt and re-tied on load, never serialised
    # apart.
    CONFIG_KEYS = ("sentence_head",)

    def __init__(self, encoder, sentence_head=True, dtype=None, **kwargs):
        initializer = keras.initializers.TruncatedNormal(stddev=encoder.initializer_range)
        dtype = dtype or encoder.dtype_policy

        # === Layers ===
        self.encoder = encoder
        self.mlm_head = keras_nlp.layers.MaskedLMHead(
            token_embedding=encoder.token_embedding,
            intermediate_activation=get_activation(encoder.activation),
            layer_norm_epsilon=LAYER_NORM_EPSILON,
            kernel_initializer=initializer,
            dtype=dtype,
            name="mlm_head",
        )
        # keras-nlp's MaskedLMHead turns autocasting off, so under a mixed policy its float32
        # bias would meet bfloat16/float16 logits; let it cast like every other layer.
        self.mlm_head.autocast = True
        self.nsp_head = keras.layers.Dense(
            2, kernel_initializer=initializer, dtype=dtype, name="nsp_head") if (
            sentence_head) else None

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
        encoded = encoder({k: v for k, v in inputs.items() if k != "mask_positions"})
        # Logits leave the model in float32 under any precision policy (losses need it).
        outputs = {
            "mlm_logits": keras.layers.Activation("linear", dtype="float32", name="mlm_logits")(
                self.mlm_head(encoded["sequence_output"], mask_positions=inputs["mask_positions"])),
        }
        if sentence_head:
            outputs["nsp_logits"] = keras.layers.Activation(
                "linear", dtype="float32", name="nsp_logits")(
                self.nsp_head(encoded["pooled_output"]))
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.sentence_head = sentence_head

    @classmethod
    def from_google_checkpoint(cls, path, config=None, heads="checkpoint", sentence_head=True,
                               **kwargs):
        """Builds encoder and heads and loads a Google checkpoint.

        Args:
            path: str. Release directory, training directory or checkpoint prefix; or
                an open `GoogleCheckpoint` (any format: `kbert.models.opening`).
            config: `BertConfig` or path of a `bert_config.json`. Defaults to the one beside
                the checkpoint.
            heads: str. "checkpoint": every weight, heads (`cls/*`) included, from the
                checkpoint, strictly. "fresh": the encoder strictly from the checkpoint, the
                heads new as Google's initializer makes them (truncated normal with
                `initializer_range`, zero biases, the MLM output tied to the word table):
                continued pretraining of an encoder-only release. Defaults to "checkpoint".
            sentence_head: bool. See the class. Defaults to True.
            **kwargs: passed to `BertEncoder` (e.g. `dtype`).
        """
        if heads not in cls.HEADS:
            raise ValueError(f"heads must be one of {cls.HEADS}, got {heads!r}")
        return cls._from_google_checkpoint(path, config, kwargs, new_head=heads == "fresh",
                                           sentence_head=sentence_head)

    def _load_google_weights(self, source, new_head):
        # "fresh" heads stay new even where the checkpoint has some: load the encoder alone.
        if new_head:
            checkpoints.load_google_weights(self.encoder, source)
            logging.info("%s: encoder loaded; pretraining heads initialized fresh "
                         "(truncated normal, stddev %s)", source.prefix,
                         source.config.initializer_range)
            return
        if not any(name.startswith("cls/") for name in source.shapes()):
            raise ValueError(f"{source.prefix}: the checkpoint has no pretraining heads (no cls/* "
                             "variables) — to continue pretraining from its encoder with new "
                             "heads, pass heads='fresh' (run_pretraining.py: --init_heads=fresh)")
        try:
            checkpoints.load_google_weights(self, source)
        except ValueError as e:
            if "cls/" not in str(e):
                raise
            raise ValueError(f"{e}\n  The checkpoint has no (or incomplete) pretraining heads; "
                             "to continue pretraining from its encoder with new heads, pass "
                             "heads='fresh' (run_pretraining.py: --init_heads=fresh); a "
                             "masked-LM-only checkpoint (no cls/seq_relationship) loads with "
                             "sentence_head=False (--pair_task=none)") from None
