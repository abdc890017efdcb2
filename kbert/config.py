"""BertConfig: Google's `bert_config.json`, validated, and its one translation to Keras kwargs."""

import dataclasses
import json
import os

# Activations Google's modeling.py `get_activation` accepts (its "gelu" is the tanh
# approximation). "gelu_exact" is the erf form that Hugging Face calls "gelu"; Google's
# code cannot read it, so converters only write it when asked to keep exact outputs.
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The hyper-parameters of a BERT model, with Google's `bert_config.json` field names.

    Args:
        vocab_size: int. Rows of the word-embedding table.
        hidden_size: int. Width of every layer; divisible by `num_attention_heads`.
        num_hidden_layers: int. Number of transformer layers.
        num_attention_heads: int. Attention heads per layer.
        intermediate_size: int. Width of the feed-forward layer.
        hidden_act: str. One of `ACTIVATIONS`. Defaults to "gelu" (tanh approximation).
        hidden_dropout_prob: float. Dropout on embeddings and layer outputs. Defaults to 0.1.
        attention_probs_dropout_prob: float. Dropout on attention probabilities. Defaults to 0.1.
        max_position_embeddings: int. Longest sequence the model accepts. Defaults to 512.
        type_vocab_size: int. Number of segment ids. Defaults to 2.
        initializer_range: float. Stddev of the truncated-normal initializer. Defaults to 0.02.
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02

    def __post_init__(self):
        problems = list(_problems(self))
        if problems:
            raise ValueError("Invalid BERT config: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from a dict of `bert_config.json` keys; `source` names it in errors.

        Keys that Google's and Hugging Face's files carry but BERT does not use
        (e.g. "directionality", "pooler_fc_size", "model_type") are ignored.
        """
        if not isinstance(values, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(values).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        required = [n for n, f in fields.items() if f.default is dataclasses.MISSING]
        missing = [n for n in required if n not in values]
        if missing:
            raise ValueError(f"{source}: missing key(s) {', '.join(map(repr, missing))}")
        try:
            return cls(**{k: v for k, v in values.items() if k in fields})
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    @classmethod
    def from_json_file(cls, path) -> "BertConfig":
        """Reads `bert_config.json`; errors name the file."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8-sig") as f:
                text = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: BERT config file not found") from None
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
        return cls.from_dict(values, source=path)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def encoder_kwargs(self):
        """The keras-nlp style constructor arguments of `kbert.BertEncoder` for this config."""
        return {
            "vocabulary_size": self.vocab_size,
            "num_layers": self.num_hidden_layers,
            "num_heads": self.num_attention_heads,
            "hidden_dim": self.hidden_size,
            "intermediate_dim": self.intermediate_size,
            "activation": self.hidden_act,
            "dropout": self.hidden_dropout_prob,
            "attention_dropout": self.attention_probs_dropout_prob,
            "max_sequence_length": self.max_position_embeddings,
            "num_segments": self.type_vocab_size,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_encoder_kwargs(cls, kwargs):
        """Inverse of `encoder_kwargs`."""
        names = {v: k for k, v in _KWARG_NAMES.items()}
        return cls(**{names[k]: v for k, v in kwargs.items() if k in names})


_KWARG_NAMES = {
    "vocab_size": "vocabulary_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_size": "hidden_dim",
    "intermediate_size": "intermediate_dim",
    "hidden_act": "activation",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "max_position_embeddings": "max_sequence_length",
    "type_vocab_size": "num_segments",
    "initializer_range": "initializer_range",
}


def _problems(config):
    """Yields one message per invalid field."""
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            yield f"{name} must be a positive integer, got {value!r}"
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            yield f"{name} must be a number in [0, 1), got {value!r}"
    value = config.initializer_range
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        yield f"initializer_range must be a positive number, got {value!r}"
    if config.hidden_act not in ACTIVATIONS:
        yield f"hidden_act must be one of {ACTIVATIONS}, got {config.hidden_act!r}"
    heads, hidden = config.num_attention_heads, config.hidden_size
    if isinstance(heads, int) and isinstance(hidden, int) and heads > 0 and hidden % heads:
        yield (f"hidden_size ({hidden}) must be divisible by num_attention_heads ({heads})")
