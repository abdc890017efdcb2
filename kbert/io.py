"""Atomic file output: write under a temporary name beside the target, rename when complete.

A full disk while writing raises `DiskFull`, which names the file.
"""

import contextlib
import errno
import glob
import json
import os
import re
import shutil
import socket
import tempfile

import numpy as np

# `.kbert-tmp-<host>-<pid>-<random>`: a later run can tell its own host's dead writers' leftovers.
_TMP_PREFIX = ".kbert-tmp-"
_TMP_NAME = re.compile(rf"^{re.escape(_TMP_PREFIX)}(?:(?P<host>.+)-(?P<pid>\d+)-)?[^-]+$")


class DiskFull(OSError):
    """No space left on the device while writing `filename` (errno ENOSPC).

    Attributes:
        needed: int or None. Bytes the whole file needs, where the writer knows it.
    """

    def __init__(self, filename, needed=None):
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(filename))
        self.needed = needed


def is_disk_full(error):
    """Whether `error` says the disk is full: ENOSPC, or h5py's or TensorFlow's text of it."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return True
    # h5py raises OSError/RuntimeError and TensorFlow its own errors, with errno 28 in text.
    text = str(error)
    return "No space left on device" in text or "errno = 28" in text


@contextlib.contextmanager
def atomic_write(path, mode="w", encoding="utf-8"):
    """Opens a temporary file beside `path`; on success renames it to `path`.

    A failure inside the block removes the temporary file and leaves any earlier `path` intact.

    Args:
        path: str. The final file name.
        mode: str. "w" (text) or "wb" (bytes). Defaults to "w".
        encoding: str. Text encoding for mode "w". Defaults to "utf-8".
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_partial_prefix(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        if is_disk_full(e) and not isinstance(e, DiskFull):
            raise DiskFull(path) from e
        raise


def remove_partial_writes(path):
    """Removes the temporary files `atomic_write` left beside `path` in killed runs; only
    while holding `path`'s lock, when no other writer can be writing one.

    Returns:
        list of str, the removed paths.
    """
    directory = os.path.dirname(os.path.abspath(path))
    pattern = os.path.join(glob.escape(directory), f"{glob.escape(_partial_prefix(path))}*.tmp")
    removed = sorted(glob.glob(pattern))
    for partial in removed:
        os.remove(partial)
    return removed


def _partial_prefix(path):
    return f".{os.path.basename(os.fspath(path))}."


@contextlib.contextmanager
def atomic_files(directory):
    """Yields a temporary directory inside `directory`; on success moves its files into it.

    For writers that produce several files at once (a TF checkpoint's `.index` and `.data-*`):
    either all of them replace their earlier versions, or none does.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    with _scratch_directory(directory, directory) as tmp:
        yield tmp
        for name in sorted(os.listdir(tmp)):
            os.replace(os.path.join(tmp, name), os.path.join(directory, name))


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a temporary directory beside `path`; on success renames it to `path`.

    For a set of files that only make sense together (a training backup: weights and the
    position they belong to): `path` appears complete or not at all. An existing `path`
    (a leftover of the same name) is replaced.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    with _scratch_directory(parent, path) as tmp:
        yield tmp
        if os.path.isdir(path):
            shutil.rmtree(path)
        os.rename(tmp, path)


@contextlib.contextmanager
def _scratch_directory(parent, target):
    """A temporary directory in `parent`, removed after the block; a full disk in the block
    raises `DiskFull` naming the file it stopped, under its final name in `target`."""
    tmp = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{socket.gethostname()}-{os.getpid()}-",
                           dir=parent)
    try:
        yield tmp
    except Exception as e:
        if is_disk_full(e) and not isinstance(e, DiskFull):
            raise DiskFull(_stopped_file(target, tmp)) from e
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _stopped_file(target, tmp):
    """The file a full disk stopped: the entry of `tmp` written last, under its final name in
    `target`; `target` itself when there is none."""
    names = os.listdir(tmp) if os.path.isdir(tmp) else []
    newest = max(names, key=lambda n: os.path.getmtime(os.path.join(tmp, n)), default=None)
    return target if newest is None else os.path.join(target, newest)


def remove_stale_temporaries(directory):
    """Removes the `atomic_files` directories that killed runs left in `directory`.

    Only those of writers that are gone: on this host with no live process of their pid (or
    from a kbert too old to name them). Another host's, or a running writer's, stay.

    Returns:
        list of str, the removed paths.
    """
    removed = []
    if not os.path.isdir(directory):
        return removed
    for name in sorted(os.listdir(directory)):
        match = _TMP_NAME.match(name)
        path = os.path.join(directory, name)
        if not match or not os.path.isdir(path):
            continue
        if match["pid"] is not None and (match["host"] != socket.gethostname()
                                         or _alive(int(match["pid"]))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def copy_file(source, target):
    """Copies `source` to `target` atomically; nothing to do when they are the same file."""
    if os.path.abspath(source) != os.path.abspath(target):
        with open(source, "rb") as f, atomic_write(target, "wb") as out:
            shutil.copyfileobj(f, out)


def write_json(path, content):
    """Writes `content` as indented JSON, atomically; numpy scalars are written as numbers."""
    with atomic_write(path) as f:
        f.write(json.dumps(content, indent=2, default=_plain) + "\n")


def read_json(path):
    """The JSON object in `path`, or {} when there is no such file."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
