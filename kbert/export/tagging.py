"""In-graph NER serving: raw text -> whitespace words -> windows -> one label per word.

The same alignment as `kbert.data.conll.featurize` (with its defaults) and `word_labels`, in
TensorFlow ops. Each text is tagged alone, without document context (a model trained with
`document_context` serves single texts without it), and a long text in consecutive windows,
not `window_stride`'s overlapping ones:
each word is tokenized on its own (a word with no pieces becomes one [UNK]; one with more
pieces than a window holds keeps its first), a text whose pieces do not fit in
`max_seq_length` is split between words into consecutive windows `[CLS] pieces [SEP]`, the
model scores every window, and each word takes the label predicted (argmax, or Viterbi over
the words' first pieces with a CRF) on its first piece. So every word gets a label, however
long the text.
"""

import tensorflow as tf

# Python's str.split() whitespace (str.isspace), in RE2 syntax; RE2's \s is ASCII only.
WHITESPACE = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Zs}\x{2028}\x{2029}]+"


def split_words(texts):
    """Whitespace words of texts [batch], as `str.split()`: string RaggedTensor [batch, (words)].

    Other characters stay in the words (NUL and control characters too, as `kbert.data.conll`
    reads them); the tokenizer deletes them, as Google's `_clean_text`.
    """
    # Not tf_text.regex_split, which ends each text at its first NUL byte: whitespace runs
    # become one space, and tf.strings.split (ASCII whitespace, NUL kept) splits there.
    return tf.strings.split(tf.strings.regex_replace(texts, WHITESPACE, " "))


def word_windows(words, tokenizer, capacity, unk_id):
    """Word pieces of every word, grouped into windows of at most `capacity` pieces.

    Args:
        words: string RaggedTensor [batch, (words)].
        tokenizer: `kbert.FullTokenizer`.
        capacity: int. Pieces per window (max_seq_length - 2).
        unk_id: int.

    Returns:
        (pieces, label_mask, word_window, word_position): pieces int32 RaggedTensor
        [windows, (pieces)]; label_mask int32 RaggedTensor [windows, (pieces)], 1 on each
        word's first piece; and for every word [words] (flat), its window and the position
        of its first piece in the packed window (after [CLS]).
    """
    flat_words = words.flat_values
    pieces = tokenizer.tokenize_ids(flat_words)
    # A word without pieces is one [UNK]; a word longer than a window keeps its first pieces.
    counts = tf.clip_by_value(pieces.row_lengths(), 1, capacity)
    unk = tf.RaggedTensor.from_row_lengths(
        tf.fill(tf.shape(flat_words, out_type=tf.int64), tf.constant(unk_id, tf.int32)),
        tf.ones_like(counts))
    padded = tf.concat([pieces, unk], axis=1)
    pieces = tf.ragged.boolean_mask(
        padded, tf.ragged.range(padded.row_lengths()) < counts[:, None])
    # As conll._window_bounds: a new window when the next word would overflow this one.
    # Hand-written: the split is greedy (each window depends on where the last one ended), a
    # sequential scan that no tf-text trimmer does; one cheap step per word of the batch.
    text_of_word = words.value_rowids()
    first_of_text = tf.equal(tf.range(tf.size(counts, out_type=tf.int64)),
                             tf.gather(words.row_starts(), text_of_word))

    def step(carry, word):
        used, window = carry
        count, first = word
        new_window = ~first & (used > 0) & (used + count > capacity)
        window = tf.where(first, tf.zeros_like(window), window + tf.cast(new_window, tf.int64))
        used = tf.where(first | new_window, count, used + count)
        return used, window

    zero = tf.constant(0, tf.int64)
    _, window_in_text = tf.scan(step, (counts, first_of_text), (zero, zero))
    # Every text has at least one window (an empty text: [CLS] [SEP], as featurize).
    windows_per_text = tf.maximum(tf.math.unsorted_segment_max(
        window_in_text + 1, text_of_word, words.nrows()), 1)
    window_offset = tf.cumsum(windows_per_text, exclusive=True)
    word_window = tf.gather(window_offset, text_of_word) + window_in_text
    num_windows = tf.reduce_sum(windows_per_text)
    piece_window = tf.repeat(word_window, counts)
    window_pieces = tf.RaggedTensor.from_value_rowids(pieces.flat_values, piece_window,
                                                      nrows=num_windows)
    is_first = tf.cast(tf.ragged.range(counts) == 0, tf.int32).flat_values
    label_mask = tf.RaggedTensor.from_value_rowids(is_first, piece_window, nrows=num_windows)
    # Position of a word's first piece in its packed window: pieces of earlier words of the
    # same window, plus one for [CLS].
    piece_start = tf.cumsum(counts, exclusive=True)
    window_start = tf.gather(tf.math.unsorted_segment_min(
        piece_start, word_window, num_windows), word_window)
    return window_pieces, label_mask, word_window, piece_start - window_start + 1
