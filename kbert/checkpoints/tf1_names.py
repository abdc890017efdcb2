"""The table between Google's TF1 variable names and kbert's Keras variable paths (data only).

Rows are (Google name, Keras `variable.path`, transform). `{i}` stands for the layer index.
Keras paths are relative to the model: the first component is a layer of `BertEncoder`
(`embeddings`, `transformer_layer_{i}`, `pooler`) or of `BertPretrainer` (`mlm_head`, `nsp_head`).
"""

IDENTITY = "identity"
# Keras [..., heads, head_dim] <-> Google [..., hidden]: query/key/value kernels and biases.
SPLIT_HEADS = "split_heads"
# Keras [heads, head_dim, hidden] <-> Google [hidden, hidden]: the attention output kernel.
MERGE_HEADS = "merge_heads"
# Keras Dense kernel [hidden, 2] <-> Google `output_weights` [2, hidden] (used transposed).
TRANSPOSE = "transpose"

ENCODER = (
    ("bert/embeddings/word_embeddings", "embeddings/token_embedding/embeddings", IDENTITY),
    ("bert/embeddings/token_type_embeddings", "embeddings/segment_embedding/embeddings",
     IDENTITY),
    ("bert/embeddings/position_embeddings", "embeddings/position_embedding/embeddings",
     IDENTITY),
    ("bert/embeddings/LayerNorm/gamma", "embeddings/layer_norm/gamma", IDENTITY),
    ("bert/embeddings/LayerNorm/beta", "embeddings/layer_norm/beta", IDENTITY),
    ("bert/pooler/dense/kernel", "pooler/kernel", IDENTITY),
    ("bert/pooler/dense/bias", "pooler/bias", IDENTITY),
)

ENCODER_LAYER = tuple(
    (f"bert/encoder/layer_{{i}}/{google}", f"transformer_layer_{{i}}/{keras}", transform)
    for google, keras, transform in (
        ("attention/self/query/kernel", "self_attention_layer/query/kernel", SPLIT_HEADS),
        ("attention/self/query/bias", "self_attention_layer/query/bias", SPLIT_HEADS),
        ("attention/self/key/kernel", "self_attention_layer/key/kernel", SPLIT_HEADS),
        ("attention/self/key/bias", "self_attention_layer/key/bias", SPLIT_HEADS),
        ("attention/self/value/kernel", "self_attention_layer/value/kernel", SPLIT_HEADS),
        ("attention/self/value/bias", "self_attention_layer/value/bias", SPLIT_HEADS),
        ("attention/output/dense/kernel", "self_attention_layer/attention_output/kernel",
         MERGE_HEADS),
        ("attention/output/dense/bias", "self_attention_layer/attention_output/bias", IDENTITY),
        ("attention/output/LayerNorm/gamma", "self_attention_layer_norm/gamma", IDENTITY),
        ("attention/output/LayerNorm/beta", "self_attention_layer_norm/beta", IDENTITY),
        ("intermediate/dense/kernel", "feedforward_intermediate_dense/kernel", IDENTITY),
        ("intermediate/dense/bias", "feedforward_intermediate_dense/bias", IDENTITY),
        ("output/dense/kernel", "feedforward_output_dense/kernel", IDENTITY),
        ("output/dense/bias", "feedforward_output_dense/bias", IDENTITY),
        ("output/LayerNorm/gamma", "feedforward_layer_norm/gamma", IDENTITY),
        ("output/LayerNorm/beta", "feedforward_layer_norm/beta", IDENTITY),
    )
)

# Pretraining heads, as run_pretraining.py `get_masked_lm_output` / `get_next_sentence_output`.
# The MLM output kernel is the word-embedding table (tied), so it has no row of its own.
PRETRAINING_HEADS = (
    ("cls/predictions/transform/dense/kernel", "mlm_head/intermediate_dense/kernel", IDENTITY),
    ("cls/predictions/transform/dense/bias", "mlm_head/intermediate_dense/bias", IDENTITY),
    ("cls/predictions/transform/LayerNorm/gamma", "mlm_head/intermediate_layer_norm/gamma",
     IDENTITY),
    ("cls/predictions/transform/LayerNorm/beta", "mlm_head/intermediate_layer_norm/beta",
     IDENTITY),
    ("cls/predictions/output_bias", "mlm_head/output_bias", IDENTITY),
    ("cls/seq_relationship/output_weights", "nsp_head/kernel", TRANSPOSE),
    ("cls/seq_relationship/output_bias", "nsp_head/bias", IDENTITY),
)

# Checkpoint entries that are training state, not model weights: skipped on load.
OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v", "/Momentum", "/Adam", "/Adam_1")
TRAINING_STATE_NAMES = ("global_step", "good_steps", "loss_scale", "current_loss_scale")
