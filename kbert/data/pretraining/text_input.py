"""Pretraining straight from raw text: tf.data batches with a fresh mask every epoch.

The online front end of the rules in `kbert.data.pretraining.instances` (the offline one is
`kbert.data.pretraining.writer`, which writes TFRecords with one mask per duplicate):

1. Reading: this worker's byte range of the input (`kbert.data.corpus`, both formats), in
   chunks of about `chunk_bytes` of text, again every epoch (memory stays flat).
2. Tokenization in the graph: kbert's `FullTokenizer` (Google's ids exactly) on a chunk.
3. Pairing and packing: `kbert.data.pretraining.instances.shuffled_spans` and `pack_pairs`,
   the code the offline generator runs (target length, short sequences, NSP's random next
   segment or SOP's swap, `truncate_seq_pair`), seeded by (seed, worker, epoch, chunk): every
   epoch pairs anew, as the offline tool's `dupe_factor` passes do. A `tf.numpy_function`,
   since Google's pairing walks sentences one by one with data-dependent draws (no array form).
4. Masking in the graph (`mask_batch`), after batching, with stateless random ops seeded by
   (seed, worker, batch index), so the same seed (and batch size) gives the same masks and
   each epoch (each batch) new ones.

Why masking by hand and not keras-hub's `MaskedLMMaskGenerator` (or `tf_text.mask_language_model`,
which it wraps): it picks `ceil(rate * selectable)` items where Google picks
`round(rate * len(tokens))` with [CLS]/[SEP] counted, its whole-word mode caps words rather
than pieces and does not skip a word that would overflow the budget, and it draws from
stateful random ops, so a seed cannot reproduce a batch or give each epoch its own mask.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from kbert import tokenization
from kbert.data import corpus
from kbert.data import features as features_lib
from kbert.data import records
from kbert.data.pretraining import instances
from kbert.data.pretraining import writer

_SPAN_DTYPES = (tf.int32, tf.bool, tf.int32, tf.int8, tf.int8, tf.int32)
_PACKED = ("tokens", "candidates", "lengths", "input_mask", "segment_ids",
           "next_sentence_labels")


def pretraining_text_dataset(files, vocab_file, batch_size, *, config=None, pair_task="nsp",
                             input_format="text", do_lower_case=True, seed=12345, epochs=None,
                             chunk_bytes=1 << 20, shuffle_buffer=10000, skip_bad_lines=False,
                             input_context=None, skip_batches=0):
    """Raw text files -> batches of `(inputs, labels, sample_weights)` for `BertPretrainer.fit`.

    Args:
        files: str or list of str. Files or globs, comma-separated allowed.
        vocab_file: str. `vocab.txt`.
        batch_size: int. Per worker (see `input_context`).
        config: `kbert.data.PretrainingDataConfig`. Sequence length, predictions, rates and
            whole-word masking (`dupe_factor` is not used: see `epochs`). Defaults to
            Google's defaults.
        pair_task: str. "nsp", "sop" or "none" (`kbert.data.pretraining.instances.PAIR_TASKS`); with
            "none" there are no `nsp_logits` labels. Defaults to "nsp".
        input_format: str. "text" or "wikiextractor". Defaults to "text".
        do_lower_case: bool. Defaults to True.
        seed: int. Pairing, shuffle and masks follow from it. Defaults to 12345.
        epochs: int or None. Passes over the text, each paired and masked anew; None repeats
            forever. Defaults to None.
        chunk_bytes: int. Text tokenized and paired at once; random next segments and the
            pairing shuffle stay within a chunk. Defaults to 1 MiB.
        shuffle_buffer: int. Instances shuffled across chunks; 0 for none. Defaults to 10000.
        skip_bad_lines: bool. Skip lines that are not UTF-8. Defaults to False.
        input_context: `tf.distribute.InputContext` or None. This worker reads the byte range
            `input_pipeline_id` of `num_input_pipelines` equal ranges of the input.
        skip_batches: int. Batches to leave out first: a run resumed at global step k passes
            k and sees the batches of the uninterrupted run from there on. The text before
            them is tokenized and paired again, not masked. Defaults to 0.

    Returns:
        `tf.data.Dataset` of (inputs, labels, sample_weights), as
        `kbert.data.pretraining_dataset`, with static shapes (full batches only).
    """
    ds = text_instances(files, vocab_file, batch_size, config=config, pair_task=pair_task,
                        input_format=input_format, do_lower_case=do_lower_case, seed=seed,
                        epochs=epochs, chunk_bytes=chunk_bytes, shuffle_buffer=shuffle_buffer,
                        skip_bad_lines=skip_bad_lines, input_context=input_context,
                        skip_batches=skip_batches)

    @tf.autograph.experimental.do_not_convert
    def to_inputs(batch):
        inputs, labels, weights = features_lib.to_pretraining_inputs(batch)
        if pair_task == "none":
            labels.pop("nsp_logits")
            weights.pop("nsp_logits")
        return inputs, labels, weights

    return ds.map(to_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def text_instances(files, vocab_file, batch_size, *, config=None, pair_task="nsp",
                   input_format="text", do_lower_case=True, seed=12345, epochs=None,
                   chunk_bytes=1 << 20, shuffle_buffer=10000, skip_bad_lines=False,
                   input_context=None, drop_remainder=True, skip_batches=0):
    """Raw text -> batches of masked instances with Google's feature names (int32/float32).

    The arguments are `pretraining_text_dataset`'s, plus `drop_remainder` (bool, default
    True). Elements: input_ids, input_mask, segment_ids [batch, max_seq_length];
    masked_lm_positions, masked_lm_ids, masked_lm_weights [batch, max_predictions_per_seq];
    next_sentence_labels [batch, 1].
    """
    config = config or instances.PretrainingDataConfig()
    if config.chinese_word_segmenter is not None:
        raise ValueError("chinese_word_segmenter is not supported from raw text yet (words are "
                         "grouped by '##' pieces only): write TFRecords with "
                         "tools/create_pretraining_data.py --chinese_word_segmenter=jieba")
    if pair_task not in instances.PAIR_TASKS:
        raise ValueError(f"pair_task must be one of {instances.PAIR_TASKS}, got "
                         f"{pair_task!r}")
    if input_format not in corpus.INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {corpus.INPUT_FORMATS}, got "
                         f"{input_format!r}")
    if epochs is not None and epochs < 1:
        raise ValueError(f"epochs must be positive or None, got {epochs}")
    if skip_batches < 0:
        raise ValueError(f"skip_batches must be >= 0, got {skip_batches}")
    vocab = instances.MaskingVocab.from_tokens(tokenization.load_vocab(vocab_file).tokens)
    byte_range = _worker_range(corpus.list_input_files(files), input_context)
    worker = byte_range.index
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)

    def chunks():
        documents = corpus.read_documents(byte_range, input_format,
                                          skip_bad_lines=skip_bad_lines)
        empty = True
        for chunk in writer.chunk_documents(documents, chunk_bytes):
            empty = False
            yield [s for d in chunk for s in d], [len(d) for d in chunk]
        if empty:  # else an endless repeat would wait forever for a first instance
            raise ValueError(f"{files}: no document with text in bytes {byte_range.start} to "
                             f"{byte_range.end} (input_format={input_format!r}, worker "
                             f"{worker})")

    text = tf.data.Dataset.from_generator(chunks, output_signature=(
        tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int64)))

    # The dataset's functions branch on Python values only: AutoGraph is not needed.
    @tf.autograph.experimental.do_not_convert
    def epoch_chunks(epoch):
        return text.enumerate().map(lambda index, chunk: (epoch, index, *chunk))

    @tf.autograph.experimental.do_not_convert
    def tokenize(epoch, index, sentences, per_document):
        ragged = tokenizer.tokenize_ids(sentences)
        return epoch, index, ragged.flat_values, ragged.row_lengths(), per_document

    @tf.autograph.experimental.do_not_convert
    def pair_and_pack(epoch, index, ids, lengths, per_document):
        packed = tf.numpy_function(
            lambda *args: _pair_and_pack(*args, config, vocab, seed, worker, pair_task),
            [epoch, index, ids, lengths, per_document], _SPAN_DTYPES, stateful=False)
        for tensor, name in zip(packed, _PACKED, strict=True):
            width = {"lengths": None, "next_sentence_labels": 1}.get(name, config.max_seq_length)
            tensor.set_shape([None] if width is None else [None, width])
        return dict(zip(_PACKED, packed, strict=True))

    ds = tf.data.Dataset.counter()
    ds = ds.take(epochs) if epochs is not None else ds
    ds = ds.flat_map(epoch_chunks)
    ds = ds.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # In parallel with the tokenization of the next chunks and the masking of earlier ones.
    ds = ds.map(pair_and_pack, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.flat_map(tf.data.Dataset.from_tensor_slices)
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    # Skipped before masking: a resumed run pays for reading and pairing its text again only.
    ds = ds.batch(batch_size, drop_remainder=drop_remainder).enumerate().skip(skip_batches)
    is_continuation = tf.constant(vocab.is_continuation)
    base = tf.constant([seed, worker], tf.int64)

    @tf.autograph.experimental.do_not_convert
    def mask(index, packed):
        batch_seed = tf.random.experimental.stateless_fold_in(base, index)
        masked = mask_batch(packed["tokens"], packed["candidates"], packed["lengths"], config,
                            vocab, is_continuation, batch_seed)
        return {"input_mask": tf.cast(packed["input_mask"], tf.int32),
                "segment_ids": tf.cast(packed["segment_ids"], tf.int32),
                "next_sentence_labels": packed["next_sentence_labels"], **masked}

    ds = ds.map(mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    options = tf.data.Options()  # sharded by byte range here, not by tf.distribute
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options)


def write_text_records(files, output_file, vocab_file, *, config=None, pair_task="nsp",
                       input_format="text", do_lower_case=True, seed=12345, chunk_bytes=1 << 20,
                       skip_bad_lines=False, batch_size=4096):
    """Writes this pipeline's instances as one TFRecord file in Google's schema, plus its
    `*_meta.json` (readable by `kbert.data.pretraining_dataset` and Google's input_fn).

    `config.dupe_factor` epochs are written, each paired and masked anew, unshuffled; the
    arguments are `pretraining_text_dataset`'s, and `batch_size` (instances masked at once:
    the masks follow from seed and batch size; default 4096). Returns the number of instances
    written.
    """
    config = config or instances.PretrainingDataConfig()
    ds = text_instances(files, vocab_file, batch_size, config=config, pair_task=pair_task,
                        input_format=input_format, do_lower_case=do_lower_case, seed=seed,
                        epochs=config.dupe_factor, chunk_bytes=chunk_bytes, shuffle_buffer=0,
                        skip_bad_lines=skip_bad_lines, drop_remainder=False)
    count = 0
    with records.record_writer(output_file) as writer:
        for batch in ds.as_numpy_iterator():
            for record in records.encode_examples(batch, features_lib.PRETRAINING_FEATURES):
                writer.write(record)
            count += len(batch["input_ids"])
    if count == 0:
        os.remove(output_file)
        raise ValueError(f"{files}: no document has any text; nothing written")
    records.write_meta(records.meta_path(output_file), {
        "schema": records.serialized_schema(
            features_lib.PRETRAINING_FEATURES, max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq),
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "settings": {"pair_task": pair_task, "random_seed": seed, "input_format": input_format,
                     "do_lower_case": do_lower_case, "dupe_factor": config.dupe_factor,
                     "do_whole_word_mask": config.do_whole_word_mask},
        "shards": {os.path.basename(output_file): count},
        "num_instances": count,
    })
    return count


def mask_batch(tokens, candidates, lengths, config, vocab, is_continuation, seed):
    """Google's `create_masked_lm_predictions` for a batch, in the graph (stateless random).

    The rules of `kbert.data.pretraining.instances.mask_tokens`: `min(max_predictions_per_seq,
    max(1, round(length * masked_lm_prob)))` positions, never [CLS]/[SEP]/padding, uniformly
    chosen (or whole words in random order, a word that would overflow the budget skipped);
    `mask_token_rate` [MASK], `random_token_rate` a uniform vocab id, the rest unchanged.

    Args:
        tokens: int32 [batch, seq]. Packed ids.
        candidates: bool [batch, seq]. Positions that may be predicted.
        lengths: int32 [batch]. Tokens per row, [CLS] and [SEP]s included.
        config: `PretrainingDataConfig`.
        vocab: `kbert.data.pretraining.instances.MaskingVocab`.
        is_continuation: bool tensor [vocab]. The piece starts with "##".
        seed: int64 [2]. Stateless seed of this batch.

    Returns:
        dict: input_ids int32 [batch, seq]; masked_lm_positions, masked_lm_ids int32 and
        masked_lm_weights float32 [batch, predictions].
    """
    predictions = config.max_predictions_per_seq
    seq = tokens.shape[1]
    select_seed, draw_seed, id_seed = (
        tf.random.experimental.stateless_fold_in(seed, i) for i in range(3))
    # tf.round rounds half to even, like Python's round in Google's code.
    budget = tf.minimum(predictions, tf.maximum(1, tf.cast(
        tf.round(tf.cast(lengths, tf.float64) * config.masked_lm_prob), tf.int32)))
    if config.do_whole_word_mask:
        selected = _select_whole_words_in_graph(tokens, candidates, budget, is_continuation,
                                                select_seed)
    else:
        keys = tf.random.stateless_uniform(tf.shape(tokens), select_seed)
        keys = tf.where(candidates, keys, 2.0)
        count = tf.minimum(budget, tf.reduce_sum(tf.cast(candidates, tf.int32), axis=1))
        # The `count` candidates with the smallest keys: a uniform random subset.
        rank = tf.argsort(tf.argsort(keys, axis=1), axis=1)
        selected = candidates & (rank < count[:, None])
    # Selected positions in ascending order, then zeros.
    order = tf.where(selected, tf.range(seq)[None, :], seq)
    positions = tf.sort(order, axis=1)[:, :min(predictions, seq)]
    if seq < predictions:
        positions = tf.pad(positions, [[0, 0], [0, predictions - seq]], constant_values=seq)
    valid = positions < seq
    positions = tf.where(valid, positions, 0)
    labels = tf.where(valid, tf.gather(tokens, positions, batch_dims=1), 0)

    draw = tf.random.stateless_uniform(tf.shape(positions), draw_seed)
    random_ids = tf.random.stateless_uniform(tf.shape(positions), id_seed, minval=0,
                                             maxval=vocab.size, dtype=tf.int32)
    replacement = tf.where(draw < config.mask_token_rate, vocab.mask_id, tf.where(
        draw < config.mask_token_rate + config.random_token_rate, random_ids, labels))
    where = tf.where(valid)  # [n, 2]: (row, prediction)
    scatter_at = tf.stack([where[:, 0], tf.cast(tf.gather_nd(positions, where), tf.int64)], 1)
    masked = tf.tensor_scatter_nd_update(tokens, scatter_at, tf.gather_nd(replacement, where))
    return {"input_ids": masked, "masked_lm_positions": positions, "masked_lm_ids": labels,
            "masked_lm_weights": tf.cast(valid, tf.float32)}


def _select_whole_words_in_graph(tokens, candidates, budget, is_continuation, seed):
    """Whole words in random order, each taken if it still fits the budget (as Google): the
    rule of `kbert.data.pretraining.instances` in TF ops, with a stateless seed."""
    batch, seq = tf.shape(tokens)[0], tokens.shape[1]
    # A "##" piece joins the previous candidate's word, even across a [SEP] (as Google).
    continuation = tf.gather(is_continuation, tokens) & candidates
    seen = tf.cumsum(tf.cast(candidates, tf.int32), axis=1)
    starts = candidates & (~continuation | (seen == 1))
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # word of each candidate
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    word_ids = tf.where(candidates, tf.range(batch)[:, None] * seq + word, batch * seq)
    sizes = tf.reshape(tf.math.unsorted_segment_sum(
        tf.ones_like(tf.reshape(word_ids, [-1])), tf.reshape(word_ids, [-1]),
        batch * seq + 1)[:-1], [batch, seq])
    keys = tf.where(tf.range(seq)[None, :] < num_words[:, None],
                    tf.random.stateless_uniform([batch, seq], seed), 2.0)
    order = tf.argsort(keys, axis=1)
    sizes_in_order = tf.gather(sizes, order, batch_dims=1)

    def take(count, size):  # one word per row: taken if it still fits
        fits = (size > 0) & (count + size <= budget)
        return count + tf.where(fits, size, 0), fits

    _, taken_in_order = tf.scan(lambda state, size: take(state[0], size),
                                tf.transpose(sizes_in_order),
                                initializer=(tf.zeros_like(budget), tf.zeros_like(budget, bool)))
    taken = tf.gather(tf.transpose(taken_in_order), tf.argsort(order, axis=1), batch_dims=1)
    return candidates & tf.gather(taken, tf.maximum(word, 0), batch_dims=1)


def _pair_and_pack(epoch, index, ids, lengths, per_document, config, vocab, seed, worker,
                   pair_task):
    """One chunk's tokens -> packed, unmasked instances (numpy, shared with the offline tool)."""
    documents = _documents(ids, lengths, per_document)
    rng = np.random.default_rng([seed, worker, epoch, index])
    spans = instances.shuffled_spans(documents, _one_pass(config), rng, pair_task)
    packed = instances.pack_pairs(documents.ids, spans, config, vocab, rng)
    return tuple(packed[name].astype(dtype.as_numpy_dtype)
                 for name, dtype in zip(_PACKED, _SPAN_DTYPES, strict=True))


def _documents(ids, lengths, per_document):
    """`TokenizedDocuments` without empty sentences and documents (Google drops them)."""
    keep = lengths > 0
    document_of = np.repeat(np.arange(len(per_document)), per_document)
    kept = np.bincount(document_of[keep], minlength=len(per_document))
    return instances.TokenizedDocuments(
        ids.astype(np.int32), np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64),
        np.concatenate([[0], np.cumsum(kept[kept > 0])]).astype(np.int64))


def _one_pass(config):
    return dataclasses.replace(config, dupe_factor=1)  # epochs are the passes here


def _worker_range(files, input_context):
    if input_context is None:
        return corpus.partition(files, 1)[0]
    return corpus.partition(files, input_context.num_input_pipelines)[
        input_context.input_pipeline_id]
