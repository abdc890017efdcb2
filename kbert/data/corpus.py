"""Raw pretraining text: input files, byte-range partitions, documents of sentences.

Two input formats:

- `text` (Google's create_pretraining_data.py input): one sentence per line, blank lines
  between documents.
- `wikiextractor`: `<doc id=... title=...>`, the title line (dropped), one paragraph per line,
  `</doc>`. Paragraphs are cut into sentences by `split_sentences`; documents with no body
  are skipped.

Unlike Google's reader, a document never runs on from one file into the next.

The input files are treated as one byte stream cut into `num_parts` equal byte ranges. A
document belongs to the range that holds its start (the blank line before it, or the file
start, for `text`; its `<doc` line for `wikiextractor`), so each range can be read on its own,
with memory that does not grow with the corpus, and the ranges hold every document once.
"""

import dataclasses
import glob
import itertools
import os
import re

from absl import logging

from kbert import io

TEXT = "text"
WIKIEXTRACTOR = "wikiextractor"
INPUT_FORMATS = (TEXT, WIKIEXTRACTOR)


def list_input_files(patterns):
    """Expands comma-separated file names and globs, in the order given.

    Args:
        patterns: str (comma-separated) or list of str.

    Returns:
        list of str, each file once.

    Raises:
        FileNotFoundError: if a pattern matches nothing.
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files, seen = [], set()
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise FileNotFoundError(f"{pattern}: no input file matches")
        for match in matches:
            if match not in seen:
                seen.add(match)
                files.append(match)
    if not files:
        raise FileNotFoundError("no input files given")
    return files


@dataclasses.dataclass(frozen=True)
class ByteRange:
    """Part `index` of the input: bytes [start, end) of the concatenated files."""

    files: tuple
    start: int
    end: int
    index: int = 0

    @property
    def size(self):
        return self.end - self.start


def partition(files, num_parts):
    """Cuts the concatenated `files` into `num_parts` byte ranges of (nearly) equal size."""
    files = tuple(files)
    total = sum(os.path.getsize(f) for f in files)
    bounds = [total * i // num_parts for i in range(num_parts + 1)]
    return [ByteRange(files, bounds[i], bounds[i + 1], i) for i in range(num_parts)]


def read_documents(byte_range, input_format=TEXT, *, skip_bad_lines=False, on_bytes=None):
    """Yields the documents of one byte range as lists of sentences (str, stripped, non-empty).

    Args:
        byte_range: `ByteRange`.
        input_format: str. "text" or "wikiextractor".
        skip_bad_lines: bool. Log and skip lines that are not UTF-8 instead of raising.
            Defaults to False.
        on_bytes: callable(int) or None. Called with the bytes read since its last call.

    Raises:
        ValueError: a line that is not UTF-8 (unless `skip_bad_lines`), naming file and line.
        OSError: a file that cannot be read, naming it.
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    offset = 0
    for path in byte_range.files:
        try:
            size = os.path.getsize(path)
        except OSError as e:
            raise OSError(f"{path}: cannot read: {e.strerror}") from None
        lo, hi = byte_range.start - offset, byte_range.end - offset
        offset += size
        if hi <= 0 or lo >= size:
            continue
        reader = _read_wikiextractor if input_format == WIKIEXTRACTOR else _read_text
        yield from reader(_Blocks(path, max(lo, 0), skip_bad_lines, on_bytes), hi)


def _read_text(blocks, hi):
    # Owns the file's first document if the range starts at 0, then every document whose
    # leading blank line starts before `hi`; the last one runs on past `hi` to its end.
    document = [] if blocks.start == 0 else None
    for start, line in blocks.lines(hi):
        if line:
            if document is None:
                if start >= hi:  # no document of ours starts in this range
                    return
            elif line is not _BAD:  # a bad line is no document break either
                document.append(line)
            continue
        if document:
            yield document
        if start >= hi:
            return
        document = []
    if document:
        yield document


def _read_wikiextractor(blocks, hi):
    document, expect_title = None, False
    for start, line in blocks.lines(hi):
        if line is _BAD:
            continue
        if line.startswith("<doc ") or line == "<doc>":
            if start >= hi:
                return
            document, expect_title = [], True
        elif document is None:
            continue
        elif expect_title:
            expect_title = False  # WikiExtractor repeats the title on the first line
        elif line == "</doc>":
            if document:
                yield document
            document = None
        elif line:
            document.extend(split_sentences(line))
    if document:
        yield document


def check_documents(files, input_format=TEXT):
    """Checks raw text before any work, as `read_documents` reads it: some document has text,
    (text) no file starts as WikiExtractor's output does, whose `<doc ...>` lines would be
    read as sentences, and (wikiextractor) every `<doc ...>` is closed by `</doc>` before the
    next one or the end of its file (the reader would take or drop whatever follows one that
    is not).

    Reads the files line by line; "text" stops at each file's first line with text.

    Raises:
        ValueError: naming the input, or the file and line of the `<doc>` at fault.
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    has_text = False
    for path in files:
        if input_format == WIKIEXTRACTOR:
            has_text = _check_docs(path) or has_text
        else:
            has_text = _check_text_start(path) or has_text
    if not has_text:
        expected = ("one sentence per line, blank lines between documents"
                    if input_format == TEXT else
                    "<doc ...>, a title line, paragraphs, </doc> (WikiExtractor's output)")
        raise ValueError(f"{', '.join(files[:3])}{' ...' if len(files) > 3 else ''}: no "
                         f"document has any text (input_format={input_format!r}) — expected "
                         f"{expected}")


def _check_text_start(path):
    """Whether a text-format file has a line with text; raises if the first one opens a
    WikiExtractor document."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            if _opens_doc(line):
                raise ValueError(f"{path}:{number}: a WikiExtractor <doc ...> line, but "
                                 f"input_format is {TEXT!r}, which would train on its markup "
                                 f"as sentences — pass input_format={WIKIEXTRACTOR!r} "
                                 f"(--input_format={WIKIEXTRACTOR})")
            return True
    return False


def _opens_doc(line):
    """Whether a stripped line (bytes) opens a WikiExtractor document, as
    `_read_wikiextractor` takes it."""
    return line.startswith(b"<doc ") or line == b"<doc>"


def _check_docs(path):
    """Whether a WikiExtractor file has a document with text; raises at an unclosed `<doc>`."""
    opened, expect_title, has_text = None, False, False
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if _opens_doc(line):
                if opened is not None:
                    raise ValueError(f"{path}:{opened}: <doc> not closed: the next <doc> is on "
                                     f"line {number} — expected </doc> before it")
                opened, expect_title = number, True
            elif opened is None:
                continue
            elif expect_title:  # as `_read_wikiextractor`: the line after <doc> is the title
                expect_title = False
            elif line == b"</doc>":
                opened = None
            elif line:
                has_text = True
    if opened is not None:
        raise ValueError(f"{path}:{opened}: <doc> not closed: no </doc> before the end of the "
                         "file")
    return has_text


_BLOCK_SIZE = 1 << 20


class _BadLine(str):
    pass


_BAD = _BadLine("\x00")  # a line that was not UTF-8 and is skipped: not blank, no text


class _Blocks:
    """Reads a file from the first line that starts at or after `start`, ~1 MiB at a time."""

    def __init__(self, path, start, skip_bad_lines, on_bytes):
        self.path, self.start = path, start
        self._skip, self._on_bytes = skip_bad_lines, on_bytes

    def lines(self, hi):
        """Yields (start offset, stripped text) per line; offsets are exact only from `hi` on.

        Lines of a block that ends before `hi` all get the block's start offset: the readers
        only compare offsets with `hi`, and this keeps the per-line work to a strip.
        """
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, generator may stop early
        except OSError as e:
            raise OSError(f"{self.path}: cannot read: {e.strerror}") from None
        with f:
            pos = self.start
            if pos > 0:  # begin at the first line that starts at or after `start`
                f.seek(pos - 1)
                pos += len(f.readline()) - 1
            self.start = pos
            while True:
                raw = f.read(_BLOCK_SIZE)
                if not raw:
                    return
                if not raw.endswith(b"\n"):
                    raw += f.readline()
                raw_lines = raw.split(b"\n")
                if not raw_lines[-1]:
                    raw_lines.pop()  # the text after the last newline
                try:
                    lines = [line.strip() for line in raw.decode("utf-8").split("\n")]
                    del lines[len(raw_lines):]
                except UnicodeDecodeError:
                    lines = self._decode_each(pos, raw_lines)
                if pos + len(raw) <= hi:
                    yield from zip(itertools.repeat(pos), lines)
                else:
                    starts = itertools.accumulate((len(r) + 1 for r in raw_lines), initial=pos)
                    yield from zip(starts, lines, strict=False)  # starts has one more
                if self._on_bytes:
                    self._on_bytes(len(raw))
                pos += len(raw)

    def _decode_each(self, pos, raw_lines):
        lines = []
        for raw in raw_lines:
            try:
                lines.append(raw.decode("utf-8").strip())
            except UnicodeDecodeError as e:
                lines.append(self._bad_line(pos, e))
            pos += len(raw) + 1
        return lines

    def _bad_line(self, pos, error):
        where = f"{self.path}:{_line_number(self.path, pos)}"
        message = (f"{where}: not valid UTF-8 ({error.reason} at byte {error.start} of the "
                   f"line)")
        if not self._skip:
            raise ValueError(message + "; pass skip_bad_lines (--skip_bad_lines) to skip such "
                             "lines")
        logging.warning("%s; line skipped", message)
        return _BAD


def _line_number(path, offset):
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


# Sentence splitting for paragraph-per-line text (WikiExtractor). A boundary is sentence-final
# punctuation, optional closing quotes/brackets, whitespace, then an upper-case letter, a digit
# or an opening quote/bracket; not after a known abbreviation or a single initial ("J. Smith").
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "corp", "no", "nos", "vol", "vols", "ed", "eds", "fig", "figs", "gen", "col", "lt",
    "sgt", "capt", "cmdr", "adm", "maj", "rev", "hon", "gov", "sen", "rep", "pres", "mt", "ft",
    "ave", "blvd", "dept", "univ", "approx", "est", "jan", "feb", "mar", "apr", "jun", "jul",
    "aug", "sep", "sept", "oct", "nov", "dec", "c", "ca", "cf", "al", "op", "pp", "p",
})
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")


def split_sentences(paragraph):
    """Cuts one paragraph into sentences with a rule-based splitter.

    Args:
        paragraph: str.

    Returns:
        list of str (stripped, non-empty).

    For instance "He met Dr. Smith in the U.S. Army. It rained." becomes
    ["He met Dr. Smith in the U.S. Army.", "It rained."].
    """
    sentences, begin = [], 0
    for match in _BOUNDARY.finditer(paragraph):
        text = match.group()
        if text[0] == "." and _abbreviation(paragraph, begin, match.start()):
            continue
        sentences.append(paragraph[begin:match.start() + len(text.rstrip())])
        begin = match.end()
    tail = paragraph[begin:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def _abbreviation(text, begin, dot):
    """Whether the word that ends at `dot` (a period) is an abbreviation or an initial."""
    space = max(text.rfind(" ", begin, dot), begin - 1)
    word = text[space + 1:dot].lstrip("\"'(\u201c\u2018[")
    if len(word) == 1 and word.isalpha():
        return True
    return word.lower() in _ABBREVIATIONS or bool(_INITIALISM.fullmatch(word))


def write_text_format(input_file, output_path, input_format=WIKIEXTRACTOR, skip_bad_lines=False):
    """Rewrites a corpus in Google's text format: one sentence per line, blank line between
    documents (the input of Google's create_pretraining_data.py).

    Returns:
        int, the number of documents written.
    """
    whole = partition(list_input_files(input_file), 1)[0]
    count = 0
    with io.atomic_write(output_path) as f:
        for document in read_documents(whole, input_format, skip_bad_lines=skip_bad_lines):
            f.write("\n".join(document) + "\n\n")
            count += 1
    return count
