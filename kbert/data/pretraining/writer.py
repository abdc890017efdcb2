"""Raw text files -> sharded pretraining TFRecords in Google's schema (create_pretraining_data).

Each shard is the instances of one byte range of the input (`kbert.data.corpus.partition`), so
shards are independent: written one after the other here, or in parallel by
`kbert.data.pretraining.beam_pipeline`, with the same bytes. Within a shard, documents are read in
chunks of `chunk_bytes` of text; each chunk is tokenized in one call (kbert's in-graph
`FullTokenizer`), paired and masked by `kbert.data.pretraining.instances` with its own random
generator, seeded by (seed, shard, chunk), and written by the vectorized encoder of
`kbert.data.records`. Reading, tokenizing and pairing run one chunk ahead in a thread.
With `PretrainingDataConfig.chinese_word_segmenter`, each chunk's sentences are also cut into
words (`kbert.data.word_segmentation`) to group CJK characters for whole-word masking.
"""

import dataclasses
import functools
import itertools
import os
import queue
import sys
import threading
import time
import typing

import numpy as np
import tensorflow as tf
from absl import logging

from kbert import artifacts
from kbert import io
from kbert import rates
from kbert import tokenization
from kbert.data import corpus
from kbert.data import features as features_lib
from kbert.data import records
from kbert.data import word_segmentation
from kbert.data.pretraining import instances


def load_vocab_tokens(vocab_file):
    """The tokens of `vocab_file` in id order, as a list (`kbert.tokenization.load_vocab`)."""
    return list(tokenization.load_vocab(vocab_file).tokens)


class BatchTokenizer:
    """Sentences -> Google's word-piece ids for a whole batch at once, in-graph.

    With `exact=True`, `kbert.tokenization.FullTokenizer`: exactly Google's ids, and as fast as
    tf-text's `FastBertTokenizer` on the sentences where that one agrees (it runs it there).
    With `exact=False`, `FastBertTokenizer` on every sentence: a little less start-up, and it
    normalises some characters its own way ("…" becomes "...", "½" "1⁄2", "ß" "ss"), which
    changes the ids of about 0.2% of English Wikipedia's sentences.

    Args:
        vocab_file: str. `vocab.txt`.
        do_lower_case: bool. Lower-case and strip accents (uncased models).
        exact: bool. Give exactly FullTokenizer's ids. Defaults to True.
    """

    def __init__(self, vocab_file, do_lower_case=True, exact=True):
        self._full = None
        if exact:
            self._full = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
            self._tokenize = self._full.tokenize_ids
        else:
            import tensorflow_text as tf_text

            # Google's word limit is 200 characters, FastBertTokenizer's 200 bytes.
            self._tokenize = tf_text.FastBertTokenizer(
                vocab=load_vocab_tokens(vocab_file), lower_case_nfd_strip_accents=do_lower_case,
                token_out_type=tf.int32, unknown_token="[UNK]", max_bytes_per_word=200).tokenize

    def __call__(self, sentences):
        """Returns (ids int32 [tokens], lengths int64 [sentences])."""
        if not sentences:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        ragged = self._tokenize(tf.constant(sentences))
        return ragged.flat_values.numpy().astype(np.int32), ragged.row_lengths().numpy()

    def with_begins(self, sentences):
        """Returns (ids int32 [tokens], lengths int64 [sentences], begins int64 [tokens]: each
        token's first character in its sentence). Needs `exact=True`."""
        if self._full is None:
            raise ValueError("token offsets need exact tokenization (exact=True)")
        if not sentences:
            return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        pieces = self._full.tokenize_ids_with_offsets(tf.constant(sentences))
        ids = pieces["token_ids"]
        return (ids.flat_values.numpy().astype(np.int32), ids.row_lengths().numpy(),
                pieces["begins"].flat_values.numpy())


@functools.lru_cache(maxsize=2)
def _cached_tokenizer(vocab_file, do_lower_case, exact):
    return BatchTokenizer(vocab_file, do_lower_case, exact)  # building it takes 1 to 3 s


def tokenize_documents(documents, tokenizer, segment=None):
    """Lists of sentence strings -> `TokenizedDocuments` (empty sentences, documents dropped).

    With `segment` (a `kbert.data.word_segmentation.load_segmenter` function), `word_continues`
    groups the CJK characters of each segmented word.
    """
    sentences = [s for d in documents for s in d]
    continues = None
    if segment is None:
        ids, lengths = tokenizer(sentences)
    else:
        ids, lengths, begins = tokenizer.with_begins(sentences)
        continues = word_segmentation.word_continues(sentences, begins, lengths, segment)
    per_document = np.array([len(d) for d in documents], np.int64)
    keep = lengths > 0
    # Sentences kept per document, then documents that keep any.
    doc_of_sentence = np.repeat(np.arange(len(documents)), per_document)
    kept_per_document = np.bincount(doc_of_sentence[keep], minlength=len(documents))
    kept_per_document = kept_per_document[kept_per_document > 0]
    sentence_splits = np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64)
    document_splits = np.concatenate([[0], np.cumsum(kept_per_document)]).astype(np.int64)
    return instances.TokenizedDocuments(ids.astype(np.int32), sentence_splits, document_splits,
                                          continues)


def create_pretraining_data(input_file, output_file, vocab_file, *, config=None,
                            do_lower_case=True, random_seed=12345, num_shards=None,
                            input_format="text", skip_bad_lines=False, chunk_bytes=4 << 20,
                            exact_tokenization=True, progress=True):
    """Raw text files -> sharded pretraining TFRecords in Google's schema, plus `*_meta.json`.

    Each shard is the instances of one byte range of the input (`kbert.data.corpus`), written
    to a temporary name and renamed when complete; a re-run with the same settings and the
    same inputs (SHA-256 of their contents, in the sidecar) skips the shards that exist with
    the size the sidecar records (a damaged one is written again), and one with others is
    refused. One run at a time writes an output (`kbert.artifacts.locked`).
    Output is a function of (inputs, settings, seed, shard count) only.

    Args:
        input_file: str. Comma-separated files or globs.
        output_file: str. Comma-separated files, `name@N`, or one name (see `num_shards`).
        vocab_file: str. `vocab.txt`.
        config: `kbert.data.PretrainingDataConfig`. Defaults to Google's defaults.
        do_lower_case: bool. Defaults to True.
        random_seed: int. Defaults to 12345 (Google's).
        num_shards: int or None. Shards for a single output name.
        input_format: str. "text" or "wikiextractor". Defaults to "text".
        skip_bad_lines: bool. Skip (and log) lines that are not UTF-8. Defaults to False.
        chunk_bytes: int. Text per chunk; random next segments and the shuffle stay within a
            chunk, and memory is proportional to it. Defaults to 4 MiB.
        exact_tokenization: bool. Exactly Google's FullTokenizer ids (see `BatchTokenizer`);
            False is faster to start and differs on a few sentences. Defaults to True.
        progress: bool. Show a progress line with instances/s on stderr. Defaults to True.

    Returns:
        dict: shard path -> number of instances.

    Example:
    ```python
    kbert.data.create_pretraining_data(
        "corpus/wiki_*", "out/train.tfrecord", "vocab.txt", num_shards=8,
        input_format="wikiextractor", config=kbert.data.PretrainingDataConfig(dupe_factor=5))
    ```
    """
    meta_file = records.meta_path(output_file)
    # One writer per output (its own lock: train and dev records may share a directory).
    with artifacts.locked(os.path.dirname(os.path.abspath(meta_file)),
                          f".kbert-{os.path.basename(meta_file)}.lock", what=output_file):
        return _create_pretraining_data(
            input_file, output_file, vocab_file, progress, config=config,
            do_lower_case=do_lower_case, random_seed=random_seed, num_shards=num_shards,
            input_format=input_format, skip_bad_lines=skip_bad_lines, chunk_bytes=chunk_bytes,
            exact_tokenization=exact_tokenization)


def _create_pretraining_data(input_file, output_file, vocab_file, progress, **settings):
    plan = plan_shards(input_file, output_file, vocab_file, **settings)
    # A killed run's partial shards, left under temporary names, go before any new ones.
    for directory in sorted({os.path.dirname(os.path.abspath(job.path)) for job in plan.jobs}):
        for path in io.remove_stale_temporaries(directory):
            logging.info("%s: removed, a partial shard of an interrupted run", path)
    bar = _Progress(plan.total_bytes, enabled=progress)
    for job in plan.jobs:
        name = os.path.basename(job.path)
        if plan.meta["shards"][name] is not None:
            logging.info("%s: complete, skipped", job.path)
            bar.skip(job.byte_range, plan.meta["shards"][name])
            continue
        count = write_shard(job, bar)
        _record_shard(plan.meta, job.path, count)
        records.write_meta(plan.meta_file, plan.meta)
        logging.info("%s: %d instances", job.path, count)
    bar.close()
    return finish_shards(plan, {})


class ShardJob(typing.NamedTuple):
    """Everything `write_shard` needs to write one shard (picklable: Beam ships it)."""

    path: str
    byte_range: corpus.ByteRange
    vocab_file: str
    vocab: tuple
    config: instances.PretrainingDataConfig
    do_lower_case: bool
    random_seed: int
    input_format: str
    skip_bad_lines: bool
    chunk_bytes: int
    exact_tokenization: bool


class ShardPlan(typing.NamedTuple):
    """All shards of one output (`jobs`), its sidecar, and the sidecar's current content."""

    jobs: list
    meta_file: str
    meta: dict
    total_bytes: int
    input_file: str


def plan_shards(input_file, output_file, vocab_file, *, config=None, do_lower_case=True,
                random_seed=12345, num_shards=None, input_format="text", skip_bad_lines=False,
                chunk_bytes=4 << 20, exact_tokenization=True):
    """Checks the inputs, starts (or reloads) the sidecar and lays out one job per shard.

    The arguments are `create_pretraining_data`'s. A shard whose count in `meta["shards"]`
    is not None is complete.
    """
    config = config or instances.PretrainingDataConfig()
    if config.chinese_word_segmenter is not None:
        word_segmentation.load_segmenter(config.chinese_word_segmenter)  # fails early
        if not exact_tokenization:
            raise ValueError("chinese_word_segmenter needs exact_tokenization=True (it maps "
                             "words to tokens by FullTokenizer's character offsets)")
    if input_format not in corpus.INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {corpus.INPUT_FORMATS}, got "
                         f"{input_format!r}")
    files = corpus.list_input_files(input_file)
    vocab = tuple(load_vocab_tokens(vocab_file))
    instances.MaskingVocab.from_tokens(vocab)  # fails early without [CLS], [SEP], [MASK]
    total_bytes = sum(os.path.getsize(f) for f in files)
    if total_bytes == 0:
        raise ValueError(f"{input_file}: the input is empty")
    corpus.check_documents(files, input_format)
    paths = records.shard_paths(output_file, num_shards)
    meta_file = records.meta_path(output_file)
    inputs = {os.path.realpath(f) for f in [*files, vocab_file]}
    for path in [*paths, meta_file]:
        if os.path.realpath(path) in inputs:
            raise ValueError(f"{path}: is an input of this run; choose another output_file")
    # Inputs by content: an input edited in place (same size) is another input.
    settings = {**dataclasses.asdict(config), "do_lower_case": do_lower_case,
                "random_seed": random_seed, "input_format": input_format,
                "chunk_bytes": chunk_bytes, "exact_tokenization": exact_tokenization,
                "input_files": [artifacts.fingerprint(f) for f in files],
                "vocab_sha256": records.vocab_sha256(vocab)}
    meta = _start_meta(meta_file, paths, settings, config)
    sizes = meta.setdefault("shard_bytes", {})
    digests = meta.setdefault("shard_sha256", {})
    # A shard counts as complete only while its file exists, with the size and SHA-256 it was
    # written with (a sidecar of an older kbert has neither); else it is written again.
    for path in paths:
        name = os.path.basename(path)
        if meta["shards"][name] is None:
            continue
        if not os.path.exists(path):
            meta["shards"][name] = None
        elif sizes.get(name, os.path.getsize(path)) != os.path.getsize(path):
            logging.warning("%s: %d bytes, but it was written with %d: damaged, writing it "
                            "again", path, os.path.getsize(path), sizes[name])
            meta["shards"][name] = None
        elif name in digests and artifacts.fingerprint(path)["sha256"] != digests[name]:
            logging.warning("%s: its SHA-256 is not the one it was written with: damaged, "
                            "writing it again", path)
            meta["shards"][name] = None
    jobs = [ShardJob(path, byte_range, os.path.abspath(vocab_file), vocab, config,
                     do_lower_case, random_seed, input_format, skip_bad_lines, chunk_bytes,
                     exact_tokenization)
            for path, byte_range in zip(paths, corpus.partition(files, len(paths)),
                                        strict=True)]
    return ShardPlan(jobs, meta_file, meta, total_bytes, input_file)


def write_shard(job, progress=None):
    """Writes one shard (atomically) and returns its number of instances."""
    tokenizer = _cached_tokenizer(job.vocab_file, job.do_lower_case, job.exact_tokenization)
    vocab = instances.MaskingVocab.from_tokens(job.vocab)
    config, byte_range = job.config, job.byte_range
    segment = (word_segmentation.load_segmenter(config.chinese_word_segmenter)
               if config.chinese_word_segmenter else None)
    count = 0
    if progress:
        progress.begin(byte_range)
    with records.record_writer(job.path) as writer:
        chunks = chunk_documents(corpus.read_documents(
            byte_range, job.input_format, skip_bad_lines=job.skip_bad_lines,
            on_bytes=progress.add_bytes if progress else None), job.chunk_bytes)

        def plan(chunk_index, documents):  # create_instances, up to the batches
            rng = np.random.default_rng([job.random_seed, byte_range.index, chunk_index])
            tokenized = tokenize_documents(documents, tokenizer, segment)
            return tokenized, instances.shuffled_spans(tokenized, config, rng), rng

        # Reading, tokenizing (a TF op, free of the GIL) and pairing sentences run a chunk
        # ahead in a thread, while this one masks (numpy), encodes and writes.
        for tokenized, spans, rng in _in_background(itertools.starmap(plan, enumerate(chunks))):
            for batch in instances.instance_batches(tokenized.ids, spans, config, vocab, rng,
                                                      word_continues=tokenized.word_continues):
                for record in records.encode_examples(batch, features_lib.PRETRAINING_FEATURES):
                    writer.write(record)
                count += len(batch["input_ids"])
                if progress:
                    progress.add_instances(len(batch["input_ids"]))
    if progress:
        progress.end(byte_range)
    return count


def finish_shards(plan, counts):
    """Records `counts` (shard name -> instances) in the sidecar, with the total; fails (and
    removes the output) if no shard has an instance."""
    meta = plan.meta
    for job in plan.jobs:
        name = os.path.basename(job.path)
        if name in counts:
            _record_shard(meta, job.path, counts[name])
    by_path = {job.path: meta["shards"][os.path.basename(job.path)] for job in plan.jobs}
    missing = [path for path, count in by_path.items() if count is None]
    if missing:
        raise RuntimeError(f"shards not written: {', '.join(missing)}")
    if not any(by_path.values()):
        for path in [*by_path, plan.meta_file]:
            if os.path.exists(path):
                os.remove(path)
        raise ValueError(f"{plan.input_file}: no document has any text; nothing written")
    meta["num_instances"] = sum(by_path.values())
    records.write_meta(plan.meta_file, meta)
    return by_path


def _record_shard(meta, path, count):
    """Records a shard written complete in `meta`: its instances, size and SHA-256."""
    name = os.path.basename(path)
    meta["shards"][name] = count
    meta["shard_bytes"][name] = os.path.getsize(path)
    meta.setdefault("shard_sha256", {})[name] = artifacts.fingerprint(path)["sha256"]


def _start_meta(meta_file, paths, settings, config):
    """Loads the sidecar of an earlier run with the same settings, or starts a new one."""
    if os.path.exists(meta_file):
        meta = records.read_meta(meta_file)
        old = meta.get("settings", {})
        changed = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        names = [os.path.basename(p) for p in paths]
        if changed or sorted(meta.get("shards", {})) != sorted(names):
            detail = ", ".join(_change(k, old.get(k), settings.get(k)) for k in changed)
            raise ValueError(f"{meta_file}: existing output was written with other settings "
                             f"({detail or 'other shards'}); remove it or choose another "
                             "output_file")
        meta.pop("num_instances", None)
        return meta
    meta = {
        "schema": records.serialized_schema(
            features_lib.PRETRAINING_FEATURES, max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq),
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "settings": settings,
        "shards": {os.path.basename(p): None for p in paths},
    }
    for path in paths:  # files of an earlier, different run with no sidecar are not trusted
        if os.path.exists(path):
            raise ValueError(f"{path}: exists but {meta_file} does not; remove it or choose "
                             "another output_file")
    records.write_meta(meta_file, meta)
    return meta


def _change(key, was, now):
    """How setting `key` changed, for the message; input files by name."""
    if key == "input_files" and was and now:
        hashes = {f["path"]: f["sha256"] for f in was if isinstance(f, dict)}
        edited = [f["path"] for f in now if hashes.get(f["path"]) != f["sha256"]]
        gone = sorted(set(hashes) - {f["path"] for f in now})
        return f"input files changed since it was written: {', '.join(edited + gone)}"
    return f"{key}: {was!r} -> {now!r}"


def _in_background(iterable, depth=1):
    """Iterates `iterable` in a thread, up to `depth` items ahead; its errors re-raise here."""
    items = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry):
        while not stop.is_set():
            try:
                items.put(entry, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def produce():
        try:
            for item in iterable:
                if not put((item, None)):
                    return
            put((done, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            put((done, e))

    thread = threading.Thread(target=produce, daemon=True, name="kbert-tokenize")
    thread.start()
    try:
        while True:
            item, error = items.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        stop.set()
        thread.join()


def chunk_documents(documents, chunk_bytes):
    """Groups documents (lists of sentences) into lists of about `chunk_bytes` of text."""
    chunk, size = [], 0
    for document in documents:
        chunk.append(document)
        size += sum(len(s) for s in document)
        if size >= chunk_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class _Progress:
    """One stderr line: percent of input read, instances, instances/s, elapsed, ETA."""

    def __init__(self, total_bytes, enabled=True, interval=0.5):
        self.total, self.enabled, self.interval = total_bytes, enabled, interval
        self.bytes = self.limit = self.instances = self.skipped = self.skipped_bytes = 0
        self.start = self.last = time.monotonic()
        self.tty = sys.stderr.isatty()

    def begin(self, byte_range):
        self.bytes, self.limit = byte_range.start, byte_range.end

    def end(self, byte_range):
        self.bytes = byte_range.end
        self._show()

    def skip(self, byte_range, instances):
        self.instances += instances
        self.skipped += instances  # not made by this run: left out of the rates
        self.skipped_bytes += byte_range.end - byte_range.start
        self.end(byte_range)

    def add_bytes(self, num_bytes):
        # A range's reader also reads past its end to finish its last document.
        self.bytes = min(self.bytes + num_bytes, self.limit)
        self._show()

    def add_instances(self, count):
        self.instances += count
        self._show()

    def line(self):
        elapsed = time.monotonic() - self.start
        rate = (self.instances - self.skipped) / max(elapsed, 1e-9)
        done = min(self.bytes, self.total)
        percent = 100 * done / max(self.total, 1)
        # The time left goes by the input read, as the percent does.
        eta = rates.seconds_left(self.total - done,
                                 (done - self.skipped_bytes) / max(elapsed, 1e-9))
        return (f"{percent:5.1f}% of {self.total / 1e6:.1f} MB  {self.instances:,} instances  "
                f"{rate:,.0f} instances/s  {rates.format_duration(elapsed)}  "
                f"ETA {rates.format_duration(eta)}")

    def _show(self, force=False):
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < (
                self.interval if self.tty else 30)):
            return
        self.last = now
        if self.tty:
            sys.stderr.write("\r" + self.line())
            sys.stderr.flush()
        else:
            logging.info("%s", self.line())

    def close(self):
        if self.enabled:
            self._show(force=True)
            if self.tty:
                sys.stderr.write("\n")
