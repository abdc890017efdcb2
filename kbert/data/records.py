"""Sharded `tf.train.Example` TFRecords: a vectorized encoder, atomic shards, `*_meta.json`.

`encode_examples` serializes a whole batch of fixed-length examples from numpy arrays without
building one protobuf object per example (the protobuf route costs ~100 us per pretraining
example, more than everything else in `create_pretraining_data` together). Its bytes parse
to exactly the `tf.train.Example` that Google's writer builds, fields in schema order.

Output names (`shard_paths`): a comma list `a.tfrecord,b.tfrecord`; `out/train.tfrecord@8`
or `out/train.tfrecord` with `num_shards=8`, both meaning `out/train.tfrecord-00000-of-00008`
... `-00007-of-00008`; or a single file. The sidecar is `<first name without @N>_meta.json`.
"""

import contextlib
import glob
import hashlib
import json
import os
import re
import struct

import numpy as np
import tensorflow as tf
from google.protobuf import message

from kbert import io
from kbert.data import features as features_lib

_SHARD_SUFFIX = re.compile(r"@(\d+)$")
META_SUFFIX = "_meta.json"


def shard_paths(output_file, num_shards=None):
    """Expands an output spec into shard file names.

    Args:
        output_file: str. Comma list, `name@N`, or one name.
        num_shards: int or None. With one name, writes `name-0000i-of-0000N`. Must agree with
            a comma list's or `@N`'s count when given.

    Returns:
        list of str.
    """
    names = [name.strip() for name in output_file.split(",") if name.strip()]
    if not names:
        raise ValueError("output_file is empty")
    if len(names) > 1:
        if num_shards not in (None, len(names)):
            raise ValueError(f"num_shards={num_shards} but output_file lists {len(names)} files")
        return names
    match = _SHARD_SUFFIX.search(names[0])
    base = names[0][:match.start()] if match else names[0]
    count = int(match.group(1)) if match else (1 if num_shards is None else num_shards)
    if match and num_shards not in (None, count):
        raise ValueError(f"num_shards={num_shards} but output_file says @{count}")
    if match and count < 1:
        raise ValueError(f"output_file={names[0]}: @{count} names no file — @N needs N >= 1")
    if count < 1:
        raise ValueError(f"num_shards must be positive, got {count}")
    if count == 1 and not match:
        return [base]
    return [f"{base}-{i:05d}-of-{count:05d}" for i in range(count)]


def meta_path(output_file):
    """The `*_meta.json` sidecar of an output spec (see module docstring)."""
    first = output_file.split(",")[0].strip()
    return _SHARD_SUFFIX.sub("", first) + META_SUFFIX


def is_meta(path):
    """Whether `path` is a `*_meta.json` sidecar (a glob for the records matches it too)."""
    return os.fspath(path).endswith(META_SUFFIX)


def read_meta(path):
    """The sidecar at `path`; ValueError naming it if it is not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a kbert _meta.json sidecar ({e}); remove it and the "
                         "shards it lists, or choose another output_file") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a kbert _meta.json sidecar (a JSON "
                         f"{type(meta).__name__}, expected an object); remove it and the shards "
                         "it lists, or choose another output_file")
    return meta


def write_meta(path, meta):
    with io.atomic_write(path) as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")


def vocab_sha256(tokens):
    """The SHA-256 of a vocab's tokens in id order, as a sidecar records it."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def find_meta(files):
    """The sidecar that lists every file of `files` as a complete shard, or None."""
    found = find_meta_file(files)
    return found and found[1]


def find_meta_file(files):
    """(path, content) of the sidecar that lists every file of `files` as a complete shard,
    or None."""
    directories = sorted({os.path.dirname(os.path.abspath(f)) for f in files})
    wanted = {os.path.abspath(f) for f in files}
    for directory in directories:
        for candidate in sorted(glob.glob(os.path.join(directory, "*" + META_SUFFIX))):
            try:
                meta = read_meta(candidate)
            except (OSError, ValueError):
                continue
            shards = {os.path.abspath(os.path.join(directory, name))
                      for name, count in meta.get("shards", {}).items() if count is not None}
            if wanted <= shards:
                return candidate, meta
    return None


def check_first_records(files, schema, **dims):
    """Checks the first record of each file against `schema`: its feature names, kinds and
    lengths (`dims` resolves the named lengths, e.g. `max_seq_length=128`).

    One record per file, read without TensorFlow ops (a multi-worker strategy must be made
    before the first one): cheap, and it names the file that tf.data's errors do not for a
    file that is not TFRecords, is cut short in its first record, or was written with other
    lengths. A file may be empty, but not all of them.

    Raises:
        ValueError: naming the file and what is wrong.
    """
    lengths = features_lib.feature_lengths(schema, **dims)
    kinds = {"int64": "int64_list", "float32": "float_list"}
    empty = 0
    for path in files:
        serialized = _first_record(path)
        if serialized is None:
            empty += 1
            continue
        try:
            features = tf.train.Example.FromString(serialized).features.feature
        except message.DecodeError:
            raise ValueError(f"{path}: its first record is not a tf.train.Example — not "
                             "pretraining TFRecords") from None
        for name, spec in schema.items():
            if name not in features:
                raise ValueError(f"{path}: its records have no {name!r} feature (they have "
                                 f"{sorted(features)[:8]}) — not records of this schema")
            kind = features[name].WhichOneof("kind")
            if kind != kinds[spec.dtype]:
                raise ValueError(f"{path}: feature {name!r} is a {kind}, expected a "
                                 f"{kinds[spec.dtype]}")
            count = len(getattr(features[name], kind).value)
            if count != lengths[name]:
                dim = spec.length
                why = (f"; the records were written with {dim}={count}: pass that {dim}"
                       if isinstance(dim, str) else "")
                named = f" ({dim}={lengths[name]})" if isinstance(dim, str) else ""
                raise ValueError(f"{path}: feature {name!r} has {count} values, expected "
                                 f"{lengths[name]}{named}{why}")
    if files and empty == len(files):
        raise ValueError(f"{files[0]}{' ...' if len(files) > 1 else ''}: no records in any "
                         "of the input files")


def _first_record(path):
    """The data of the first record of a TFRecord file, or None for an empty file.

    TFRecord framing: uint64 length, uint32 CRC of the length, data, uint32 CRC of the data
    (the CRCs are not checked: a wrong length already shows a file that is not TFRecords).
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        header = f.read(12)
        if not header:
            return None
        length = struct.unpack("<Q", header[:8])[0] if len(header) == 12 else None
        if length is None or 12 + length + 4 > size:
            raise ValueError(f"{path}: not a TFRecord file, or cut short: its first record "
                             f"claims {length if length is not None else '?'} bytes, the file "
                             f"has {size}")
        return f.read(length)


def check_readable(files):
    """Reads every record of `files` to the end of each file, with its CRCs: a corrupted record,
    one cut short, or bytes after the last record too few for one (a file cut inside a
    record's header, which TensorFlow's readers take for its end) raise, naming the file.

    No TensorFlow ops (a multi-worker strategy must be made before the first one); about
    1 GB/s.

    Raises:
        ValueError: naming the file and the record's offset.
    """
    for path in files:
        size, end = os.path.getsize(path), 0
        try:
            for record in tf.compat.v1.io.tf_record_iterator(path):
                end += 12 + len(record) + 4  # length and its CRC, data, the data's CRC
        except tf.errors.DataLossError as e:
            what = re.search(r"(?:truncated|corrupted) record at \d+", e.message)
            what = what.group(0) if what else e.message.strip().splitlines()[-1]
        else:
            if end == size:
                continue
            what = f"truncated record at {end}"
        raise ValueError(f"{path}: a damaged or cut-short record ({what}) — rewrite or remove "
                         "the file")


@contextlib.contextmanager
def record_writer(path):
    """A `tf.io.TFRecordWriter` on a temporary name; renamed to `path` only when the block succeeds.

    A run that dies half-way leaves no file under `path`, so a re-run knows which shards are
    complete (as Google's `write_instance_to_example_files` does not).
    """
    path = os.path.abspath(os.fspath(path))
    with io.atomic_files(os.path.dirname(path)) as tmp:
        writer = tf.io.TFRecordWriter(os.path.join(tmp, os.path.basename(path)))
        try:
            yield writer
        finally:
            writer.close()


def encode_examples(arrays, schema):
    """Serializes a batch of fixed-length `tf.train.Example`s.

    Args:
        arrays: dict of feature name -> numpy array [batch, length]; int64 features must be
            non-negative integers (all pretraining features are).
        schema: dict of name -> `features.FeatureSpec`, in the order fields are written.

    Returns:
        list of bytes, one serialized `tf.train.Example` per row.
    """
    columns = []  # per row, a list of bytes: its pieces in order
    fixed = []  # consecutive features whose every row has the same length, [batch, width] uint8
    body_lengths = 0
    batch = None
    for name, spec in schema.items():
        values = np.asarray(arrays[name])
        values = values.reshape(len(values), -1)
        if batch is not None and len(values) != batch:
            raise ValueError(f"feature {name!r} has {len(values)} rows, expected {batch}")
        batch = len(values)
        if spec.dtype == "float32":
            flat = np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(-1)
            lengths, tag = np.full(batch, 4 * values.shape[1], np.int64), 0x12  # float_list
        elif spec.dtype == "int64":
            (flat, lengths), tag = _packed_varints(values), 0x1A  # Feature.int64_list
        else:
            raise ValueError(f"feature {name!r}: unsupported dtype {spec.dtype!r}")
        cache = _HeaderCache(name, tag)
        if batch and lengths.min() == lengths.max():  # one header for all rows: a block
            header = np.frombuffer(cache[int(lengths[0])], np.uint8)
            fixed.append(np.broadcast_to(header, (batch, len(header))))
            fixed.append(flat.reshape(batch, -1))
            body_lengths += len(header) + lengths
            continue
        if fixed:
            columns.append(_rows_of_block(np.concatenate(fixed, axis=1)))
            fixed = []
        headers = [cache[n] for n in lengths.tolist()]
        body_lengths += np.fromiter(map(len, headers), np.int64, batch) + lengths
        data, offsets = flat.tobytes(), np.concatenate([[0], np.cumsum(lengths)]).tolist()
        columns.append(headers)
        columns.append([data[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)])
    if not batch:
        return []
    if fixed:
        columns.append(_rows_of_block(np.concatenate(fixed, axis=1)))
    cache = _HeaderCache.example()
    prefix = [cache[n] for n in np.broadcast_to(body_lengths, (batch,)).tolist()]
    join = b"".join
    return [join(parts) for parts in zip(prefix, *columns, strict=True)]


def _rows_of_block(block):
    data, width = block.tobytes(), block.shape[1]
    return [data[i:i + width] for i in range(0, len(data), width)]


class _HeaderCache(dict):
    """Packed length -> the bytes that precede a feature's packed values inside `Features`."""

    def __init__(self, name, tag):
        super().__init__()
        self._key = name.encode("utf-8") if name is not None else None
        self._tag = tag

    @classmethod
    def example(cls):
        """Body length -> the bytes that start an Example (its `features` field)."""
        return cls(None, None)

    def __missing__(self, length):
        if self._key is None:
            self[length] = b"\x0a" + _varint(length)
            return self[length]
        # Example > Features.feature (map entry: key, value) > Feature.<kind>_list > value.
        value_list = b"\x0a" + _varint(length)  # Int64List/FloatList.value, packed
        list_len = len(value_list) + length
        kind = bytes([self._tag]) + _varint(list_len)
        feature_len = len(kind) + list_len
        entry = b"\x0a" + _varint(len(self._key)) + self._key + b"\x12" + _varint(feature_len)
        entry_len = len(entry) + feature_len
        header = b"\x0a" + _varint(entry_len) + entry + kind + value_list
        self[length] = header
        return header


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _packed_varints(values):
    """Row-wise protobuf varints of non-negative ints [batch, n]: (flat bytes, row lengths)."""
    values = np.asarray(values).reshape(len(values), -1)
    if values.size and values.min() < 0:
        raise ValueError("encode_examples: int64 features must be non-negative")
    top = int(values.max()) if values.size else 0
    if top < 0x80:  # one byte per value: masks, segment ids, labels, short positions
        return values.astype(np.uint8).reshape(-1), np.full(len(values), values.shape[1], np.int64)
    dtype = np.uint32 if top < 1 << 32 else np.uint64
    values = values.astype(dtype)
    groups = (top.bit_length() + 6) // 7
    # Byte g of a value holds bits 7g..7g+6, with the high bit set when byte g+1 follows; it
    # exists if g == 0 or the value is at least 2**(7g). Lay out [batch, n, groups], compress.
    septets = np.empty(values.shape + (groups,), np.uint8)
    present = np.empty(values.shape + (groups,), bool)
    present[..., 0] = True
    for g in range(groups):
        septet = (values >> dtype(7 * g)) & dtype(0x7F)
        if g + 1 < groups:
            present[..., g + 1] = values >= dtype(1 << (7 * (g + 1)))
            septet |= present[..., g + 1].astype(dtype) << dtype(7)
        septets[..., g] = septet
    flat = np.compress(present.reshape(-1), septets.reshape(-1))  # faster than [present]
    return flat, present.sum(axis=(1, 2), dtype=np.int64)


def serialized_schema(schema, **dims):
    """JSON-ready description of `schema` for a sidecar: `{name: [dtype, length]}`."""
    lengths = features_lib.feature_lengths(schema, **dims)
    return {name: [spec.dtype, lengths[name]] for name, spec in schema.items()}
