"""UTF-8 text input: errors that name `file:line` for bytes that are not UTF-8 or not text.

Python's decoder says only "'utf-8' codec can't decode byte 0xff in position 4711" of a
block, with no file and no line; `open_text` turns that into the file and line, and
`check_text` looks at the start of a file that should be text (raw pretraining text) so
that a TFRecord or other binary file given by mistake fails before any work.
"""

import contextlib
import os

_SAMPLE_BYTES = 1 << 12  # enough to tell text from TFRecords, cheap over many files


@contextlib.contextmanager
def open_text(path):
    """`path` opened as UTF-8 text (a leading byte-order mark dropped; `newline=""`, as the
    csv module wants); a byte that is not UTF-8 raises ValueError naming `path:line`."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a directory — expected a text file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: not found")
    with open(path, encoding="utf-8-sig", newline="") as f:
        try:
            yield f
        except UnicodeDecodeError:
            raise ValueError(f"{_not_utf8(path)} — save the file as UTF-8") from None


def check_text(path, hint):
    """Raises ValueError naming `path` if its first 4 KiB are not UTF-8 text (a NUL byte,
    or bytes that are not UTF-8); `hint` says what to do instead."""
    with open(path, "rb") as f:
        sample = f.read(_SAMPLE_BYTES)
    nul = sample.find(b"\0")
    if nul >= 0:
        raise ValueError(f"{path}: not text (a NUL byte at byte {nul}) — {hint}")
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        # Not a character cut by the end of the sample (a file that ends there is not cut).
        if e.reason != "unexpected end of data" or len(sample) < _SAMPLE_BYTES:
            raise ValueError(f"{_not_utf8(path)} — save the file as UTF-8; {hint}") from None


def check_utf8(files, fix):
    """Checks that every line of `files` is UTF-8 (reads them whole), for a reader with no
    `skip_bad_lines`.

    Raises:
        ValueError: naming the file and line of the first line that is not, and `fix`.
    """
    for path in files:
        bad = _first_bad_line(path)
        if bad:
            number, error, _ = bad
            raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte "
                             f"{error.start} of the line) — {fix}")


def _not_utf8(path):
    """`path:line: not UTF-8 (...)` for the first line of `path` that does not decode."""
    bad = _first_bad_line(path)
    if not bad:
        return f"{path}: not UTF-8"
    number, error, raw = bad
    return (f"{path}:{number}: not UTF-8 ({error.reason}: byte 0x{raw[error.start]:02x} at "
            f"column {error.start + 1})")


def _first_bad_line(path):
    """(line number, UnicodeDecodeError, line bytes) of the first line of `path` that is not
    UTF-8, or None."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return number, e, raw
    return None
