"""export_saved_model(compute_dtype="bfloat16"): serves, computes in bfloat16, same labels."""

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tf-text ops the SavedModel uses)

import kbert
from tests.conftest import TINY_CONFIG
from tests.conftest import TINY_VOCAB

TEXTS = ["the fox said it was a dog .", "he has a cat", "", "to the end of it , as is",
         "that was the , . said", "in on at by with"]


def _computes_in_bfloat16(function):
    """Whether any op of the signature's graph (nested functions included) is bfloat16."""
    graph = function.graph.as_graph_def()
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    return any(node.attr[key].type == tf.bfloat16.as_datatype_enum
               for node in nodes for key in ("T", "DstT") if key in node.attr)


def test_bfloat16_export_serves_and_agrees_with_float32(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in TINY_VOCAB), encoding="utf-8")
    keras.utils.set_random_seed(0)
    # Large weights: pooled outputs differ visibly between texts.
    config = kbert.BertConfig(**dict(TINY_CONFIG, initializer_range=0.5))
    encoder = kbert.BertEncoder(**config.encoder_kwargs())
    model = kbert.BertClassifier(encoder, num_classes=3)
    # A large head, so the texts get different labels that a bfloat16 error could flip.
    head = model.output_dense.kernel
    head.assign(np.random.default_rng(0).normal(0, 3, head.shape))
    outputs = {}
    for dtype in ("float32", "bfloat16"):
        path = kbert.export_saved_model(model, tmp_path / dtype, str(vocab),
                                        max_seq_length=16, label_names=["neg", "neu", "pos"],
                                        compute_dtype=dtype)
        serve = tf.saved_model.load(path).signatures["serving_default"]
        outputs[dtype] = {k: v.numpy() for k, v in serve(text=tf.constant(TEXTS)).items()}
        assert _computes_in_bfloat16(serve) == (dtype == "bfloat16"), dtype
    full, half = outputs["float32"], outputs["bfloat16"]
    assert half["logits"].dtype == np.float32
    assert len(set(full["label_id"].tolist())) > 1  # the comparison below can fail
    np.testing.assert_array_equal(half["label_id"], full["label_id"])
    np.testing.assert_array_equal(half["label"], full["label"])
    np.testing.assert_allclose(half["logits"], full["logits"],
                               atol=0.05 * np.abs(full["logits"]).max())
