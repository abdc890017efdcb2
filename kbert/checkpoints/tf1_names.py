"""The table between Google's TF1 variable names and kbert's Keras variable paths (data only).

Rows are (Google name, Keras `variable.path`, transform). `{i}` stands for the layer index.
Keras paths are relative to the model: the first component is a layer of `BertEncoder`
(`embeddings`, `transformer_layer_{i}`, `pooler`) or of a model's head (`HEADS`).
"""

IDENTITY = "identity"
# Keras [..., heads, head_dim] <-> Google [..., hidden]: query/key/value kernels and biases.
SPLIT_HEADS = "split_heads"
# Keras [heads, head_dim, hidden] <-> Google [hidden, hidden]: the attention output kernel.
MERGE_HEADS = "merge_heads"
# Keras Dense kernel [hidden, 2] <-> Google `output_weights` [2, hidden] (used transposed).
TRANSPOSE = "transpose"


def _dense(google, keras, kernel=IDENTITY, bias=IDENTITY):
    """The kernel and bias rows of one dense layer, under their two scopes."""
    return ((f"{google}/kernel", f"{keras}/kernel", kernel),
            (f"{google}/bias", f"{keras}/bias", bias))


def _layer_norm(google, keras):
    """The gamma and beta rows of one LayerNorm, under their two scopes."""
    return ((f"{google}/gamma", f"{keras}/gamma", IDENTITY),
            (f"{google}/beta", f"{keras}/beta", IDENTITY))


ENCODER = (
    ("bert/embeddings/word_embeddings", "embeddings/token_embedding/embeddings", IDENTITY),
    ("bert/embeddings/token_type_embeddings", "embeddings/segment_embedding/embeddings",
     IDENTITY),
    ("bert/embeddings/position_embeddings", "embeddings/position_embedding/embeddings",
     IDENTITY),
    *_layer_norm("bert/embeddings/LayerNorm", "embeddings/layer_norm"),
    *_dense("bert/pooler/dense", "pooler"),
)

ENCODER_LAYER = tuple(
    (f"bert/encoder/layer_{{i}}/{google}", f"transformer_layer_{{i}}/{keras}", transform)
    for google, keras, transform in (
        *_dense("attention/self/query", "self_attention_layer/query", SPLIT_HEADS, SPLIT_HEADS),
        *_dense("attention/self/key", "self_attention_layer/key", SPLIT_HEADS, SPLIT_HEADS),
        *_dense("attention/self/value", "self_attention_layer/value", SPLIT_HEADS, SPLIT_HEADS),
        *_dense("attention/output/dense", "self_attention_layer/attention_output", MERGE_HEADS),
        *_layer_norm("attention/output/LayerNorm", "self_attention_layer_norm"),
        *_dense("intermediate/dense", "feedforward_intermediate_dense"),
        *_dense("output/dense", "feedforward_output_dense"),
        *_layer_norm("output/LayerNorm", "feedforward_layer_norm"),
    )
)

# Pretraining heads, as run_pretraining.py `get_masked_lm_output` / `get_next_sentence_output`.
# The MLM output kernel is the word-embedding table (tied), so it has no row of its own.
PRETRAINING_HEADS = (
    *_dense("cls/predictions/transform/dense", "mlm_head/intermediate_dense"),
    *_layer_norm("cls/predictions/transform/LayerNorm", "mlm_head/intermediate_layer_norm"),
    ("cls/predictions/output_bias", "mlm_head/output_bias", IDENTITY),
    ("cls/seq_relationship/output_weights", "nsp_head/kernel", TRANSPOSE),
    ("cls/seq_relationship/output_bias", "nsp_head/bias", IDENTITY),
)

# Task heads, as Google's fine-tuning scripts name them (outside the `bert/` scope).
# run_classifier.py `create_model`: `output_weights` [labels, hidden], `output_bias` [labels].
CLASSIFIER_HEAD = (
    ("output_weights", "logits/kernel", TRANSPOSE),
    ("output_bias", "logits/bias", IDENTITY),
)
# run_squad.py `create_model`: `cls/squad/output_weights` [2, hidden], `cls/squad/output_bias`.
SPAN_HEAD = (
    ("cls/squad/output_weights", "span_head/kernel", TRANSPOSE),
    ("cls/squad/output_bias", "span_head/bias", IDENTITY),
)
# Google published no NER script; this is kbert's layout in the same style:
# `cls/ner/output_weights` [labels, hidden] and `cls/ner/output_bias` [labels] (the dense
# layer on every position of the sequence output, used transposed), and with a CRF
# `cls/ner/crf/transitions` [labels, labels] (from-label, to-label),
# `cls/ner/crf/start_transitions` [labels] and `cls/ner/crf/end_transitions` [labels].
TAGGING_HEAD = (
    ("cls/ner/output_weights", "logits/kernel", TRANSPOSE),
    ("cls/ner/output_bias", "logits/bias", IDENTITY),
    ("cls/ner/crf/transitions", "crf/transitions", IDENTITY),
    ("cls/ner/crf/start_transitions", "crf/start_transitions", IDENTITY),
    ("cls/ner/crf/end_transitions", "crf/end_transitions", IDENTITY),
)

# The head rows of each model, by its registered Keras name; a model not listed (the
# encoder) has no head. A row whose Keras variable the model lacks (a tagger without CRF)
# is not used.
HEADS = {
    "kbert>BertPretrainer": PRETRAINING_HEADS,
    "kbert>BertClassifier": CLASSIFIER_HEAD,
    "kbert>BertSpanLabeler": SPAN_HEAD,
    "kbert>BertTokenClassifier": TAGGING_HEAD,
}

# Checkpoint entries that are training state, not model weights: skipped on load.
OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v", "/Momentum", "/Adam", "/Adam_1")
TRAINING_STATE_NAMES = ("global_step", "good_steps", "loss_scale", "current_loss_scale")
