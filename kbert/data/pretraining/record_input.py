"""Pretraining TFRecords -> tf.data batches of (inputs, labels, sample weights) for `fit`."""

import tensorflow as tf

from kbert.data import corpus
from kbert.data import features as features_lib
from kbert.data import records


def pretraining_dataset(file_pattern, batch_size, *, max_seq_length=None,
                        max_predictions_per_seq=None, shuffle=True, repeat=True, seed=None,
                        shuffle_buffer=10000, cycle_length=4, drop_remainder=True,
                        skip_batches=0):
    """Pretraining TFRecords -> batches of `(inputs, labels, sample_weights)` for `fit`.

    With `shuffle`, files are shuffled, read `cycle_length` at a time (interleaved) and records
    shuffled (Google's run_pretraining.py `input_fn_builder` for training); without, files are
    read one after the other. Then batched, parsed and prefetched. Seeded, the batches are a
    function of the seed and their position: `skip_batches` continues the stream of a run
    resumed at that step (the records before it are read again, but not parsed).

    Args:
        file_pattern: str or list of str. Files or globs, comma-separated allowed.
        batch_size: int.
        max_seq_length: int or None. Defaults to the value in the files' `*_meta.json`.
        max_predictions_per_seq: int or None. Same.
        shuffle: bool. Shuffle files and records; False reads in order. Defaults to True.
        repeat: bool. Repeat forever. Defaults to True.
        seed: int or None. Shuffle seed; with one, the files are also interleaved in a fixed
            order, so the batches repeat from run to run. Defaults to None.
        shuffle_buffer: int. Records in the shuffle buffer. Defaults to 10000.
        cycle_length: int. Files read at once. Defaults to 4.
        drop_remainder: bool. Defaults to True (static batch shape).
        skip_batches: int. Batches to leave out at the start. Defaults to 0.

    Returns:
        `tf.data.Dataset` of (inputs, labels, sample_weights); see
        `kbert.data.features.to_pretraining_inputs`.

    Example:
    ```python
    ds = kbert.data.pretraining_dataset("out/train.tfrecord-*", batch_size=32)
    pretrainer.fit(ds, steps_per_epoch=1000)
    ```
    """
    files = record_files(file_pattern)
    max_seq_length, max_predictions_per_seq = record_lengths(
        files, file_pattern, max_seq_length, max_predictions_per_seq)
    if shuffle:
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=seed)
        ds = ds.repeat() if repeat else ds
        # Unseeded, whichever file is ready first goes next (Google's sloppy interleave);
        # seeded, the interleave keeps its order too, so a seeded run reads the same batches.
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(files)),
                           num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    else:  # file by file, in order (Google's eval input)
        ds = tf.data.TFRecordDataset(files)
        ds = ds.repeat() if repeat else ds
    ds = ds.batch(batch_size, drop_remainder=drop_remainder).skip(skip_batches)
    ds = ds.map(lambda serialized: features_lib.to_pretraining_inputs(
        features_lib.parse_pretraining_examples(
            serialized, max_seq_length, max_predictions_per_seq)),
        num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def record_files(file_pattern):
    """The record files of comma-separated files and globs, without the `*_meta.json`
    sidecars that a glob such as `out/train.tfrecord*` also matches."""
    files = [f for f in corpus.list_input_files(file_pattern) if not records.is_meta(f)]
    if not files:
        raise ValueError(f"{file_pattern}: matches only {records.META_SUFFIX} sidecars, no "
                         "TFRecord files")
    return files


def record_lengths(files, file_pattern, max_seq_length=None, max_predictions_per_seq=None):
    """(max_seq_length, max_predictions_per_seq): as given, else from the files' sidecar."""
    if max_seq_length is None or max_predictions_per_seq is None:
        meta = records.find_meta(files)
        if meta is None:
            raise ValueError(f"{file_pattern}: no *{records.META_SUFFIX} lists these files; "
                             "pass max_seq_length and max_predictions_per_seq")
        max_seq_length = max_seq_length or meta["max_seq_length"]
        max_predictions_per_seq = max_predictions_per_seq or meta["max_predictions_per_seq"]
    return max_seq_length, max_predictions_per_seq


def check_record_files(file_pattern, max_seq_length=None, max_predictions_per_seq=None, *,
                       vocab=None):
    """Checks pretraining records before any training: files found, lengths known, the first
    record of each file in the schema at those lengths (`records.check_first_records`), every
    record readable to the end of its file (`records.check_readable`), and, given the run's
    `vocab` (a `kbert.tokenization.Vocab`), that the sidecar records the same vocab (the ids
    of another one mean other tokens, or rows past the embedding table).

    Returns:
        int: the records' max_seq_length.

    Raises:
        ValueError or FileNotFoundError: naming the pattern, the file or the sidecar.
    """
    files = record_files(file_pattern)
    max_seq_length, max_predictions_per_seq = record_lengths(
        files, file_pattern, max_seq_length, max_predictions_per_seq)
    records.check_first_records(files, features_lib.PRETRAINING_FEATURES,
                                max_seq_length=max_seq_length,
                                max_predictions_per_seq=max_predictions_per_seq)
    records.check_readable(files)
    found = records.find_meta_file(files) if vocab is not None else None
    written_with = found and found[1].get("settings", {}).get("vocab_sha256")
    ours = vocab is not None and records.vocab_sha256(vocab.tokens)
    if written_with and written_with != ours:
        raise ValueError(f"{found[0]}: these records were written with another vocab than "
                         f"{vocab.path or 'the run'}'s ({len(vocab)} tokens; vocab_sha256 "
                         f"{written_with[:12]}... recorded, {ours[:12]}... here) — pass the "
                         "vocab they were written with (vocab_file), or write them again with "
                         "this one")
    return max_seq_length
