"""Google's published BERT releases by name: download once into a cache, unzip atomically.

The table is google-research/bert's README (the "Pre-trained models" list and the 24 smaller
BERTs of 2020-03-11), with the URLs exactly as it gives them. A name resolves to
`$KBERT_HOME/<name>/` (default `~/.keras/kbert`), holding `bert_model.ckpt.*`,
`bert_config.json` and `vocab.txt`, which every loader of a release directory reads.
`KBERT_RELEASE_BASE_URL` replaces the `https://storage.googleapis.com/bert_models` part of
every URL (a mirror, or a local server in tests).
"""

import dataclasses
import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile

from absl import logging

GOOGLE_BASE_URL = "https://storage.googleapis.com/bert_models"
BASE_URL_ENV = "KBERT_RELEASE_BASE_URL"
HOME_ENV = "KBERT_HOME"
DEFAULT_HOME = os.path.join("~", ".keras", "kbert")
RELEASE_FILES = ("bert_config.json", "vocab.txt", "bert_model.ckpt.index")


@dataclasses.dataclass(frozen=True)
class Release:
    """One of Google's published checkpoints.

    Attributes:
        name: str. The zip's base name, e.g. "uncased_L-12_H-768_A-12".
        path: str. The URL path under the base URL, e.g. "2018_10_18/uncased_L-12_H-768_A-12.zip".
        description: str. Google's title for it.
        cased: bool. Keeps case and accents (pass `do_lower_case=False` to the tokenizer);
            as Google's tokenization.py `validate_case_matches_checkpoint` lists them.
        size: str. As Google's README gives it: parameters, else layers/hidden/heads.
    """

    name: str
    path: str
    description: str
    cased: bool
    size: str

    def url(self, base_url=None):
        base = base_url or os.environ.get(BASE_URL_ENV) or GOOGLE_BASE_URL
        return f"{base.rstrip('/')}/{self.path}"


def _small_berts():
    # "Well-Read Students Learn Better": L in 2..12 by 2, H in 128..768, A = H / 64.
    named = {(2, 128): "BERT-Tiny", (4, 256): "BERT-Mini", (4, 512): "BERT-Small",
             (8, 512): "BERT-Medium", (12, 768): "BERT-Base"}
    releases = []
    for layers in (2, 4, 6, 8, 10, 12):
        for hidden in (128, 256, 512, 768):
            base = f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}"
            # The grid's 12/768 is a re-trained BERT-Base under the original name; the
            # 2018 release keeps that name, this one carries its date.
            name = base + "_2020_02_20" if (layers, hidden) == (12, 768) else base
            title = named.get((layers, hidden), f"BERT L={layers} H={hidden}")
            releases.append(Release(name, f"2020_02_20/{base}.zip",
                                    f"Smaller BERT, {title} (uncased, 2020)", False,
                                    f"{layers}-layer, {hidden}-hidden"))
    return releases


RELEASES = {release.name: release for release in (
    Release("wwm_uncased_L-24_H-1024_A-16", "2019_05_30/wwm_uncased_L-24_H-1024_A-16.zip",
            "BERT-Large, Uncased (Whole Word Masking)", False, "340M parameters"),
    Release("wwm_cased_L-24_H-1024_A-16", "2019_05_30/wwm_cased_L-24_H-1024_A-16.zip",
            "BERT-Large, Cased (Whole Word Masking)", True, "340M parameters"),
    Release("uncased_L-12_H-768_A-12", "2018_10_18/uncased_L-12_H-768_A-12.zip",
            "BERT-Base, Uncased", False, "110M parameters"),
    Release("uncased_L-24_H-1024_A-16", "2018_10_18/uncased_L-24_H-1024_A-16.zip",
            "BERT-Large, Uncased", False, "340M parameters"),
    Release("cased_L-12_H-768_A-12", "2018_10_18/cased_L-12_H-768_A-12.zip",
            "BERT-Base, Cased", True, "110M parameters"),
    Release("cased_L-24_H-1024_A-16", "2018_10_18/cased_L-24_H-1024_A-16.zip",
            "BERT-Large, Cased", True, "340M parameters"),
    Release("multi_cased_L-12_H-768_A-12", "2018_11_23/multi_cased_L-12_H-768_A-12.zip",
            "BERT-Base, Multilingual Cased (104 languages)", True, "110M parameters"),
    Release("multilingual_L-12_H-768_A-12", "2018_11_03/multilingual_L-12_H-768_A-12.zip",
            "BERT-Base, Multilingual Uncased (102 languages, not recommended)", False,
            "110M parameters"),
    Release("chinese_L-12_H-768_A-12", "2018_11_03/chinese_L-12_H-768_A-12.zip",
            "BERT-Base, Chinese (Simplified and Traditional)", False, "110M parameters"),
    *_small_berts(),
)}


def cache_dir():
    """The release cache: `$KBERT_HOME`, default `~/.keras/kbert`."""
    return os.path.expanduser(os.environ.get(HOME_ENV) or DEFAULT_HOME)


def list_presets():
    """Prints the table of Google's releases that load by name, and returns it as text.

    Example:
    ```python
    kbert.list_presets()
    ```
    """
    rows = [("name", "size", "casing", "description")]
    rows += [(r.name, r.size, "cased" if r.cased else "uncased", r.description)
             for r in RELEASES.values()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    text = "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}"
                     for a, b, c, d in rows)
    print(text)
    return text


def resolve_release(name_or_path, base_url=None):
    """A local path unchanged; the name of a Google release as its cached directory.

    A release is downloaded on first use into `cache_dir()/<name>` (zip to a temporary file,
    unzipped into a temporary directory, renamed when complete), so an interrupted or failed
    download leaves no entry behind.

    Args:
        name_or_path: str. A path (returned as is if it exists, or is not a release name) or
            a name of `RELEASES` (see `list_presets()`).
        base_url: str. Replaces Google's base URL. Defaults to `$KBERT_RELEASE_BASE_URL`,
            else Google's.

    Returns:
        str. The path, or the release directory.
    """
    name_or_path = os.fspath(name_or_path)
    release = RELEASES.get(name_or_path)
    if release is None or os.path.exists(name_or_path):
        return name_or_path
    target = os.path.join(cache_dir(), release.name)
    if not os.path.isdir(target):
        _download(release, release.url(base_url), target)
    return target


def _download(release, url, target):
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{release.name}.", dir=parent) as tmp:
        archive = os.path.join(tmp, "release.zip")
        logging.info("Downloading %s to %s", url, target)
        try:
            with urllib.request.urlopen(url, timeout=60) as response, \
                    open(archive, "wb") as f:
                expected = response.headers.get("Content-Length")
                shutil.copyfileobj(response, f, length=1 << 20)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise OSError(
                f"cannot download Google's {release.name} from {url}: {e}. Download and unzip "
                f"it by hand so that {target}/ holds bert_config.json, vocab.txt and "
                f"bert_model.ckpt.*, or set ${BASE_URL_ENV} to a mirror") from None
        if expected is not None and os.path.getsize(archive) != int(expected):
            raise OSError(f"{url}: download interrupted ({os.path.getsize(archive)} of "
                          f"{expected} bytes); nothing was written to {target}")
        unpacked = os.path.join(tmp, "unpacked")
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(unpacked)
        except (zipfile.BadZipFile, EOFError) as e:
            raise ValueError(f"{url}: not a valid zip archive ({e}); nothing was written to "
                             f"{target}") from None
        root = _release_root(unpacked, url)
        try:
            os.rename(root, target)
        except OSError:
            if not os.path.isdir(target):  # another process finished first: keep theirs
                raise


def _release_root(unpacked, url):
    # Most zips hold one top-level folder (uncased_L-12_H-768_A-12/...); the 2020 small
    # BERTs hold the files at the root.
    candidates = [unpacked] + [os.path.join(unpacked, d) for d in sorted(os.listdir(unpacked))
                               if os.path.isdir(os.path.join(unpacked, d))]
    for candidate in candidates:
        if all(os.path.exists(os.path.join(candidate, f)) for f in RELEASE_FILES):
            return candidate
    raise ValueError(f"{url}: the archive holds no BERT release (expected "
                     f"{', '.join(RELEASE_FILES)} at its root or in one folder)")
