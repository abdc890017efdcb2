"""SQuAD v1.1 and v2.0: the JSON reader and the featurizer of Google's run_squad.py.

Reading (`read_squad_examples`). A context is split into words on whitespace (space, tab, CR,
LF and U+202F only, as Google's `is_whitespace`); a training answer's character offset becomes a
word span. An answer whose text is not at its `answer_start`, or that Google's word-level check
cannot recover, is skipped, counted and logged, never kept with a wrong span. Google raises when
a training question has several answers (SQuAD dev has 3 to 6); here the first one is trained on
and all of them are kept in `answers` for evaluation.

Featurizing (`convert_examples_to_features`). Each word is word-piece tokenized on its own (so
pieces never cross words); the question is cut to `max_query_length` pieces; the context pieces
are cut into windows of `max_seq_length - len(question) - 3` pieces that start every
`doc_stride` pieces; a piece seen by several windows is scored in the window where it has the
most context on its nearer side (`token_is_max_context`). A training answer is first moved to
the piece span whose text equals the tokenized answer (`_improve_answer_span`). Worked example,
`max_seq_length=14`, `doc_stride=2`, `max_query_length=8`, answer "1895" (ids and padding left
out):

    context words   The leader was John Smith (1895-1943).
    word pieces     the leader was john smith ( 1895 - 1943 ) .       (11 pieces)
    piece -> word   0   1      2   3    4     5 5    5 5    5 5
    answer "1895"   word 5 -> pieces 5..10 -> improved to piece 6 ("1895")
    question        "Born when?" -> born when ?                       (3 pieces)
    window room     14 - 3 - 3 = 8 pieces; windows start at pieces 0, 2, 4

    window 0  [CLS] born when ? [SEP] the leader was john smith ( 1895 - [SEP]   answer 11..11
    window 1  [CLS] born when ? [SEP] was john smith ( 1895 - 1943 ) [SEP]       answer 9..9
    window 2  [CLS] born when ? [SEP] smith ( 1895 - 1943 ) . [SEP]              answer 7..7
    segment   0     0    0    0 0     1 ...                                1
    max context of piece 6 ("1895"): min(left, right) + 0.01 * length is 1.08 in window 0,
              3.08 in window 1 (4 pieces before, 3 after) and 2.07 in window 2: window 1 owns it

The third window ends at the last piece, so no fourth is made. A window that does not contain
the whole answer is labelled [CLS] (position 0) for SQuAD 2.0, and dropped for v1.1 training
(the v1.1 model masks [CLS] out; Google labels it [CLS] in both versions).
"""

import dataclasses
import json
import os

import numpy as np
from absl import logging

# run_squad.py read_squad_examples `is_whitespace`: not str.isspace (no NBSP, no U+2009).
_WHITESPACE = frozenset(" \t\r\n\u202f")


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one context.

    Attributes:
        qas_id: str. The question id.
        question_text: str.
        doc_tokens: tuple of str. The context's whitespace words (one tuple shared by all the
            questions of a paragraph).
        answers: tuple of str. Every gold answer text, for evaluation.
        orig_answer_text: str or None. The training answer ("" when impossible).
        start_position: int or None. Word index of the training answer's first word (-1 when
            impossible); None when not read for training.
        end_position: int or None. Word index of its last word.
        is_impossible: bool. SQuAD 2.0 question without an answer.
    """

    qas_id: str
    question_text: str
    doc_tokens: tuple
    answers: tuple = ()
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


def words_and_char_to_word(text):
    """Whitespace words of `text` and, per character, the index of its word.

    As run_squad.py `read_squad_examples`: a whitespace character maps to the word before it
    (-1 before the first word).

    Returns:
        (tuple of str, list of int [len(text)]).
    """
    words, char_to_word, previous_is_space = [], [], True
    for c in text:
        if c in _WHITESPACE:
            previous_is_space = True
        else:
            if previous_is_space:
                words.append(c)
            else:
                words[-1] += c
            previous_is_space = False
        char_to_word.append(len(words) - 1)
    return tuple(words), char_to_word


def read_squad_examples(input_file, is_training, version_2_with_negative=False, source=None):
    """Reads a SQuAD JSON file (or its parsed content) into `SquadExample`s.

    Args:
        input_file: str, or the parsed JSON (a dict with "data", or the list of articles).
        is_training: bool. Resolve each question's first answer to a word span; skip (and log)
            the answers that cannot be found at their offset.
        version_2_with_negative: bool. Read `is_impossible` (SQuAD 2.0). Defaults to False.
        source: str. The file name errors give for parsed JSON. Defaults to "SQuAD data".

    Returns:
        list of `SquadExample`, in file order.

    Raises:
        ValueError: naming the file and the JSON path, for a file that is not SQuAD JSON or
            repeats a question id, and for training data where no question has a usable
            answer.
    """
    examples, skipped = parse_squad(input_file, is_training, version_2_with_negative, source)
    source = os.fspath(input_file) if isinstance(input_file, (str, os.PathLike)) else (
        source or "SQuAD data")
    if skipped and not examples:
        raise ValueError(f"{source}: none of the {len(skipped)} training question(s) has a "
                         f"usable answer, e.g. {skipped[0][0]}: {skipped[0][1]} — check that "
                         "each answer's text is at its answer_start in the context")
    if skipped:
        logging.warning("%s: skipped %d of %d training question(s) whose answer cannot be used; "
                        "first: %s", source, len(skipped), len(examples) + len(skipped),
                        "; ".join(f"{q}: {why}" for q, why in skipped[:5]))
    if not examples:
        raise ValueError(f"{source}: no questions — expected {_SHAPE}")
    return examples


def parse_squad(data, is_training, version_2_with_negative=False, source=None):
    """`read_squad_examples` without logging: returns (examples, skipped).

    `skipped` lists (qas_id, reason) for each training question whose answer is not at its
    `answer_start`, runs past the context, is empty, or is not recovered by Google's check that
    the answer's whitespace-normalized text occurs in the words of its span.
    """
    if isinstance(data, (str, os.PathLike)):
        source = os.fspath(data)
        data = load_squad_file(source)
    source = source or "SQuAD data"
    articles = _articles(data, source)
    examples, skipped = [], []
    # Predictions and scores are keyed by question id: a repeated id would be answered once
    # and scored as if every copy were there; in training data it is a copied question.
    first_seen = {}
    for i, article in enumerate(articles):
        where = f"data[{i}]"
        for j, paragraph in enumerate(_field(article, "paragraphs", list, source, where)):
            where = f"data[{i}].paragraphs[{j}]"
            context = _field(paragraph, "context", str, source, where)
            doc_tokens, char_to_word = words_and_char_to_word(context)
            for k, qa in enumerate(_field(paragraph, "qas", list, source, where)):
                where = f"data[{i}].paragraphs[{j}].qas[{k}]"
                _field(qa, "id", (str, int), source, where)
                if first_seen.setdefault(qa["id"], where) != where:
                    raise ValueError(f"{source}: {where}.id {qa['id']!r} is also the id of "
                                     f"{first_seen[qa['id']]} — question ids must be unique")
                _field(qa, "question", str, source, where)
                for m, answer in enumerate(_field(qa, "answers", list, source, where, [])):
                    _field(answer, "text", str, source, f"{where}.answers[{m}]")
                    if is_training and m == 0:
                        _field(answer, "answer_start", int, source, f"{where}.answers[0]")
                answers = tuple(a["text"] for a in qa.get("answers", ()))
                is_impossible = _flag(qa, "is_impossible", source, where)
                is_impossible = is_impossible and version_2_with_negative
                example = SquadExample(qa["id"], qa["question"], doc_tokens, answers,
                                       is_impossible=is_impossible)
                if is_training:
                    example, problem = _with_answer_span(example, qa, context, char_to_word)
                    if problem:
                        skipped.append((qa["id"], problem))
                        continue
                examples.append(example)
    return examples, skipped


_SHAPE = ('SQuAD JSON: {"data": [{"paragraphs": [{"context": str, "qas": [{"id": str, '
          '"question": str, "answers": [{"text": str, "answer_start": int}]}]}]}]}')


def load_squad_file(path):
    """The parsed JSON of a SQuAD file; a ValueError names the file when it is not SQuAD."""
    with open(path, encoding="utf-8-sig") as f:
        try:
            data = json.load(f)
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason}) — expected {_SHAPE}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not JSON ({e.msg}, column {e.colno}) — "
                             f"expected {_SHAPE}") from None
    _articles(data, path)
    return data


def _articles(data, source):
    articles = data.get("data") if isinstance(data, dict) else data
    if not isinstance(articles, list):
        found = (f"an object with keys {sorted(data)[:8]}" if isinstance(data, dict)
                 else f"a JSON {type(data).__name__}")
        raise ValueError(f"{source}: not SQuAD: found {found} — expected {_SHAPE}")
    return articles


def _field(parent, key, types, source, where, default=None):
    """`parent[key]`, checked to be of `types`; a ValueError names the file and the JSON path."""
    if not isinstance(parent, dict):
        raise ValueError(f"{source}: {where} is a JSON {type(parent).__name__}, not an object "
                         f"— expected {_SHAPE}")
    if key not in parent and default is not None:
        return default
    if key not in parent:
        raise ValueError(f"{source}: {where} has no {key!r} — expected {_SHAPE}")
    value = parent[key]
    if not isinstance(value, types) or isinstance(value, bool):
        raise ValueError(f"{source}: {where}.{key} is {value!r:.40}, of type "
                         f"{type(value).__name__} — expected {_SHAPE}")
    return value


def _flag(qa, key, source, where):
    """`qa[key]` (False if absent) as a bool: JSON true or false, or 1 or 0. A string such as
    "false" raises ValueError: it would be true."""
    value = qa.get(key, False)
    if not (isinstance(value, bool) or isinstance(value, int) and value in (0, 1)):
        raise ValueError(f"{source}: {where}.{key} is {value!r:.40}, of type "
                         f"{type(value).__name__} — expected true or false")
    return bool(value)


def _with_answer_span(example, qa, context, char_to_word):
    if example.is_impossible:
        return dataclasses.replace(example, orig_answer_text="", start_position=-1,
                                   end_position=-1), None
    if not qa.get("answers"):
        return None, ("no answer (is_impossible needs version_2_with_negative)"
                      if qa.get("is_impossible") else "no answer")
    text, start = qa["answers"][0]["text"], qa["answers"][0]["answer_start"]
    if not text.strip():
        return None, "empty answer text"
    if not 0 <= start <= len(context) - len(text) or context[start:start + len(text)] != text:
        found = context[max(start, 0):max(start, 0) + len(text)]
        return None, f"answer {text!r} is not at answer_start {start} (found {found!r})"
    first, last = char_to_word[start], char_to_word[start + len(text) - 1]
    # Google's own check (read_squad_examples): whitespace-normalized answer inside its words.
    if " ".join(example.doc_tokens[first:last + 1]).find(" ".join(text.split())) == -1:
        return None, f"answer {text!r} not recovered from its words"
    return dataclasses.replace(example, orig_answer_text=text, start_position=first,
                               end_position=last), None


@dataclasses.dataclass(frozen=True)
class SquadFeatures:
    """The windows of a list of examples, as arrays (Google's `InputFeatures`, in columns).

    Attributes:
        token_ids: int32 [features, seq]. `[CLS] question [SEP] window [SEP]`, zero padded.
        segment_ids: int32 [features, seq]. 0 for [CLS], question and first [SEP]; 1 after.
        padding_mask: int32 [features, seq]. 1 for real tokens.
        example_index: int32 [features]. Index into the examples.
        doc_span_index: int32 [features]. Window number within its example.
        token_to_orig: int32 [features, seq]. Word index of each context piece; -1 elsewhere
            (Google's `token_to_orig_map`).
        token_is_max_context: bool [features, seq]. Google's `token_is_max_context`; False
            outside the context.
        tokens: tuple of tuple of str [features]. The word pieces, without padding.
        start_positions: int32 [features] or None. Training label: answer start (0 = [CLS]).
        end_positions: int32 [features] or None. Training label: answer end.
        is_impossible: bool [features]. The example's `is_impossible`.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    example_index: np.ndarray
    doc_span_index: np.ndarray
    token_to_orig: np.ndarray
    token_is_max_context: np.ndarray
    tokens: tuple
    start_positions: np.ndarray | None
    end_positions: np.ndarray | None
    is_impossible: np.ndarray

    def __len__(self):
        return len(self.example_index)

    def inputs(self):
        """The model inputs: dict of int32 [features, seq] `token_ids`, `segment_ids`,
        `padding_mask`."""
        return {"token_ids": self.token_ids, "segment_ids": self.segment_ids,
                "padding_mask": self.padding_mask}


def convert_examples_to_features(examples, tokenizer, max_seq_length=384, doc_stride=128,
                                 max_query_length=64, is_training=False,
                                 version_2_with_negative=False):
    """Examples to model windows, as Google's run_squad.py `convert_examples_to_features`.

    Args:
        examples: sequence of `SquadExample`.
        tokenizer: a FullTokenizer (kbert's or Google's): `tokenize(text)` -> list of str,
            `convert_tokens_to_ids(tokens)` -> list of int; kbert's `tokenize_ids` is used
            to tokenize every question and distinct word in one batch.
        max_seq_length: int. Window length in pieces, [CLS] and [SEP]s included. Defaults
            to 384.
        doc_stride: int. Pieces between window starts. Defaults to 128.
        max_query_length: int. Questions are cut to this many pieces. Defaults to 64.
        is_training: bool. Compute `start_positions`/`end_positions` (examples must come
            from `read_squad_examples(..., is_training=True)`). Defaults to False.
        version_2_with_negative: bool. Label windows without the answer [CLS] instead of
            dropping them. Defaults to False.

    Returns:
        `SquadFeatures`, windows in example order.
    """
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than "
                         f"max_query_length ({max_query_length}) + 3")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be >= 1, got {doc_stride}")
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    # Every question, distinct word and training answer is tokenized once, in one batch.
    questions = tokenize_texts(tokenizer, [e.question_text for e in examples])
    words = list(dict.fromkeys(w for doc in dict.fromkeys(e.doc_tokens for e in examples)
                               for w in doc))
    pieces_of_word = dict(zip(words, tokenize_texts(tokenizer, words), strict=True))
    answers = iter(tokenize_texts(tokenizer, [
        e.orig_answer_text for e in examples if is_training and not e.is_impossible]))
    documents = {}
    rows, dropped, without_windows = [], 0, 0
    for example_index, example in enumerate(examples):
        query = questions[example_index][:max_query_length]
        query_ids = tokenizer.convert_tokens_to_ids(query)
        doc = documents.get(example.doc_tokens)
        if doc is None:  # once per paragraph
            doc = documents[example.doc_tokens] = _paragraph_pieces(
                example.doc_tokens, pieces_of_word, tokenizer)
        pieces, piece_ids, piece_to_word, word_to_piece = doc
        answer = None
        if is_training and not example.is_impossible:
            start = word_to_piece[example.start_position]
            end = (word_to_piece[example.end_position + 1] - 1
                   if example.end_position < len(example.doc_tokens) - 1 else len(pieces) - 1)
            answer = _improve_answer_span(pieces, start, end, " ".join(next(answers)))
        spans = _doc_spans(len(pieces), max_seq_length - len(query) - 3, doc_stride)
        owner = _max_context_window(spans, len(pieces))
        offset = len(query) + 2  # [CLS] question [SEP]
        kept = 0
        for span_index, (start, length) in enumerate(spans):
            positions = None
            if is_training:
                positions = (0, 0)
                if answer is not None and start <= answer[0] and answer[1] <= start + length - 1:
                    positions = (answer[0] - start + offset, answer[1] - start + offset)
                elif answer is not None and not version_2_with_negative:
                    dropped += 1
                    continue
            window = slice(start, start + length)
            rows.append((example_index, span_index, query, query_ids, pieces[window],
                         piece_ids[window], piece_to_word[window], owner[window] == span_index,
                         positions, example.is_impossible))
            kept += 1
        without_windows += kept == 0
    if dropped:
        logging.info("dropped %d training window(s) without the answer (v1.1: nothing to "
                     "predict there)", dropped)
    if without_windows:
        logging.warning("%d of %d example(s) have no window (empty context, or an answer "
                        "longer than a window)", without_windows, len(examples))
    return _to_arrays(rows, max_seq_length, cls_id, sep_id, is_training)


def tokenize_texts(tokenizer, texts, batch_size=4096):
    """`tokenizer.tokenize` of each text: list of list of str.

    kbert's in-graph FullTokenizer tokenizes a whole batch in one call (`tokenize_ids`);
    other tokenizers (Google's) are called text by text.
    """
    texts = list(texts)
    batched = getattr(tokenizer, "tokenize_ids", None)
    if batched is None or getattr(tokenizer, "never_split", None):
        return [tokenizer.tokenize(text) for text in texts]
    pieces = []
    for i in range(0, len(texts), batch_size):
        for ids in batched(texts[i:i + batch_size]).to_list():
            pieces.append(tokenizer.convert_ids_to_tokens(ids))
    return pieces


def _paragraph_pieces(words, pieces_of_word, tokenizer):
    """A paragraph's pieces, their ids, piece -> word and word -> first piece (as Google)."""
    pieces, piece_to_word, word_to_piece = [], [], []
    for i, word in enumerate(words):
        word_to_piece.append(len(pieces))
        pieces.extend(pieces_of_word[word])
        piece_to_word.extend([i] * len(pieces_of_word[word]))
    ids = np.asarray(tokenizer.convert_tokens_to_ids(pieces), np.int32).reshape(-1)
    return (tuple(pieces), ids, np.asarray(piece_to_word, np.int32),
            np.asarray(word_to_piece, np.int64))


def _improve_answer_span(pieces, start, end, answer_text):
    """The innermost piece span within [start, end] whose text is the tokenized answer.

    As run_squad.py `_improve_answer_span` (`answer_text`: the answer's pieces joined by
    spaces): "(1895-1943)." answering "1895" becomes the one piece "1895". If no sub-span
    matches (the answer "Japan" inside the word "Japanese"), the word-level span is kept.
    """
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(pieces[new_start:new_end + 1]) == answer_text:
                return new_start, new_end
    return start, end


def _doc_spans(num_pieces, max_pieces, doc_stride):
    """(start, length) windows over `num_pieces` context pieces, as Google's `doc_spans`."""
    spans, start = [], 0
    while start < num_pieces:
        length = min(num_pieces - start, max_pieces)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


def _max_context_window(spans, num_pieces):
    """For each piece, the window where it has the most context ([num_pieces] int).

    Google's `_check_is_max_context`, for all pieces at once: the score in a window is
    min(pieces to the left, pieces to the right) + 0.01 * window length, and the first window
    with the highest score wins (np.argmax keeps the first maximum, as Google's strict `>`).
    """
    if not spans:
        return np.zeros(num_pieces, np.int64)
    starts, lengths = (np.asarray(x, np.int64)[:, None] for x in zip(*spans, strict=True))
    position = np.arange(num_pieces, dtype=np.int64)[None, :]
    left, right = position - starts, starts + lengths - 1 - position
    score = np.minimum(left, right) + 0.01 * lengths
    return np.argmax(np.where((left >= 0) & (right >= 0), score, -np.inf), axis=0)


def _to_arrays(rows, max_seq_length, cls_id, sep_id, is_training):
    count = len(rows)
    token_ids = np.zeros((count, max_seq_length), np.int32)
    segment_ids = np.zeros((count, max_seq_length), np.int32)
    padding_mask = np.zeros((count, max_seq_length), np.int32)
    token_to_orig = np.full((count, max_seq_length), -1, np.int32)
    max_context = np.zeros((count, max_seq_length), bool)
    labels = np.zeros((count, 2), np.int32)
    tokens = []
    for row, (_, _, query, query_ids, pieces, ids, to_word, owned, positions, _) in \
            enumerate(rows):
        begin = len(query) + 2
        end = begin + len(pieces)  # the last [SEP]
        token_ids[row, 0], token_ids[row, begin - 1], token_ids[row, end] = cls_id, sep_id, sep_id
        token_ids[row, 1:begin - 1] = query_ids
        token_ids[row, begin:end] = ids
        segment_ids[row, begin:end + 1] = 1
        padding_mask[row, :end + 1] = 1
        token_to_orig[row, begin:end] = to_word
        max_context[row, begin:end] = owned
        tokens.append(("[CLS]", *query, "[SEP]", *pieces, "[SEP]"))
        if positions is not None:
            labels[row] = positions
    column = lambda i, dtype: np.asarray([r[i] for r in rows], dtype)  # noqa: E731
    return SquadFeatures(
        token_ids=token_ids, segment_ids=segment_ids, padding_mask=padding_mask,
        example_index=column(0, np.int32), doc_span_index=column(1, np.int32),
        token_to_orig=token_to_orig, token_is_max_context=max_context, tokens=tuple(tokens),
        start_positions=labels[:, 0].copy() if is_training else None,
        end_positions=labels[:, 1].copy() if is_training else None,
        is_impossible=column(9, bool))
