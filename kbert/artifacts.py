"""The output guard: what every tool that writes a directory calls, so that nothing is lost.

    locked(directory)   one writer at a time: an exclusive `flock` on `directory/.kbert.lock`
                        (it holds the writer's pid); a second run is refused at once.
    claim(directory, manifest, ...)
                        `run_manifest.json` semantics: a directory holding nothing of ours
                        (`exclusive`: nothing at all) is claimed; the same run, interrupted,
                        resumes; another run, or a finished one, is refused unless
                        `overwrite_output_dir`; an unfinished run that saved no progress is
                        taken over (its command failed before it could lose anything);
                        writing never replaces or removes an input.
                        Call it after validation: a refused or failed check writes nothing.
    Claim.finish()      marks the run finished: a rerun needs `overwrite_output_dir`.
    fingerprint(path)   {"path", "sha256"} of a file, directory or checkpoint prefix, for
                        manifests and sidecars.
    check_writable(path)
                        refuses, naming the directory, a path that cannot be written: for a
                        writer that would otherwise find out only after loading a model.
    check_results_data(directory, results_file, data, ...)
                        results (eval scores) are replaced only by results on the same data.

The names of the files in an output directory (`MODEL_FILE`, `VOCAB_FILE`, ...) are here.
Files are written with `kbert.io` (temporary name, then rename); a full disk raises
`kbert.io.DiskFull` naming the file.
"""

import contextlib
import errno
import fcntl
import fnmatch
import hashlib
import importlib.metadata
import os
import shutil

from absl import logging

from kbert import io

# The output-directory layout, named once for every module that writes or reads it.
MANIFEST_FILE = "run_manifest.json"
MODEL_FILE = "model.keras"  # a recipe's trained model
EXPORT_SETTINGS_FILE = "export_settings.json"  # keyword arguments of export_saved_model
VOCAB_FILE = "vocab.txt"
BERT_CONFIG_FILE = "bert_config.json"
TRAIN_RESULTS_FILE = "train_results.json"
EVAL_RESULTS_FILE = "eval_results"  # .txt and .json
BACKUP_DIR = "backup"  # a run's backup until its outputs are written
DISTRIBUTION = "kbert-keras"  # the name kbert is installed under (setup.cfg)
LOCK_FILE = ".kbert.lock"
_OVERWRITE_HINT = ("pass --overwrite_output_dir to start over in {dir}, or choose another "
                  "--output_dir")

_HELD = {}  # lock file -> nesting depth of `locked` in this process (flock is per open file)


class Busy(ValueError):
    """Another live process is writing the directory."""


@contextlib.contextmanager
def locked(directory, name=LOCK_FILE, what=None):
    """Holds the exclusive lock of `directory` (created if missing) for the block.

    The lock is `flock` on `directory/.kbert.lock`, which holds the writer's pid: the kernel
    releases it when the process ends, however it ends, so a killed run never blocks the next.
    Nested calls for one lock in one process share it. A directory this call created is
    removed again if the block left it empty (a refused run leaves nothing).

    Args:
        directory: str.
        name: str. The lock file's name, for several outputs in one directory (each its own
            lock). Defaults to ".kbert.lock".
        what: str. What the lock guards, for the message. Defaults to `directory`.

    Raises:
        Busy: another process holds the lock: "another run (pid N) is writing DIR".
    """
    directory = os.path.abspath(os.fspath(directory))
    path = os.path.join(directory, name)
    if path in _HELD:
        _HELD[path] += 1
        try:
            yield
        finally:
            _HELD[path] -= 1
        return
    created = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    fd = _acquire(path, what or directory)
    _HELD[path] = 1
    try:
        yield
    finally:
        del _HELD[path]
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)  # before unlocking: a waiting writer re-checks the inode
            os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only when empty


def _acquire(path, what):
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise Busy(f"another run (pid {pid}) is writing {what} — wait for it to end, or "
                       "choose another output") from None
        except OSError as e:  # a filesystem without flock (some network mounts)
            os.close(fd)
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            logging.warning("%s: cannot lock it (%s); make sure no other run writes it",
                            what, e.strerror)
            return None
        # Its holder removes the file before unlocking: if we locked a removed file, retry.
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                return fd
        os.close(fd)


class Claim:
    """A claimed output directory; see `claim`.

    Attributes:
        directory: str.
        resumed: bool. The same run was interrupted here and resumes.
    """

    def __init__(self, directory, resumed, foreign):
        self.directory, self.resumed, self._foreign = directory, resumed, foreign

    def finish(self):
        """Marks the run finished; for a run that owns its whole directory, records which
        entries it wrote (what `overwrite_output_dir` removes later)."""
        files = None
        if self._foreign is not None:
            files = sorted(set(_entries(self.directory)) - self._foreign)
        finish(self.directory, files)


def claim(directory, manifest, *, overwrite_output_dir=False, inputs=(), owned=None,
          progress=(), exclusive=False):
    """Makes `directory` ready for the run that `manifest` describes.

    Args:
        directory: str. The output directory (created if missing).
        manifest: dict. What identifies the run (settings, input fingerprints); JSON-ready.
        overwrite_output_dir: bool. Start over: remove what an earlier run left (`owned`, or
            the entries its manifest recorded). Defaults to False.
        inputs: sequence of (name, path). What the run reads: refused when writing the
            directory would replace or remove one of them, even with `overwrite_output_dir`.
        owned: sequence of names or glob patterns of what the run writes; None when the run
            owns its whole directory (a converter's release directory). Without a manifest,
            existing entries of these refuse the claim.
        progress: sequence of names or patterns: what an unfinished run saved that a restart
            resumes from (a backup). An unfinished run of other settings with none of it is
            taken over.
        exclusive: bool. Without a manifest, any entry refuses the claim, not only `owned`
            ones (`overwrite_output_dir` leaves the others in place). Defaults to False.

    Returns:
        `Claim`.

    Raises:
        ValueError: naming the input in the way, or what differs from the run found there.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    check_not_input(directory, inputs, owned)
    path = os.path.join(directory, MANIFEST_FILE)
    old = _read_manifest(path)
    ways_out = _OVERWRITE_HINT.format(dir=directory)
    ours = owned is None and old is not None  # a whole-directory run's entries are its own
    resumed = False
    if overwrite_output_dir:
        _remove(directory, old, owned)
    elif old is None:
        found = _matching(directory, None if exclusive else owned)
        if found:
            raise ValueError(f"{directory}: holds {', '.join(found[:5])} of a run without "
                             f"{MANIFEST_FILE}; {ways_out}")
    else:
        differences = _differences(_identity(old), manifest)
        if differences and not old.get("finished") and not _matching(directory, progress):
            logging.info("%s: an earlier run (%s) stopped before saving any progress: "
                         "starting over", directory, "; ".join(differences))
            _remove(directory, old, owned)
        elif differences:
            raise ValueError(f"{path}: {directory} holds another run "
                             f"({'; '.join(differences)}); {ways_out}")
        elif old.get("finished"):
            raise ValueError(f"{directory}: holds a finished run with these settings; "
                             f"{ways_out}")
        else:
            resumed = True
            logging.info("%s: the same run, interrupted: resuming", directory)
    foreign = None
    if owned is None:
        foreign = set() if ours and not overwrite_output_dir else set(_entries(directory))
    io.write_json(path, {**manifest, "finished": False})
    return Claim(directory, resumed, foreign)


def finish(directory, files=None):
    """Marks the run in `directory` finished (and records `files`, when given)."""
    path = os.path.join(directory, MANIFEST_FILE)
    manifest = {**io.read_json(path), "finished": True}
    if files is not None:
        manifest["files"] = files
    io.write_json(path, manifest)


def check_not_input(directory, inputs, owned=None):
    """Raises ValueError when writing `directory` would replace or remove an input.

    An input is in the way when it is the directory itself, or an entry in it that the run
    writes (`owned`; None: every entry).

    Args:
        directory: str.
        inputs: sequence of (name, path); empty paths are skipped.
        owned: see `claim`.
    """
    out = os.path.realpath(directory)
    for name, path in inputs:
        if not path:
            continue
        real = os.path.realpath(path)
        if real == out:
            raise ValueError(f"{directory}: is the {name} this run reads; choose another "
                             "output")
        if os.path.dirname(real) == out and (owned is None or any(
                fnmatch.fnmatch(os.path.basename(real), p) for p in owned)):
            raise ValueError(f"{path}: the {name} would be replaced by this run's output in "
                             f"{directory}; choose another output")


def check_writable(path):
    """Raises PermissionError (errno and `filename` set, so the tools say "cannot write
    here") unless `path`, or the nearest directory above it that exists, is writable: for
    a writer that would otherwise find out only after loading a model."""
    existing = os.path.abspath(os.fspath(path))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if os.path.isdir(existing) and not os.access(existing, os.W_OK | os.X_OK):
        read_only = os.statvfs(existing).f_flag & os.ST_RDONLY
        code = errno.EROFS if read_only else errno.EACCES
        raise PermissionError(code, os.strerror(code), existing)


def check_results_data(directory, results_file, data, overwrite_output_dir=False):
    """Refuses to replace `results_file` computed on other data.

    Args:
        directory: str.
        results_file: str. A JSON file in `directory` whose "data" entry holds the
            fingerprints of the data its results came from.
        data: dict of name -> fingerprint (`fingerprint`) of the data of this run.
        overwrite_output_dir: bool. Replace them anyway. Defaults to False.

    Raises:
        ValueError: a name in both with other contents, naming both paths.
    """
    path = os.path.join(directory, results_file)
    if overwrite_output_dir or not os.path.exists(path):
        return
    old = io.read_json(path).get("data") or {}
    changed = [f"{name}: {old[name]['path']} then, {new['path']} now" for name, new in
               data.items() if name in old and old[name].get("sha256") != new["sha256"]]
    if changed:
        raise ValueError(f"{path}: holds results on other data ({'; '.join(changed)}); pass "
                         "--overwrite_output_dir to replace them, or write them to another "
                         "--output_dir")


def kbert_version():
    """The installed kbert's version, as manifests and sidecars record it."""
    return importlib.metadata.version(DISTRIBUTION)


def fingerprint(path):
    """{"path": absolute path, "sha256": hex digest} of what `path` names.

    A file: its contents. A directory: the names and contents of every file under it. A
    checkpoint prefix (no such file): the names and contents of its `prefix.*` files.
    """
    path = os.path.abspath(os.fspath(path))
    digest = hashlib.sha256()
    if os.path.isfile(path):
        _digest_file(digest, path)
        return {"path": path, "sha256": digest.hexdigest()}
    if os.path.isdir(path):
        files = sorted(os.path.join(root, name) for root, _, names in os.walk(path)
                       for name in names if name != LOCK_FILE)
    else:
        directory, base = os.path.split(path)
        files = sorted(os.path.join(directory, name) for name in os.listdir(directory)
                       if name.startswith(base + ".")) if os.path.isdir(directory) else []
        if not files:
            raise FileNotFoundError(errno.ENOENT, "not found", path)
    for file in files:
        digest.update(os.path.relpath(file, os.path.dirname(path)).encode("utf-8") + b"\0")
        _digest_file(digest, file)
    return {"path": path, "sha256": digest.hexdigest()}


def _digest_file(digest, path):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)


def _read_manifest(path):
    try:
        return io.read_json(path) or None
    except ValueError as e:  # torn by an older kbert that wrote it in place
        raise ValueError(f"{path}: not a run manifest ({e}); "
                         f"{_OVERWRITE_HINT.format(dir=os.path.dirname(path))}") from None


def _identity(manifest):
    return {k: v for k, v in manifest.items() if k not in ("finished", "files")}


def _entries(directory):
    return [name for name in os.listdir(directory)
            if name not in (MANIFEST_FILE, LOCK_FILE) and not name.startswith(".kbert")]


def _matching(directory, patterns):
    """Entries of `directory` matching `patterns` (None: every entry), sorted."""
    names = sorted(_entries(directory)) if os.path.isdir(directory) else []
    if patterns is None:
        return names
    return [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]


def _remove(directory, old, owned):
    """Removes what an earlier run left: `owned`, or what its manifest recorded."""
    names = _matching(directory, owned) if owned is not None else (old or {}).get("files", [])
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(directory, MANIFEST_FILE))


def _differences(old, new, prefix=""):
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if _same_file_edited(a, b):
            found.append(f"{prefix}{key}: {b['path']} was edited since that run (other "
                         "SHA-256)")
        elif isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: was {a!r}, now {b!r}")
    return found


def _same_file_edited(a, b):
    """Two `fingerprint`s of one path with other contents."""
    return (isinstance(a, dict) and isinstance(b, dict) and {"path", "sha256"} <= set(a)
            and a["path"] == b.get("path") and a["sha256"] != b.get("sha256"))
