"""The in-graph serving module: raw strings or token ids in, task outputs out.

Everything here is TensorFlow and tensorflow-text ops, so a SavedModel of a `ServingModule`
loads and runs where only those two are installed.
"""

import tensorflow as tf

from kbert.data.pipeline import FEATURES
from kbert.export import tagging
from kbert.tokenization import packing
from kbert.tokenization.preprocessor import BertPreprocessor

TEXT_SIGNATURE = "serving_default"
TOKEN_IDS_SIGNATURE = "serve_token_ids"
_IDS = tf.TensorSpec([None, None], tf.int32)
_STRINGS = tf.TensorSpec([None], tf.string)


class _Callables:
    """The Keras objects the serving functions call, kept out of the SavedModel's object graph.

    Not a `tf.Module` attribute: `tf.saved_model.save` would walk every layer and trace their
    functions, for objects that no server uses (MiniLM's export took 6.63 s with them and
    3.14 s without, `bench/export_time.py` on the AMD AVX-512 VM, 2026-11-29). The
    signatures capture the model's variables, which `ServingModule.model_variables` keeps in
    the graph.
    """

    def __init__(self, model, preprocessor):
        self.model = model
        self.preprocessor = preprocessor
        self.tokenizer = preprocessor.tokenizer

        def forward(features):
            return model(features, training=False)

        # The model traced once and called from both signatures: a second trace of the
        # forward pass made every export slower and every SavedModel hold the model twice.
        self.forward = tf.function(forward, input_signature=[{name: _IDS for name in FEATURES}],
                                   autograph=False)


class ServingModule(tf.Module):
    """A model with its tokenizer, vocab and label names, and the serving functions.

    Args:
        model: the Keras model (see `kbert.export.export_saved_model`).
        task: str. "encoder", "classifier", "span_labeler" or "tagger".
        assets: dict of str -> path. Files to carry as SavedModel assets: "vocab" (one token
            a line, in id order), and "labels" (one label name a line), "added_tokens".
        vocab: `kbert.tokenization.Vocab`.
        do_lower_case, never_split, max_seq_length: the preprocessing of training.
        text_pair: bool. `serving_default` takes `text_a`, `text_b` rather than `text`.
        max_query_length, max_answer_length, null_score_diff_threshold: span labeler only.
        thresholds: list of float [labels], or None. A multi-label classifier's: a label is
            predicted where its probability is at least its threshold.
    """

    def __init__(self, model, task, assets, vocab, do_lower_case, never_split, max_seq_length,
                 text_pair, max_query_length, max_answer_length, null_score_diff_threshold,
                 thresholds=None):
        super().__init__(name=f"kbert_{task}")
        self.model_variables = list(model.variables)
        self.task = task
        self.vocab_file = tf.saved_model.Asset(assets["vocab"])
        # id -> token for the `tokens` output: the vocab asset is the table's source.
        self.vocab_table = _line_table(self.vocab_file)
        self.label_names_file = self.label_table = None
        if "labels" in assets:
            self.label_names_file = tf.saved_model.Asset(assets["labels"])
            self.label_table = _line_table(self.label_names_file)
        if "added_tokens" in assets:
            self.added_tokens_file = tf.saved_model.Asset(assets["added_tokens"])
        preprocessor = BertPreprocessor(
            vocabulary=list(vocab.tokens), do_lower_case=do_lower_case,
            max_seq_length=max_seq_length, pad_to_max_length=False, never_split=never_split)
        self._keras = _Callables(model, preprocessor)
        self._pad_id = vocab.pad_id
        self._cls_id, self._sep_id = vocab.cls_id, vocab.sep_id
        self._unk_id = vocab.unk_id
        encoder = model if task == "encoder" else model.encoder
        self._table_sizes = {"input_ids": encoder.vocabulary_size,
                             "segment_ids": encoder.num_segments}
        self._max_positions = encoder.max_sequence_length
        self._max_seq_length = max_seq_length
        self._text_pair = text_pair
        self._max_query_length = max_query_length
        self._max_answer_length = max_answer_length
        self._null_threshold = null_score_diff_threshold
        self._thresholds = thresholds

    def signatures(self):
        """{signature name: concrete function}: raw text, and Google's token-id inputs."""
        if self.task == "tagger":
            def serve_token_ids(input_ids, input_mask, segment_ids, label_mask):
                return self._serve_token_ids(dict(
                    input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                    label_mask=label_mask))
            specs = [_IDS] * 4
        else:
            def serve_token_ids(input_ids, input_mask, segment_ids):
                return self._serve_token_ids(dict(
                    input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids))
            specs = [_IDS] * 3
        return {TEXT_SIGNATURE: self._text_function().get_concrete_function(),
                TOKEN_IDS_SIGNATURE: tf.function(
                    serve_token_ids, input_signature=specs,
                    autograph=False).get_concrete_function()}

    def _text_function(self):
        if self.task == "span_labeler":
            def serve(question, context):
                return self._serve_text(dict(question=question, context=context))
            specs = [_STRINGS, _STRINGS]
        elif self._text_pair:
            def serve(text_a, text_b):
                return self._serve_text(dict(text_a=text_a, text_b=text_b))
            specs = [_STRINGS, _STRINGS]
        else:
            def serve(text):
                return self._serve_text(dict(text=text))
            specs = [_STRINGS]
        return tf.function(serve, input_signature=specs, autograph=False)

    def _serve_token_ids(self, inputs):
        inputs = _checked(TOKEN_IDS_SIGNATURE, inputs, "int32 [batch, seq]")
        # An id past its embedding table fails on CPU but reads zeros on GPU: an answer for
        # other inputs than those sent.
        checks = [tf.debugging.assert_less_equal(
            tf.shape(inputs["input_ids"])[1], self._max_positions,
            message=f"{TOKEN_IDS_SIGNATURE}: seq must be at most {self._max_positions}, the "
                    f"max_sequence_length of the model")]
        for name, size in self._table_sizes.items():
            checks += [tf.debugging.assert_non_negative(
                           inputs[name], message=f"{TOKEN_IDS_SIGNATURE}: negative {name}"),
                       tf.debugging.assert_less(
                           inputs[name], size,
                           message=f"{TOKEN_IDS_SIGNATURE}: {name} must be below {size}, "
                                   f"the rows of its embedding table")]
        with tf.control_dependencies(checks):
            features = {"token_ids": tf.identity(inputs["input_ids"]),
                        "segment_ids": tf.identity(inputs["segment_ids"]),
                        "padding_mask": inputs["input_mask"]}
        return self._task_outputs(features, inputs.get("label_mask"))

    def _serve_text(self, inputs):
        """The outputs for `inputs` (dict name -> string [batch], in signature order).

        Texts are checked first (`_checked`), then invalid UTF-8 is replaced: each
        invalid sequence becomes U+FFFD, as the tokenizer decodes text in training too
        (and as Python's `bytes.decode("utf-8", "replace")`); the tokenizer then deletes it,
        as Google's `_clean_text`. So string outputs (`words`, `answer`) are valid UTF-8.
        """
        inputs = _checked(TEXT_SIGNATURE, inputs, "string [batch]")
        texts = [tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                              replacement_char=0xFFFD)
                 for text in inputs.values()]
        if self.task == "tagger":
            return self._tag_words(texts[0])
        if self.task == "span_labeler":
            question = self._keras.tokenizer.tokenize_ids(texts[0])[:, :self._max_query_length]
            offsets = self._keras.tokenizer.tokenize_ids_with_offsets(texts[1])
            features = self._pack([question, offsets["token_ids"]])
        else:
            features = _at_least_two_columns(
                self._keras.preprocessor(tuple(texts) if len(texts) == 2 else texts[0]))
        outputs = self._task_outputs(features)
        tokens = self.vocab_table.lookup(tf.cast(features["token_ids"], tf.int64))
        outputs["tokens"] = tf.where(features["padding_mask"] > 0, tokens, "")
        if self.task == "span_labeler":
            outputs.update(self._answers(outputs, features, offsets, texts[1]))
        return outputs

    def _tag_words(self, texts):
        """A label per whitespace word of each text (see `tagging`)."""
        words = tagging.split_words(texts)
        pieces, label_mask, word_window, word_position = tagging.word_windows(
            words, self._keras.tokenizer, self._max_seq_length - 2, self._unk_id)
        features = self._pack([pieces])
        # [CLS] + the pieces' mask + [SEP]: exactly the packed width.
        label_mask = tf.pad(label_mask.to_tensor(0), [[0, 0], [1, 1]])
        window_ids = self._task_outputs(features, label_mask)["label_ids"]
        ids = tf.gather_nd(window_ids, tf.stack([word_window, word_position], axis=1))
        label_ids = tf.RaggedTensor.from_row_splits(ids, words.row_splits).to_tensor(-1)
        outputs = {"words": words.to_tensor(""), "label_ids": label_ids}
        if self.label_table is not None:
            outputs["labels"] = self._label_names(label_ids)
        return outputs

    def _pack(self, segments):
        """[CLS] A [SEP] (B [SEP]) padded to the longest row. As run_squad.py
        convert_examples_to_features (its first window), a pair is truncated "waterfall": the
        question, already cut to max_query_length pieces, first, the context gets the rest."""
        token_ids, segment_ids, is_token = packing.pack(
            segments, self._max_seq_length, self._cls_id, self._sep_id,
            truncate=packing.WATERFALL)
        return _at_least_two_columns({
            "token_ids": tf.where(is_token, token_ids, self._pad_id),
            "segment_ids": segment_ids,
            "padding_mask": tf.cast(is_token, tf.int32)})

    def _task_outputs(self, features, label_mask=None):
        outputs = self._keras.forward({name: features[name] for name in FEATURES})
        if self.task == "encoder":
            return {name: tf.cast(outputs[name], tf.float32)
                    for name in ("pooled_output", "sequence_output")}
        if self.task == "span_labeler":
            return {name: tf.cast(outputs[name], tf.float32)
                    for name in ("start_logits", "end_logits")}
        logits = tf.cast(outputs, tf.float32)
        if self.task == "tagger":  # argmax, or Viterbi over the label_mask positions
            label_ids = tf.where(label_mask > 0, self._decode(logits, label_mask), -1)
            result = {"logits": logits, "label_ids": label_ids}
        elif self._thresholds is not None:  # multi-label: each label on its own
            return self._multi_label_outputs(logits)
        elif logits.shape[-1] == 1:  # regression (STS-B)
            return {"score": logits[:, 0]}
        else:
            result = {"logits": logits, "probabilities": tf.nn.softmax(logits),
                      "label_id": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if self.label_table is not None and self.task == "tagger":
            result["labels"] = self._label_names(result["label_ids"])
        elif self.label_table is not None:
            result["label"] = self._label_names(result["label_id"])
        return result

    def _multi_label_outputs(self, logits):
        """Every label's probability and decision; its name, [batch, labels] as the others."""
        probabilities = tf.math.sigmoid(logits)
        result = {"logits": logits, "probabilities": probabilities,
                  "predicted": probabilities >= tf.constant(self._thresholds, tf.float32)}
        if self.label_table is not None:
            names = self._label_names(tf.range(len(self._thresholds)))
            result["label_names"] = tf.broadcast_to(names, tf.shape(logits))
        return result

    def _decode(self, logits, label_mask):
        if not self._keras.model.use_crf:
            return self._keras.model.decode(logits, label_mask)
        # keras.ops.scan on TensorFlow (keras 3.15) fails on an unknown number of steps
        # (`assert_is_compatible_with` on None), so Viterbi runs on a static length: padded
        # to the encoder's longest sequence, positions outside the mask change nothing.
        width = tf.shape(logits)[1]
        length = self._keras.model.encoder.max_sequence_length
        padding = [[0, 0], [0, length - width]]
        logits = tf.ensure_shape(tf.pad(logits, padding + [[0, 0]]),
                                 [None, length, logits.shape[-1]])
        label_mask = tf.ensure_shape(tf.pad(label_mask, padding), [None, length])
        return self._keras.model.decode(logits, label_mask)[:, :width]

    def _label_names(self, label_ids):
        """Label name of each id; "" for -1."""
        return self.label_table.lookup(tf.cast(label_ids, tf.int64))

    def _answers(self, outputs, features, offsets, context):
        """The best span of the context and its text (see `best_spans`)."""
        segment_ids, mask = features["segment_ids"], features["padding_mask"]
        position = tf.range(tf.shape(mask)[1])[None, :]
        last = tf.reduce_sum(mask, axis=1, keepdims=True) - 1
        in_context = (segment_ids == 1) & (mask == 1) & (position != last)
        start, end, found = best_spans(outputs["start_logits"], outputs["end_logits"],
                                       in_context, self._max_answer_length)
        if self._keras.model.allow_null:  # SQuAD 2.0: "" when [CLS] beats the best span
            starts, ends = outputs["start_logits"], outputs["end_logits"]
            null = tf.cast(starts[:, 0], tf.float64) + tf.cast(ends[:, 0], tf.float64)
            best = (tf.cast(tf.gather(starts, start, batch_dims=1), tf.float64)
                    + tf.cast(tf.gather(ends, end, batch_dims=1), tf.float64))
            found &= null - best <= self._null_threshold
        # Context piece i sits after [CLS] question [SEP]: at position i + (segment-0 count).
        first_piece = tf.reduce_sum((1 - segment_ids) * mask, axis=1)
        begin = _piece_offsets(offsets["begins"], start - first_piece, found)
        end_char = _piece_offsets(offsets["ends"], end - first_piece, found)
        answer = tf.strings.substr(context, tf.maximum(begin, 0),
                                   tf.maximum(end_char - begin, 0), unit="UTF8_CHAR")
        return {"answer": tf.where(found, answer, ""), "answer_start": begin,
                "answer_end": end_char}


def best_spans(start_logits, end_logits, in_context, max_answer_length):
    """The highest-scoring valid span of each row.

    A span (i, j) is valid when both ends are context tokens, j >= i and it has at most
    `max_answer_length` pieces; its score is start_logits[i] + end_logits[j] (summed in
    float64, as Google's `write_predictions`). This is the exact best span, which is Google's
    first n-best answer whenever that span's ends are among the n_best_size best starts and
    ends (for SQuAD, nearly always).

    Args:
        start_logits, end_logits: float [batch, seq].
        in_context: bool [batch, seq].
        max_answer_length: int.

    Returns:
        (start, end, found): int32 [batch] positions, and bool [batch] (False: no context).
    """
    seq = tf.shape(start_logits)[1]
    scores = (tf.cast(start_logits, tf.float64)[:, :, None]
              + tf.cast(end_logits, tf.float64)[:, None, :])
    i = tf.range(seq)[:, None]
    j = tf.range(seq)[None, :]
    valid = (((j >= i) & (j - i < max_answer_length))[None]
             & in_context[:, :, None] & in_context[:, None, :])
    scores = tf.where(valid, scores, tf.constant(-float("inf"), tf.float64))
    best = tf.argmax(tf.reshape(scores, [tf.shape(scores)[0], seq * seq]), axis=1,
                     output_type=tf.int32)
    return best // seq, best % seq, tf.reduce_any(valid, axis=[1, 2])


def _checked(signature, inputs, expected):
    """`inputs`, checked to share one shape of the declared rank, or InvalidArgumentError.

    A bad request must fail alone, never reach an op that aborts the process (keras-nlp's
    packer, which kbert used until 2026-11-29, threw std::length_error on pairs of unequal
    batch sizes) or answer for other rows than those sent. The rank is checked by
    EnsureShape: the signature declares it, so `assert_rank`, `tf.rank` and Grappler take it
    from the declaration, and such a check never runs.

    Args:
        signature: str. Named in the message.
        inputs: dict of str -> tensor, each declared [None] or [None, None].
        expected: str. Their dtype and shape, for the message ("string [batch]").

    Returns:
        dict of the same tensors, after the checks.
    """
    rank = next(iter(inputs.values())).shape.rank
    inputs = {name: tf.ensure_shape(x, [None] * rank, name=f"{name}_must_have_rank_{rank}")
              for name, x in inputs.items()}
    if len(inputs) == 1:
        return inputs
    shapes = [tf.shape(x) for x in inputs.values()]
    same = tf.reduce_all([tf.reduce_all(tf.equal(shapes[0], shape)) for shape in shapes[1:]])
    got = [part for name, shape in zip(inputs, shapes, strict=True) for part in (name, shape)]
    check = tf.debugging.Assert(
        same, [f"{signature}: {', '.join(inputs)} must all be {expected}, of one shape; got",
               *got])
    with tf.control_dependencies([check]):
        return {name: tf.identity(x) for name, x in inputs.items()}


def _piece_offsets(ragged, index, found):
    """ragged[b][index[b]] as int64 [batch], -1 where not `found`."""
    flat = tf.cast(ragged.row_splits[:-1], tf.int32) + index
    with_missing = tf.concat([ragged.flat_values, tf.constant([-1], tf.int64)], 0)
    return tf.gather(with_missing, tf.where(found, flat, tf.size(ragged.flat_values)))


def _at_least_two_columns(features):
    """An empty batch packs to width 0 (the longest of no rows); [CLS] [SEP] is 2 wide."""
    return {name: tf.pad(value, [[0, 0], [0, tf.maximum(2 - tf.shape(value)[1], 0)]])
            for name, value in features.items()}


def _line_table(asset):
    """Line number -> line of a text asset; "" for any other key."""
    initializer = tf.lookup.TextFileInitializer(
        asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
        tf.string, tf.lookup.TextFileIndex.WHOLE_LINE)
    return tf.lookup.StaticHashTable(initializer, default_value="")
