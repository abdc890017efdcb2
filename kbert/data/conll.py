"""NER data: CoNLL and two-column readers, BIO conversion, word-piece alignment, tf.data.

Two formats of one word per line, sentences separated by blank lines:
    conll       CoNLL-2003: `word POS chunk NER` (any number of columns, the same in every
                line of a file: the word first, the entity label last). `-DOCSTART-` lines
                start a new document (`Sentence.document`) and are skipped.
    two_column  `token label`, e.g. character-level Chinese NER (ResumeNER's `*.char.bmes`).

Labels are converted to BIO (IOB2) when read, so that training, decoding and scoring see one
scheme: IOB1 (CoNLL-2003's own files, where `I-` starts an entity unless it follows one of
the same type) becomes `B-` at every entity start, and BMES/BIOES (`M-`, `E-` = inside,
`S-` = single) becomes `I-` and `B-`. See `to_bio`.

`featurize` aligns words with word-pieces (the worked examples are in its docstring), splits
long sentences into consecutive or overlapping windows, optionally fills windows with the
sentence's document context, and packs them as model inputs; `training_epochs` and
`inference_dataset` batch them, and `word_labels` maps predictions back to one label per
original word.
"""

import dataclasses
import typing

import numpy as np
import tensorflow as tf
from absl import logging

from kbert import io
from kbert import text_files
from kbert.data import pipeline

FORMATS = ("conll", "two_column")
# Accepted label prefixes of each tag scheme ("auto": any of them).
TAG_SCHEMES = {"auto": "BIMESO", "bio": "BIO", "iob1": "BIO", "iob2": "BIO", "bmes": "BMESO",
               "bioes": "BIESO", "iobes": "BIESO"}
DOCSTART = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sentence of a NER file.

    Args:
        words: tuple of str. The words (or characters) as the file gives them.
        labels: tuple of str. One BIO label per word.
        path: str. The file it was read from.
        lines: tuple of int. The 1-based line number of each word.
        document: int. Its document in `path`: sentences between two `-DOCSTART-` lines
            share one number (a file without them is one document). Defaults to 0.
    """

    words: tuple
    labels: tuple
    path: str = "<memory>"
    lines: tuple = ()
    document: int = 0

    def location(self, i=0):
        """`file:line` of word `i`."""
        return f"{self.path}:{self.lines[i]}" if self.lines else f"{self.path}:word {i}"


def read_ner_file(path, data_format="conll", tag_scheme="auto"):
    """Reads a CoNLL or two-column NER file; labels come back in BIO.

    Args:
        path: str. The file (UTF-8; a byte-order mark and CRLF line ends are accepted).
        data_format: str. "conll" or "two_column". Defaults to "conll".
        tag_scheme: str. The file's scheme: "bio" (= "iob2"), "iob1", "bmes", "bioes"
            (= "iobes") or "auto" (any of these prefixes; the conversion is the same).
            Defaults to "auto".

    Returns:
        list of `Sentence`.

    Raises:
        ValueError: naming `file:line`, for a line with the wrong number of columns, a
            label that is not "O" or "<prefix>-<type>" of the scheme, or bytes that are not
            UTF-8; naming the file when it holds no sentence.
    """
    if data_format not in FORMATS:
        raise ValueError(f"data_format must be one of {FORMATS}, got {data_format!r}")
    if tag_scheme not in TAG_SCHEMES:
        raise ValueError(f"tag_scheme must be one of {sorted(TAG_SCHEMES)}, got {tag_scheme!r}")
    allowed = TAG_SCHEMES[tag_scheme]
    sentences, words, labels, lines, width, document = [], [], [], [], None, 0

    def flush():
        if words:
            sentences.append(Sentence(tuple(words), tuple(to_bio(labels)), path, tuple(lines),
                                      document))
        words.clear(), labels.clear(), lines.clear()

    with text_files.open_text(path) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                flush()
                continue
            if fields[0] == DOCSTART:
                flush()
                document += bool(sentences)  # the first document starts at 0
                continue
            if data_format == "two_column" and len(fields) != 2:
                raise ValueError(f"{path}:{number}: expected 2 columns (token label), got "
                                 f"{len(fields)}: {line.rstrip()!r}")
            if len(fields) < 2:
                raise ValueError(f"{path}:{number}: expected a word and a label, got "
                                 f"{line.rstrip()!r}")
            width = width or len(fields)
            if len(fields) != width:
                raise ValueError(f"{path}:{number}: {len(fields)} columns, but the file's "
                                 f"first word line has {width}")
            label = fields[-1]
            prefix, dash, type_ = label.partition("-")
            if not (label == "O" or prefix in allowed and prefix != "O" and dash and type_):
                raise ValueError(f"{path}:{number}: label {label!r} is not 'O' or "
                                 f"'<{'|'.join(p for p in allowed if p != 'O')}>-<type>' "
                                 f"(tag_scheme={tag_scheme!r})")
            words.append(fields[0])
            labels.append(label)
            lines.append(number)
    flush()
    if not sentences:
        raise ValueError(f"{path}: no sentences (an empty file, or only -DOCSTART- and blank "
                         "lines) — expected one word and its label per line")
    return sentences


def to_bio(labels):
    """Labels of one sentence in BIO (IOB2).

    `S-X` becomes `B-X`, and `M-X`, `E-X` become `I-X` (BMES, BIOES); then every `I-X` that
    does not continue an entity of type X (at the start, after `O` or after another type)
    becomes `B-X` (IOB1 -> IOB2). Valid BIO comes back unchanged, and the entities are those
    `kbert.tasks.ner_metrics` finds in valid input of any of these schemes.

    Args:
        labels: sequence of str.

    Returns:
        list of str.
    """
    out = []
    for label in labels:
        prefix, dash, type_ = label.partition("-")
        if prefix == "S":
            prefix = "B"
        elif prefix in ("M", "E"):
            prefix = "I"
        if prefix == "I" and (not out or out[-1] == "O" or out[-1][2:] != type_):
            prefix = "B"
        out.append(label if label == "O" else f"{prefix}{dash}{type_}")
    return out


def label_vocabulary(sentences):
    """The labels of `sentences`: "O" first, then by type, B- before I-.

    Returns:
        tuple of str.
    """
    labels = {label for s in sentences for label in s.labels}
    rest = sorted(labels - {"O"}, key=lambda label: (label[2:], label[:1]))
    return (("O",) if "O" in labels else ()) + tuple(rest)


def unseen_labels(sentences, labels):
    """`file:line: label` of every word whose label is not in `labels`, logged as a warning.

    A model cannot predict a label it never saw in training; its gold entities still count
    (as missed) when scoring.

    Returns:
        list of str.
    """
    known = set(labels)
    found = [f"{s.location(i)}: {label}" for s in sentences
             for i, label in enumerate(s.labels) if label not in known]
    if found:
        logging.warning("%d word(s) with labels unseen in training, e.g. %s", len(found),
                        "; ".join(found[:5]))
    return found


class Windows(typing.NamedTuple):
    """Model inputs of a set of sentences, one row per window (see `featurize`).

    Attributes:
        features: dict of int32 `tf.RaggedTensor` [windows, (seq)]: token_ids, segment_ids,
            padding_mask.
        label_ids: int32 `tf.RaggedTensor` [windows, (seq)]. The word's label id on the first
            piece of each word of the window's sentence, 0 elsewhere.
        label_weights: float32 `tf.RaggedTensor` [windows, (seq)]. 1 on the first piece of
            each word of the window's sentence; 0 on later pieces, document context, [CLS]
            and [SEP]: the loss and metric weights.
        word_index: int32 `tf.RaggedTensor` [windows, (seq)]. The index in its sentence of
            the word predicted at this position: its first piece in the window where it has
            the most context; -1 elsewhere.
        sentence_ids: np.ndarray of int [windows]. The sentence of each window.
        first_words: np.ndarray of int [windows]. Index in its sentence of the window's
            first word (context not counted).
        lengths: np.ndarray of int [windows]. Pieces per window, [CLS] and [SEP] included.
        num_sentences: int. Sentences featurized.
    """

    features: dict
    label_ids: tf.RaggedTensor
    label_weights: tf.RaggedTensor
    word_index: tf.RaggedTensor
    sentence_ids: np.ndarray
    first_words: np.ndarray
    lengths: np.ndarray
    num_sentences: int

    def __len__(self):
        return len(self.lengths)


def featurize(sentences, tokenizer, max_seq_length, label_map=None, batch_size=8192, *,
              window_stride=None, document_context=False):
    """Word-pieces of every word, label alignment, and windows of at most `max_seq_length`.

    Each word is tokenized on its own (`tokenizer.tokenize_ids` of the word as the file gives
    it), so words are never merged or split differently from the data. The word's label goes
    on its first piece; later pieces, `[CLS]` and `[SEP]` get weight 0, so they count in
    neither the loss nor the metric. A sentence whose pieces do not fit in `max_seq_length`
    (with `[CLS]` and `[SEP]`) is split between words into windows, each packed as
    `[CLS] pieces [SEP]`: by default consecutive ones, every word in exactly one. With
    `max_seq_length=10` (8 pieces a window), BERT's uncased vocabulary and labels
    {O: 0, B-PER: 1, I-PER: 2, B-LOC: 3}:

        words      Koizumi            met   Jagdeep                in   Oslo    .
        labels     B-PER              O     B-PER                  O    B-LOC   O
        window 0 (first_words 0):
        pieces     [CLS] ko ##iz ##umi met   ja ##g ##dee ##p [SEP]
        label_ids    0   1   0    0     0    1   0   0    0     0
        weights      0   1   0    0     1    1   0   0    0     0
        window 1 (first_words 3):
        pieces     [CLS]                                       in   oslo    .   [SEP]
        label_ids    0                                         0    3       0     0
        weights      0                                         1    1       1     0

    "Koizumi" is three pieces and only `ko` carries B-PER; "in" does not fit in window 0
    (3 + 1 + 4 + 1 = 9 pieces > 8), so window 1 starts at word 3. The loss and the metric
    read only the weight-1 positions, and `word_labels` maps them back to words in order.

    With `window_stride`, windows overlap: each starts at the first word at least
    `window_stride` pieces after the previous window's start (never past the previous
    window's end) and holds as many whole words as fit. Every window is labelled in full,
    and each word is predicted from the window where it has the most context (the larger
    min(pieces left of it, pieces right of it) + 0.01 * window pieces, the first on a tie, as
    run_squad.py's `_check_is_max_context`). The sentence above with `window_stride=4`:

        window 0 (pieces 0-7):   [CLS] ko ##iz ##umi met ja ##g ##dee ##p [SEP]
        window 1 (pieces 4-10):  [CLS] ja ##g ##dee ##p in oslo . [SEP]
        Jagdeep (piece 4): window 0 scores min(4, 3) + 0.08 = 3.08, window 1
        min(0, 6) + 0.07 = 0.07, so it is predicted from window 0 (`word_index` 2 at
        position 5 of window 0, -1 at position 1 of window 1); in, Oslo, . from window 1.

    With `document_context`, a sentence that fits in a window is surrounded by the nearest
    whole words of the sentences before and after it in the same document (`Sentence.path`
    and `.document`), as many as fit, split evenly between the two sides (a side with less
    text leaves its share to the other). Context pieces get label 0 and weight 0 and are
    never predicted. With `max_seq_length=10` (8 pieces), the target "Oslo ." (2 pieces)
    between "He met Jagdeep ." and "It rained ." of one document has 6 pieces for context,
    3 a side; the right side needs only 3 (it rained .), so the left may take 3. Whole words
    from the target outward: "." fits, "Jagdeep" (4 pieces) does not; the right side then
    takes what is left (5), all of "It rained .":

        pieces     [CLS]  .   oslo  .   it  rained  .  [SEP]
        label_ids    0    0    3    0   0     0     0    0
        weights      0    0    1    1   0     0     0    0
        word_index  -1   -1    0    1  -1    -1    -1   -1

    A sentence longer than a window gets no context (its own words are its context).

    A word the vocabulary cannot cover is one `[UNK]` piece carrying the word's label; a
    word that tokenizes to nothing (only characters BERT deletes, e.g. U+200B) is given one
    `[UNK]` piece too, so that every word gets a prediction. A single word with more pieces
    than a window holds keeps its first pieces (its label is on the first) and is logged.

    Args:
        sentences: list of `Sentence`.
        tokenizer: `kbert.FullTokenizer`.
        max_seq_length: int. Pieces per window, `[CLS]` and `[SEP]` included; at least 3.
        label_map: dict of str -> int or None. Label ids; None gives label_ids 0 (for
            prediction). Every label must be in it.
        batch_size: int. Words per tokenizer call. Defaults to 8192.
        window_stride: int or None. Pieces between the starts of overlapping windows of a
            sentence longer than a window; None for consecutive windows. Defaults to None.
        document_context: bool. Fill windows with the neighbouring sentences of the same
            document. Defaults to False.

    Returns:
        `Windows`.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be >= 3 ([CLS] piece [SEP]), got "
                         f"{max_seq_length}")
    if window_stride is not None and window_stride < 1:
        raise ValueError(f"window_stride must be >= 1 piece, got {window_stride}")
    capacity = max_seq_length - 2
    cls_id, sep_id, unk_id = (tokenizer.vocab[t] for t in ("[CLS]", "[SEP]", "[UNK]"))
    pieces = _word_pieces([w for s in sentences for w in s.words], tokenizer, batch_size)
    long_words, words_of, cursor = [], [], 0
    for sentence in sentences:
        words = []
        for i in range(len(sentence.words)):
            word = pieces[cursor + i] or [unk_id]
            if len(word) > capacity:
                long_words.append(f"{sentence.location(i)} ({len(word)} pieces)")
                word = word[:capacity]
            words.append(word)
        cursor += len(sentence.words)
        words_of.append(words)
    documents = [(s.path, s.document) for s in sentences]
    rows = {key: [] for key in ("tokens", "labels", "weights", "words")}
    sentence_ids, first_words, split_sentences = [], [], 0
    for sentence_id, (sentence, words) in enumerate(zip(sentences, words_of, strict=True)):
        label_ids = _label_ids(sentence, label_map)
        counts = [len(word) for word in words]
        bounds = _window_bounds(counts, capacity, window_stride)
        split_sentences += len(bounds) > 1
        best = _max_context_windows(counts, bounds)
        for window, (first, end) in enumerate(bounds):
            left, right = [], []
            if document_context and len(bounds) == 1:
                left, right = _context(words_of, documents, sentence_id, capacity - sum(counts))
            head = len(left) + 1  # [CLS] and the left context: never labelled or predicted
            tokens, labels, weights, index = [cls_id, *left], [0] * head, [0.0] * head, [-1] * head
            for i in range(first, end):
                tokens += words[i]
                labels += [label_ids[i]] + [0] * (len(words[i]) - 1)
                weights += [1.0] + [0.0] * (len(words[i]) - 1)
                index += [i if best[i] == window else -1] + [-1] * (len(words[i]) - 1)
            tail = len(right) + 1
            rows["tokens"].append(tokens + right + [sep_id])
            rows["labels"].append(labels + [0] * tail)
            rows["weights"].append(weights + [0.0] * tail)
            rows["words"].append(index + [-1] * tail)
            sentence_ids.append(sentence_id)
            first_words.append(first)
    if split_sentences:
        logging.info("%d of %d sentences are longer than max_seq_length=%d pieces and were "
                     "split into %s windows", split_sentences, len(sentences), max_seq_length,
                     "overlapping" if window_stride else "consecutive")
    if long_words:
        logging.warning("%d word(s) have more pieces than a window holds (%d) and keep their "
                        "first %d: %s", len(long_words), capacity, capacity,
                        "; ".join(long_words[:5]))
    lengths = np.array([len(row) for row in rows["tokens"]], np.int64)

    def ragged(rows, dtype):
        flat = np.fromiter((v for row in rows for v in row), dtype, count=int(lengths.sum()))
        return tf.RaggedTensor.from_row_lengths(flat, lengths)

    token_ids = ragged(rows["tokens"], np.int32)
    features = {"token_ids": token_ids,
                "segment_ids": tf.zeros_like(token_ids),
                "padding_mask": tf.ones_like(token_ids)}
    return Windows(features, ragged(rows["labels"], np.int32),
                   ragged(rows["weights"], np.float32), ragged(rows["words"], np.int32),
                   np.array(sentence_ids, np.int64), np.array(first_words, np.int64), lengths,
                   len(sentences))


def _window_bounds(piece_counts, capacity, stride=None):
    """(first, end) word ranges of the windows of one sentence, each of at most `capacity`
    pieces (a single longer word alone): consecutive, or with `stride` overlapping (see
    `featurize`); one empty window for an empty sentence."""
    offsets = np.concatenate([[0], np.cumsum(piece_counts, dtype=np.int64)])
    bounds, first = [], 0
    while True:
        end = first + 1
        while end < len(piece_counts) and offsets[end + 1] - offsets[first] <= capacity:
            end += 1
        end = min(end, len(piece_counts))
        bounds.append((first, end))
        if end >= len(piece_counts):
            return bounds
        if stride is None:
            first = end
        else:  # the first word `stride` pieces on, but leave no word out
            first = min(int(np.searchsorted(offsets, offsets[first] + stride)), end)


def _max_context_windows(piece_counts, bounds):
    """For each word of a sentence, the window (index into `bounds`) where it has the most
    context, as run_squad.py `_check_is_max_context` scores it in pieces."""
    offsets = np.concatenate([[0], np.cumsum(piece_counts, dtype=np.int64)])
    best, score = [0] * len(piece_counts), [-1.0] * len(piece_counts)
    for window, (first, end) in enumerate(bounds):
        start, stop = offsets[first], offsets[end]
        for i in range(first, end):
            value = min(offsets[i] - start, stop - 1 - offsets[i]) + 0.01 * (stop - start)
            if value > score[i]:
                best[i], score[i] = window, value
    return best


def _context(words_of, documents, sentence_id, budget):
    """(left, right) context pieces of a sentence: the nearest whole words of the sentences
    of its document, at most `budget` pieces in all, split evenly (see `featurize`)."""
    if budget <= 0:
        return [], []
    right_wanted = len(_side(words_of, documents, sentence_id, +1, budget))
    left = _side(words_of, documents, sentence_id, -1, max(budget // 2, budget - right_wanted))
    return left, _side(words_of, documents, sentence_id, +1, budget - len(left))


def _side(words_of, documents, sentence_id, step, budget):
    """Pieces of the nearest whole words on one side (`step` -1: before, +1: after) of a
    sentence within its document, at most `budget`, in text order."""
    taken, used, other = [], 0, sentence_id + step
    while 0 <= other < len(words_of) and documents[other] == documents[sentence_id]:
        for word in (words_of[other] if step > 0 else reversed(words_of[other])):
            if used + len(word) > budget:
                return _in_order(taken, step)
            taken.append(word)
            used += len(word)
        other += step
    return _in_order(taken, step)


def _in_order(words, step):
    return [piece for word in (words if step > 0 else reversed(words)) for piece in word]


def _word_pieces(words, tokenizer, batch_size):
    """Piece ids of every word, each tokenized on its own: list of lists of int."""
    out = []
    for start in range(0, len(words), batch_size):
        ids = tokenizer.tokenize_ids(words[start:start + batch_size])
        values = ids.flat_values.numpy().tolist()
        splits = ids.row_splits.numpy().tolist()
        out += [values[a:b] for a, b in zip(splits[:-1], splits[1:], strict=True)]
    return out


def _label_ids(sentence, label_map):
    if label_map is None:
        return [0] * len(sentence.words)
    try:
        return [label_map[label] for label in sentence.labels]
    except KeyError:
        i = next(i for i, label in enumerate(sentence.labels) if label not in label_map)
        raise ValueError(f"{sentence.location(i)}: label {sentence.labels[i]!r} is not in the "
                         f"label vocabulary {sorted(label_map)}") from None


def training_epochs(windows, batch_size, seed=0, bucket_boundaries=None):
    """Shuffled, length-grouped batches of (inputs, label_ids, label_weights) for `fit`, each
    epoch's order a function of (seed, epoch) (`kbert.data.pipeline.training_epochs`).

    Args:
        windows: `Windows` featurized with a `label_map`.
        batch_size: int. Windows per batch.
        seed: int. Shuffle seed. Defaults to 0.
        bucket_boundaries: list of int. Length buckets instead of sorted pools, as in
            `kbert.data.pipeline.training_epochs`. Defaults to None.

    Returns:
        (function first_epoch -> endless `tf.data.Dataset` of (dict of int32 [batch, seq],
        int32 [batch, seq], float32 [batch, seq]) from that epoch on, steps per epoch).
        Padding has weight 0.
    """
    if not len(windows):
        raise ValueError("no training sentences")
    return pipeline.training_epochs(
        pipeline.Tokenized(windows.features, windows.lengths),
        (windows.label_ids, windows.label_weights), batch_size, seed, bucket_boundaries)


def inference_dataset(windows, batch_size):
    """Batches of (inputs, label_weights) sorted by length, for prediction.

    Returns:
        (`tf.data.Dataset`, `order`: np.ndarray [windows], the window of each row the
        dataset yields, in order).
    """
    return pipeline.inference_dataset(pipeline.Tokenized(windows.features, windows.lengths),
                                      batch_size, labels=(windows.label_weights,))


def word_labels(windows, predicted_ids, label_names, sentences):
    """One predicted label per original word, from per-window predicted label ids.

    Args:
        windows: `Windows` of `sentences`.
        predicted_ids: list of int arrays, one per window (in `windows` order), each at
            least as long as the window's pieces; read where `windows.word_index` >= 0.
        label_names: sequence of str. Name of each label id.
        sentences: list of `Sentence`.

    Returns:
        list (per sentence) of lists of str, one label per word.
    """
    out = [[None] * len(s.words) for s in sentences]
    word_index = windows.word_index.to_list()
    for window, sentence in enumerate(windows.sentence_ids):
        index = np.asarray(word_index[window])
        positions = np.flatnonzero(index >= 0)
        ids = np.asarray(predicted_ids[window])[positions]
        for i, label_id in zip(index[positions], ids, strict=True):
            out[sentence][i] = label_names[int(label_id)]
    missing = [sentences[s].location(i) for s, row in enumerate(out)
               for i, label in enumerate(row) if label is None]
    if missing:
        raise ValueError(f"no prediction for {len(missing)} word(s), e.g. {missing[:3]}")
    return out


def write_predictions(path, sentences, predicted):
    """Writes `word gold predicted` lines, a blank line after each sentence (conlleval's input).

    Gold labels are the BIO labels the scores were computed on.
    """
    with io.atomic_write(path) as f:
        for sentence, labels in zip(sentences, predicted, strict=True):
            f.writelines(f"{w} {g} {p}\n" for w, g, p in zip(sentence.words, sentence.labels,
                                                             labels, strict=True))
            f.write("\n")
