"""Arrays computed once per machine: the character table and the FastBertTokenizer probe.

Both take about a second per process and casing, and depend only on this Python's
`unicodedata`, the installed tensorflow-text and kbert's own code, so they are stored on disk
under a key made of exactly those (a new version of any of them computes afresh). The cache
lives in `$KBERT_CACHE_DIR`, else `$XDG_CACHE_HOME/kbert`, else `~/.cache/kbert`; set
`KBERT_CACHE_DIR=""` to turn it off. A directory that cannot be written, or a damaged file,
only means the arrays are computed again.
"""

import hashlib
import os

import numpy as np
from absl import logging

from kbert import io


def cache_dir():
    """The cache directory, or None when `KBERT_CACHE_DIR` is set empty."""
    if "KBERT_CACHE_DIR" in os.environ:
        return os.environ["KBERT_CACHE_DIR"] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kbert")


def source_digest(*modules):
    """A digest of the source files of `modules` (so edited code never reads old arrays)."""
    digest = hashlib.sha256()
    for module in modules:
        with open(module.__file__, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def cached_arrays(name, key, compute):
    """`compute()` (a tuple of numpy arrays), read from the cache when stored under `key`.

    Args:
        name: str. File name prefix, e.g. "char_table_uncased".
        key: str. Everything the result depends on; hashed into the file name.
        compute: callable returning a tuple of numpy arrays.

    Returns:
        tuple of numpy arrays.
    """
    directory = cache_dir()
    if directory is None:
        return compute()
    path = os.path.join(directory, f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.npz")
    try:
        with np.load(path, allow_pickle=False) as stored:
            return tuple(stored[f"arr_{i}"] for i in range(len(stored.files)))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError) as e:  # damaged or foreign: compute it again
        logging.warning("%s: unreadable cache file (%s); recomputing", path, e)
    arrays = compute()
    try:
        os.makedirs(directory, exist_ok=True)
        with io.atomic_write(path, "wb") as f:
            np.savez(f, *arrays)
    except OSError as e:
        logging.info("%s: not cached (%s)", path, e)
    return arrays
