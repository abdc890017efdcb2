"""CRF: a linear-chain conditional random field output layer with masked Viterbi decoding.

Hand-written on `keras.ops`: no maintained Keras 3 CRF library exists (TensorFlow Addons'
`CRF` and `crf_log_likelihood` were for Keras 2 and the project is archived; keras-nlp and
keras-hub have none), and the algorithm is short: the forward algorithm for the partition
function, the score of one path, and Viterbi with a backtrace, each a `keras.ops.scan` over
time.

A mask selects the positions that take part (for NER, the first word-piece of every word).
Unselected positions are skipped, not scored: the chain runs from one selected position to
the next, so its transitions are between consecutive words, never between word-pieces.
"""

import keras

ops = keras.ops


@keras.saving.register_keras_serializable(package="kbert")
class CRF(keras.layers.Layer):
    """Transition, start and end scores over `num_labels` labels, for a linear-chain CRF.

    The layer's call passes the unary potentials (emission scores) through unchanged, in
    float32; it owns the pairwise scores, which `log_likelihood` (the training loss, negated)
    and `decode` (Viterbi) use. The score of a label path `y` over the selected positions
    `t_1 < ... < t_n` is

        start[y_1] + sum_k potentials[t_k, y_k] + sum_{k>1} transitions[y_{k-1}, y_k]
        + end[y_n].

    Args:
        num_labels: int. Number of labels.
        **kwargs: `keras.layers.Layer` arguments (name, dtype).

    Call args:
        potentials: float [batch, seq, num_labels]. Unary scores.

    Returns:
        float32 [batch, seq, num_labels]: `potentials`.
    """

    def __init__(self, num_labels, **kwargs):
        super().__init__(**kwargs)
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.num_labels = num_labels

    def build(self, input_shape=None):
        # Zero start: the CRF begins as per-position softmax (its likelihood factorises).
        self.transitions = self.add_weight(
            shape=(self.num_labels, self.num_labels), initializer="zeros", name="transitions")
        self.start_transitions = self.add_weight(
            shape=(self.num_labels,), initializer="zeros", name="start_transitions")
        self.end_transitions = self.add_weight(
            shape=(self.num_labels,), initializer="zeros", name="end_transitions")

    def call(self, potentials):
        return ops.cast(potentials, "float32")

    def compute_output_spec(self, potentials):
        return keras.KerasTensor(potentials.shape, "float32")

    def log_likelihood(self, potentials, labels, mask):
        """Log-probability of the label paths: `path_score - log_partition`.

        Args:
            potentials: float [batch, seq, num_labels].
            labels: int [batch, seq]. Values outside `mask` are ignored.
            mask: [batch, seq], nonzero at the positions in the chain.

        Returns:
            float32 [batch]. 0 for a sequence without selected positions.
        """
        return self.path_score(potentials, labels, mask) - self.log_partition(potentials, mask)

    def log_partition(self, potentials, mask):
        """Log of the sum of exp(score) over all label paths (the forward algorithm).

        Args:
            potentials: float [batch, seq, num_labels].
            mask: [batch, seq], nonzero at the positions in the chain.

        Returns:
            float32 [batch]. 0 for a sequence without selected positions.
        """
        steps = _time_major(potentials, mask)
        transitions = ops.cast(self.transitions, "float32")
        start = ops.cast(self.start_transitions, "float32")

        def step(carry, inputs):
            alpha, started = carry  # [batch, labels] log-sums of paths ending in each label
            emission, selected, _ = _unpack(inputs, self.num_labels)
            chained = ops.logsumexp(alpha[:, :, None] + transitions[None], axis=1) + emission
            new = ops.where(started[:, None], chained, start[None] + emission)
            alpha = ops.where(selected[:, None], new, alpha)
            started = ops.logical_or(started, selected)
            return (alpha, started), (alpha, started)

        init = _initial_state(steps, self.num_labels)
        (alpha, started), _ = ops.scan(step, init, steps)
        total = ops.logsumexp(alpha + ops.cast(self.end_transitions, "float32")[None], axis=1)
        return ops.where(started, total, ops.zeros_like(total))

    def path_score(self, potentials, labels, mask):
        """Score of the given label path over the selected positions.

        Args:
            potentials: float [batch, seq, num_labels].
            labels: int [batch, seq].
            mask: [batch, seq], nonzero at the positions in the chain.

        Returns:
            float32 [batch].
        """
        steps = _time_major(potentials, mask, labels)
        flat_transitions = ops.reshape(ops.cast(self.transitions, "float32"), (-1,))
        start = ops.cast(self.start_transitions, "float32")

        def step(carry, inputs):
            score, previous, started = carry
            emission, selected, label = _unpack(inputs, self.num_labels)
            unary = ops.take_along_axis(emission, label[:, None], axis=1)[:, 0]
            pair = ops.take(flat_transitions, previous * self.num_labels + label)
            add = unary + ops.where(started, pair, ops.take(start, label))
            score = score + ops.where(selected, add, ops.zeros_like(add))
            previous = ops.where(selected, label, previous)
            started = ops.logical_or(started, selected)
            return (score, previous, started), (score, previous, started)

        zeros, started = _initial_state(steps, self.num_labels)
        init = (zeros[:, 0], ops.cast(zeros[:, 0], "int32"), started)
        (score, last, started), _ = ops.scan(step, init, steps)
        end = ops.take(ops.cast(self.end_transitions, "float32"), last)
        return score + ops.where(started, end, ops.zeros_like(end))

    def decode(self, potentials, mask):
        """The best label path (Viterbi).

        Args:
            potentials: float [batch, seq, num_labels].
            mask: [batch, seq], nonzero at the positions in the chain.

        Returns:
            int32 [batch, seq]: the best path at the selected positions; an unselected
            position repeats the label of the selected position before it (or after it, at the
            start), and a sequence without selected positions gets label argmax(end).
        """
        steps = _time_major(potentials, mask)
        transitions = ops.cast(self.transitions, "float32")
        start = ops.cast(self.start_transitions, "float32")
        zeros, not_started = _initial_state(steps, self.num_labels)
        identity = ops.cast(zeros, "int32") + ops.arange(self.num_labels, dtype="int32")[None]

        def forward(carry, inputs):
            delta, started, _ = carry  # best score of a path ending in each label
            emission, selected, _ = _unpack(inputs, self.num_labels)
            scores = delta[:, :, None] + transitions[None]  # [batch, from, to]
            new = ops.where(started[:, None], ops.max(scores, axis=1) + emission,
                            start[None] + emission)
            # backpointer[j]: the best label before label j; unselected steps keep the label.
            pointer = ops.where(started[:, None], ops.cast(ops.argmax(scores, axis=1), "int32"),
                                identity)
            pointer = ops.where(selected[:, None], pointer, identity)
            delta = ops.where(selected[:, None], new, delta)
            started = ops.logical_or(started, selected)
            return (delta, started, pointer), (delta, started, pointer)

        init = (zeros, not_started, identity)
        (delta, _, _), (_, _, pointers) = ops.scan(forward, init, steps)
        last = ops.cast(ops.argmax(delta + ops.cast(self.end_transitions, "float32")[None],
                                   axis=1), "int32")

        def backward(label, pointer):  # `label` is the label at this step
            return ops.take_along_axis(pointer, label[:, None], axis=1)[:, 0], label

        _, path = ops.scan(backward, last, pointers, reverse=True)
        return ops.transpose(path, (1, 0))

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config


def _time_major(potentials, mask, labels=None):
    """Potentials, mask and labels as one float32 tensor [seq, batch, num_labels + 2].

    One tensor, because Keras 3.15's TensorFlow `scan` fails on several `xs` whose time
    dimension is unknown while tracing (`None.assert_is_compatible_with`). Label ids are
    exact in float32 (below 2**24).
    """
    mask = ops.cast(ops.not_equal(mask, 0), "float32")
    labels = ops.zeros_like(mask) if labels is None else ops.cast(labels, "float32")
    packed = ops.concatenate(
        [ops.cast(potentials, "float32"), mask[..., None], labels[..., None]], axis=-1)
    return ops.transpose(packed, (1, 0, 2))


def _unpack(step, num_labels):
    """One time step [batch, num_labels + 2] -> (emission, selected (bool), label (int32))."""
    return (step[:, :num_labels], step[:, num_labels] > 0,
            ops.cast(step[:, num_labels + 1], "int32"))


def _initial_state(steps, num_labels):
    """Zeros [batch, num_labels] and all-False [batch], for a scan over `steps`."""
    zeros = ops.zeros_like(steps[0, :, :num_labels])
    return zeros, ops.zeros_like(steps[0, :, 0]) > 0
