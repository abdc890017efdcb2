import keras
import numpy as np
import tensorflow as tf

from kbert.layers.embeddings import BertEmbeddings


def test_word_rows_are_gathered_from_a_sparsely_updated_table():
    """The embeddings read the rows a scatter update wrote (the table then in copy-on-read
    mode), and the word table's gradient stays sparse."""
    keras.utils.set_random_seed(5)
    layer = BertEmbeddings(30, 8, 16, 2)
    ids, segments = tf.constant([[3, 7, 7, 0]]), tf.zeros([1, 4], "int32")
    layer(ids, segments)
    table = layer.token_embedding.embeddings
    table.value.scatter_update(tf.IndexedSlices(tf.fill([1, 8], 2.0), tf.constant([7])))
    expected = keras.ops.take(table, ids, axis=0)
    np.testing.assert_allclose(layer._word_embeddings(ids), expected)
    assert np.all(np.float32(layer._word_embeddings(ids))[0, 1:3] == 2.0)
    with tf.GradientTape() as tape:
        y = layer(ids, segments, training=True)
    gradient = tape.gradient(y, table.value)
    assert isinstance(gradient, tf.IndexedSlices)
    assert sorted(np.unique(gradient.indices)) == [0, 3, 7]


def test_the_word_table_is_never_read_whole():
    """The traced call gathers rows from the table's resource: no ReadVariableOp of the table
    (a whole-table copy per step once sparse updates have written it)."""
    layer = BertEmbeddings(30, 8, 16, 2)
    ids, segments = tf.constant([[3, 7]]), tf.zeros([1, 2], "int32")
    layer(ids, segments)
    graph = tf.function(lambda: layer(ids, segments)).get_concrete_function().graph
    table = graph.capture(layer.token_embedding.embeddings.value.handle)
    readers = {op.type for op in graph.get_operations() if any(t is table for t in op.inputs)}
    assert readers == {"ResourceGather"}
