"""tf-text models built once per vocabulary: the same tokenizers, shared, safe to trace."""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kbert.tokenization import tokenizer as tokenizer_lib
from kbert.tokenization import vocab as vocab_lib
from kbert.tokenization import wordpiece_models

TEXTS = ["Hello unaffable world!", "Straße, ÜBER-naïve   cafés 東京", "x" * 230 + " tail",
         "covid19 [UNK] ##able", ""]


def test_the_models_are_the_ones_tf_text_builds(vocab_file):
    tokens = vocab_lib.load_vocab(vocab_file).tokens
    for lower in (True, False):
        ours = tf_text.FastBertTokenizer(
            fast_wordpiece_model_buffer=wordpiece_models.wordpiece(tokens, "##", "[UNK]", 50,
                                                                   False),
            fast_bert_normalizer_model_buffer=wordpiece_models.normalizer(lower))
        theirs = tf_text.FastBertTokenizer(vocab=list(tokens), max_bytes_per_word=50,
                                           lower_case_nfd_strip_accents=lower)
        assert ours.tokenize(TEXTS).to_list() == theirs.tokenize(TEXTS).to_list()
    words = tf.constant(["unaffable", "naïve", "x" * 120, "##able"])
    ours = tf_text.FastWordpieceTokenizer(
        model_buffer=wordpiece_models.wordpiece(tokens, "##", "[UNK]", 100, True))
    theirs = tf_text.FastWordpieceTokenizer(vocab=list(tokens), max_bytes_per_word=100,
                                            no_pretokenization=True)
    assert ours.tokenize(words).to_list() == theirs.tokenize(words).to_list()
    assert theirs.tokenize(words).to_list()[2] == [tokens.index("[UNK]")]  # the byte limit


def test_tokenizers_of_one_vocab_share_the_models_and_others_do_not(vocab_file):
    # Both caches empty: which models an earlier test's tokenizers left in them varies.
    wordpiece_models.wordpiece.cache_clear()
    tokenizer_lib._tokenizer_graphs.cache_clear()
    first = tokenizer_lib.FullTokenizer(vocab_file)
    second = tokenizer_lib.FullTokenizer(vocab_file, do_lower_case=False)
    assert first._graphs._wordpiece._model is second._graphs._wordpiece._model
    assert first._graphs._fast._fast_bert_normalizer._model is not (
        second._graphs._fast._fast_bert_normalizer._model)
    tokens = list(vocab_lib.load_vocab(vocab_file).tokens)
    tokens[tokens.index("world")] = "zqxj"
    other = tokenizer_lib.FullTokenizer(vocab_lib.Vocab(tokens))
    assert other._graphs._wordpiece._model is not first._graphs._wordpiece._model
    assert other.tokenize("zqxj") == ["zqxj"] and first.tokenize("zqxj") != ["zqxj"]
    assert "world" not in other.tokenize("hello world")


def test_tokenizers_of_one_vocab_and_options_share_their_traced_functions(vocab_file):
    first = tokenizer_lib.FullTokenizer(vocab_file)
    first.tokenize_ids(TEXTS)
    traces = first._graphs.ids_function.experimental_get_tracing_count()
    # Another Vocab object of the same tokens, and the same options: nothing is traced again.
    second = tokenizer_lib.FullTokenizer(vocab_lib.load_vocab(vocab_file))
    assert second.tokenize_ids(TEXTS).to_list() == first.tokenize_ids(TEXTS).to_list()
    assert second._graphs.ids_function is first._graphs.ids_function
    assert first._graphs.ids_function.experimental_get_tracing_count() == traces
    never_split = tokenizer_lib.FullTokenizer(vocab_file, never_split=["[UNK]"])
    assert never_split._graphs is not first._graphs
    assert never_split.tokenize("x [UNK] y") == ["x", "[UNK]", "y"]
    assert first.tokenize("x [UNK] y") == ["x", "[", "un", "##k", "]", "y"]


def test_a_tokenizer_made_while_tracing_serves_every_graph_and_eager_calls(vocab_file):
    wordpiece_models.wordpiece.cache_clear()
    tokenizer_lib._tokenizer_graphs.cache_clear()
    made = []

    @tf.function
    def make_and_tokenize(texts):
        made.append(tokenizer_lib.FullTokenizer(vocab_file))
        return made[-1].tokenize_ids(texts).flat_values

    in_graph = make_and_tokenize(tf.constant(["unaffable world"]))
    later = tokenizer_lib.FullTokenizer(vocab_file)  # from the cache the trace filled
    assert later._graphs._wordpiece._model is made[0]._graphs._wordpiece._model
    np.testing.assert_array_equal(in_graph, later.tokenize_ids(["unaffable world"]).flat_values)
    assert later.tokenize("unaffable world") == ["una", "##ffa", "##ble", "world"]


def test_the_basic_tokenizer_first_used_while_tracing_serves_eager_calls_too():
    tokenizer_lib._basic_words_function.cache_clear()

    @tf.function
    def words(texts):
        return tokenizer_lib.basic_tokenize(texts).flat_values

    np.testing.assert_array_equal(words(tf.constant(["Hello, World!"])), [b"hello", b",",
                                                                          b"world", b"!"])
    assert tokenizer_lib.basic_tokenize(["Straße"], do_lower_case=True).to_list() == [
        ["straße".encode()]]
