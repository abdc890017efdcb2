"""BertEncoder: token, segment and padding inputs to sequence, pooled and per-layer outputs."""

import keras

from kbert import checkpoints
from kbert.config import BertConfig
from kbert.layers.embeddings import BertEmbeddings
from kbert.layers.token_id_check import TokenIdCheck
from kbert.layers.transformer import BertTransformerLayer


def input_names(packed=False):
    """The encoder's input names: keras-nlp's three, and two more for packed rows."""
    names = ("token_ids", "segment_ids", "padding_mask")
    return names + ("position_ids", "example_ids") if packed else names


@keras.saving.register_keras_serializable(package="kbert")
class BertEncoder(keras.Model):
    """The BERT encoder of Google's modeling.py `BertModel`, as a functional Keras model.

    Inputs are keras-nlp's names, so its packers and preprocessors plug in.

    Args:
        vocabulary_size: int. Word-embedding rows (`vocab_size`).
        num_layers: int. Transformer layers (`num_hidden_layers`).
        num_heads: int. Attention heads (`num_attention_heads`).
        hidden_dim: int. Width (`hidden_size`).
        intermediate_dim: int. Feed-forward width (`intermediate_size`).
        activation: str. `hidden_act` name. Defaults to "gelu" (tanh approximation).
        dropout: float. `hidden_dropout_prob`. Defaults to 0.1.
        attention_dropout: float. `attention_probs_dropout_prob`. Defaults to 0.1.
        max_sequence_length: int. `max_position_embeddings`. Defaults to 512.
        num_segments: int. `type_vocab_size`. Defaults to 2.
        initializer_range: float. Truncated-normal stddev. Defaults to 0.02.
        check_token_ids: bool. Raise on token ids outside [0, vocabulary_size) instead of
            returning outputs for them (`TokenIdCheck`; the model then runs without XLA).
            Defaults to False.
        packed: bool. Take packed rows (several examples per row, `kbert.data.packing`): two
            more inputs, and attention only within each example. Defaults to False.
        dtype: dtype or `keras.DTypePolicy`. Defaults to the global policy.

    Inputs (dict of int32 [batch, seq], seq <= max_sequence_length):
        token_ids, segment_ids, padding_mask (1 for real tokens, 0 for padding).
        With `packed`, also position_ids (each example's positions, from 0) and example_ids
        (the same number for the tokens of one example; a token attends to the tokens of
        its own example only). An example in a packed row gets the outputs it gets alone.

    Outputs (dict):
        sequence_output: [batch, seq, hidden], the last layer.
        pooled_output: [batch, hidden], dense + tanh on the first token.
        encoder_outputs: list of [batch, seq, hidden], one per layer.
        embedding_output: [batch, seq, hidden], after embeddings LayerNorm.

    Example:
    ```python
    encoder = kbert.BertEncoder.from_google_checkpoint("uncased_L-12_H-768_A-12")
    outputs = encoder({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    outputs["pooled_output"]  # [batch, 768]
    ```
    """

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 activation="gelu", dropout=0.1, attention_dropout=0.1, max_sequence_length=512,
                 num_segments=2, initializer_range=0.02, check_token_ids=False, packed=False,
                 dtype=None, **kwargs):
        # Fails early, with BertConfig's messages, on values Google's code would reject.
        BertConfig.from_encoder_kwargs(dict(
            vocabulary_size=vocabulary_size, num_layers=num_layers, num_heads=num_heads,
            hidden_dim=hidden_dim, intermediate_dim=intermediate_dim, activation=activation,
            dropout=dropout, attention_dropout=attention_dropout,
            max_sequence_length=max_sequence_length, num_segments=num_segments,
            initializer_range=initializer_range))

        # === Layers ===
        self.embeddings = BertEmbeddings(
            vocabulary_size, hidden_dim, max_sequence_length, num_segments, dropout=dropout,
            initializer_range=initializer_range, dtype=dtype, name="embeddings")
        self.transformer_layers = [
            BertTransformerLayer(
                intermediate_dim, num_heads, activation=activation, dropout=dropout,
                attention_dropout=attention_dropout, initializer_range=initializer_range,
                dtype=dtype, name=f"transformer_layer_{i}")
            for i in range(num_layers)
        ]
        self.token_id_check = (TokenIdCheck(vocabulary_size, name="token_id_check")
                               if check_token_ids else None)
        self.pooler = keras.layers.Dense(
            hidden_dim, activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=dtype, name="pooler")

        # === Functional graph ===
        self.packed = packed  # read by _embed and _masks
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in input_names(packed)}
        x = self._embed(inputs)
        embedding_output = x
        encoder_outputs = []
        masks = self._masks(inputs)
        for layer in self.transformer_layers:
            x = layer(x, **masks)
            encoder_outputs.append(x)
        outputs = {
            "sequence_output": x,
            "pooled_output": self.pooler(x[:, 0, :]),
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.initializer_range = initializer_range
        self.check_token_ids = check_token_ids

    def _checked(self, token_ids):
        return self.token_id_check(token_ids) if self.token_id_check else token_ids

    def pooled_output(self, inputs, cls_positions=None):
        """`self(inputs)["pooled_output"]` alone, for heads that read nothing else.

        The last layer runs for the [CLS] position(s) only (`first_token_only` or
        `query_positions`), which a full call cannot do because it also returns every
        position: the same values for less work.

        Args:
            inputs: dict of int32 [batch, seq] inputs (symbolic `keras.Input`s or tensors).
            cls_positions: int32 [batch, examples] or None. Packed rows: the position of each
                example's `[CLS]`. Defaults to None (the first position).

        Returns:
            [batch, hidden] pooled output, or [batch, examples, hidden] with `cls_positions`.
        """
        x = self._embed(inputs)
        masks = self._masks(inputs)
        for layer in self.transformer_layers[:-1]:
            x = layer(x, **masks)
        if cls_positions is None:
            x = self.transformer_layers[-1](x, **masks, first_token_only=True)
            return self.pooler(x[:, 0, :])
        return self.pooler(self.transformer_layers[-1](x, **masks, query_positions=cls_positions))

    def _embed(self, inputs):
        return self.embeddings(self._checked(inputs["token_ids"]), inputs["segment_ids"],
                               position_ids=inputs["position_ids"] if self.packed else None)

    def _masks(self, inputs):
        """The attention-mask arguments of a transformer layer for `inputs`."""
        if not self.packed:
            return {"padding_mask": inputs["padding_mask"]}
        # Block-diagonal: query i sees key j when both belong to the same example.
        example_ids = inputs["example_ids"]
        return {"padding_mask": inputs["padding_mask"], "attention_mask": keras.ops.equal(
            keras.ops.expand_dims(example_ids, 2), keras.ops.expand_dims(example_ids, 1))}

    @property
    def token_embedding(self):
        """The word table, a keras-nlp `ReversibleEmbedding` [vocab, hidden]."""
        return self.embeddings.token_embedding

    @property
    def bert_config(self):
        """This encoder's hyper-parameters as a `kbert.BertConfig`."""
        return BertConfig.from_encoder_kwargs(self.get_config())

    @classmethod
    def from_config_file(cls, path, **kwargs) -> "BertEncoder":
        """Builds an untrained encoder from a `bert_config.json`."""
        return cls(**BertConfig.from_json_file(path).encoder_kwargs(), **kwargs)

    @classmethod
    def from_google_checkpoint(cls, path, config=None, **kwargs) -> "BertEncoder":
        """Builds the encoder and loads an original Google checkpoint.

        Args:
            path: str. A release directory (`bert_config.json`, `bert_model.ckpt.*`), a training
                directory (latest checkpoint), or a checkpoint prefix; or a `GoogleCheckpoint`
                already open (any format, see `kbert.models.opening.open_model`).
            config: `BertConfig` or path of a `bert_config.json`. Defaults to the
                `bert_config.json` found beside the checkpoint.
            **kwargs: passed to the constructor (e.g. `dtype`, `name`).
        """
        source = checkpoints.GoogleCheckpoint.opened(path, config)
        model = cls(**source.config.encoder_kwargs(), **kwargs)
        checkpoints.load_google_weights(model, source)
        return model

    @classmethod
    def from_preset(cls, name_or_path, **kwargs):
        """`from_google_checkpoint` for one of Google's releases by name (or any path).

        Args:
            name_or_path: str. A name of `kbert.list_presets()`, e.g.
                "uncased_L-12_H-768_A-12", downloaded once into `$KBERT_HOME`; or a path.
            **kwargs: passed to `from_google_checkpoint`.
        """
        return cls.from_google_checkpoint(name_or_path, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "activation": self.activation,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "initializer_range": self.initializer_range,
            "check_token_ids": self.check_token_ids,
            "packed": self.packed,
        })
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
