"""Text inputs in keras-hub's convention: a list is a batch, a tuple holds a pair's segments."""

import numpy as np
import tensorflow as tf

ACCEPTED_FORMS = (
    "  one text:         'The cat sat.'  (unbatched: outputs have no batch axis)\n"
    "  a batch of texts: ['The cat sat.', 'Dogs bark.']  (or a [batch] string tensor)\n"
    "  a batch of pairs: (['The cat sat.', 'Dogs bark.'], ['It was tired.', 'Loudly.'])"
    "  (a tuple of two lists or [batch] string tensors; ('text a', 'text b') is one pair)\n"
    "  rows of segments: a [batch, 1 or 2] string tensor, or a ragged [batch, (1 or 2)] one")


def to_segments(inputs, caller="BertPreprocessor"):
    """Reads text inputs as a list of one or two string segments, all [batch] or all scalars.

    Args:
        inputs: str, list of str, tuple of one or two (str, list of str or string tensor), or a
            string tensor: scalar, [batch], [batch, 1 or 2] or ragged [batch, (1 or 2)] (each
            row holds one example's segments; a row with one string is a single text).
        caller: str. The name that error messages start with. Defaults to "BertPreprocessor".

    Returns:
        list of one or two tf.string tensors of equal rank (0: one example; 1: a batch).

    Raises:
        ValueError: for anything else (a list of tuples or of lists, say), listing the
            accepted forms.
    """
    if isinstance(inputs, tuple):
        if len(inputs) not in (1, 2):
            raise ValueError(f"{caller} packs one or two text segments, got {len(inputs)} in a "
                             f"tuple. Accepted forms:\n{ACCEPTED_FORMS}")
        segments = [_segment(x, caller) for x in inputs]
        if len({s.shape.rank for s in segments}) > 1:
            raise ValueError(f"{caller}: both segments of a pair must be batches, or both single "
                             f"texts; got shapes {[s.shape.as_list() for s in segments]}. "
                             f"Accepted forms:\n{ACCEPTED_FORMS}")
        return segments
    if isinstance(inputs, tf.RaggedTensor) or (_is_tensor(inputs) and _rank(inputs) == 2):
        return _row_segments(inputs, caller)
    return [_segment(inputs, caller)]


def python_texts_as_tensor(x):
    """A str or a list of str as a tf.string tensor; anything else unchanged."""
    if _is_text(x) or (isinstance(x, list) and all(_is_text(item) for item in x)):
        return _segment(x, caller=None)
    return x


def _is_text(x):
    return isinstance(x, (str, bytes))


def _is_tensor(x):
    return tf.is_tensor(x) or isinstance(x, np.ndarray)


def _rank(x):
    return x.shape.rank if tf.is_tensor(x) else x.ndim


def _error(caller, problem):
    return ValueError(f"{caller}: {problem}. Accepted forms:\n{ACCEPTED_FORMS}")


def _segment(x, caller):
    """One segment: a scalar or [batch] string tensor."""
    if _is_text(x):
        return tf.constant(x, tf.string)
    if isinstance(x, list):
        odd = next((item for item in x if not _is_text(item)), None)
        if odd is not None:
            hint = ("; for pairs, pass a tuple of two lists: (texts_a, texts_b), e.g. "
                    "tuple(map(list, zip(*pairs)))" if isinstance(odd, (tuple, list)) else "")
            raise _error(caller, f"got a list of {type(odd).__name__}, but a list is a batch of "
                                 f"texts and each item must be a str{hint}")
        return tf.constant(x, tf.string, shape=[len(x)])
    if _is_tensor(x) and not isinstance(x, tf.RaggedTensor):
        tensor = tf.convert_to_tensor(x)
        if tensor.dtype != tf.string:
            raise _error(caller, f"got a {tensor.dtype.name} tensor; texts must be strings")
        if tensor.shape.rank not in (0, 1, None):
            raise _error(caller, f"got a segment of shape {tensor.shape.as_list()}")
        return tensor
    raise _error(caller, f"got a {type(x).__name__}")


def _row_segments(x, caller):
    """[batch, 1 or 2] (dense or ragged) → one or two [batch] segments; "" for a missing B."""
    if x.dtype != tf.string:
        raise _error(caller, f"got a {tf.as_dtype(x.dtype).name} tensor; texts must be strings")
    if not isinstance(x, tf.RaggedTensor):
        x = tf.convert_to_tensor(x)
        if x.shape[1] not in (1, 2):
            raise _error(caller, f"got a tensor of shape {x.shape.as_list()}, but a row "
                                 f"holds one example's one or two segments")
        return [x[:, i] for i in range(x.shape[1])]
    if x.shape.rank != 2:
        raise _error(caller, f"got a ragged tensor of rank {x.shape.rank}")
    check = tf.debugging.assert_less_equal(
        x.row_lengths(), tf.constant(2, tf.int64),
        message=f"{caller}: each row of a ragged input holds one or two segments")
    with tf.control_dependencies([check]):
        dense = tf.identity(x.to_tensor(default_value="", shape=[None, 2]))
    return [dense[:, 0], dense[:, 1]]
