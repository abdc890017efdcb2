import os

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kbert.data import corpus


def read_all(files, input_format, parts=1, **kwargs):
    out = []
    for byte_range in corpus.partition(files, parts):
        out.extend(corpus.read_documents(byte_range, input_format, **kwargs))
    return out


def write(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def test_text_format_documents(tmp_path):
    a = write(tmp_path / "a.txt", "s1\n  s2  \n\n\n   \ns3\n\ns4\n")
    b = write(tmp_path / "b.txt", "s5\n\ns6\ns7")
    assert read_all([a, b], "text") == [["s1", "s2"], ["s3"], ["s4"], ["s5"], ["s6", "s7"]]


def test_wikiextractor_documents(tmp_path):
    text = ('<doc id="1" url="?curid=1" title="Empty">\nEmpty\n\n\n</doc>\n'
            '<doc id="2" url="?curid=2" title="Jarred Shaw">\nJarred Shaw\n\n'
            "Jarred Shaw (born 1990) is a player. He plays for Trouville.\n"
            "Professional career.\nOn October 31, 2015, Shaw was selected.\n\n</doc>\n")
    path = write(tmp_path / "wiki_00", text)
    assert read_all([path], "wikiextractor") == [[
        "Jarred Shaw (born 1990) is a player.", "He plays for Trouville.",
        "Professional career.", "On October 31, 2015, Shaw was selected."]]


def test_real_wikiextractor_sample(wiki_sample):
    documents = read_all([wiki_sample], "wikiextractor")
    assert len(documents) == 106  # 329 documents, 223 of them with no body
    assert documents[0][0].startswith("Franz Bumann (24 October 1924")
    assert not any(s.startswith("<doc") or s == "</doc>" for d in documents for s in d)


@pytest.mark.parametrize("parts, block_size", [(2, 1 << 20), (3, 4096), (7, 100), (50, 1 << 20)])
def test_byte_ranges_hold_every_real_document_once(wiki_sample, wiki_sample_text, parts,
                                                   block_size, monkeypatch):
    monkeypatch.setattr(corpus, "_BLOCK_SIZE", block_size)  # files are read in blocks
    for path, input_format in ((wiki_sample, "wikiextractor"), (wiki_sample_text, "text")):
        whole = read_all([path], input_format)
        assert read_all([path, path], input_format, parts) == whole + whole


@settings(max_examples=40, deadline=None)
@given(documents=st.lists(st.lists(st.text("ab ", min_size=1, max_size=9).map(str.strip)
                                   .filter(bool), min_size=1, max_size=4), max_size=8),
       blank=st.sampled_from(["\n", "\n\n", "\n \n"]), parts=st.integers(1, 9),
       block_size=st.sampled_from([1, 5, 64, 1 << 20]))
def test_byte_ranges_partition_text(tmp_path_factory, documents, blank, parts, block_size):
    path = tmp_path_factory.mktemp("p") / "c.txt"
    write(path, blank.join("\n".join(d) + "\n" for d in documents))
    saved, corpus._BLOCK_SIZE = corpus._BLOCK_SIZE, block_size
    try:
        assert read_all([str(path)], "text", parts) == documents
    finally:
        corpus._BLOCK_SIZE = saved


@pytest.mark.parametrize("block_size", [4, 1 << 20])
def test_bad_utf8_names_file_and_line(tmp_path, monkeypatch, block_size):
    monkeypatch.setattr(corpus, "_BLOCK_SIZE", block_size)
    path = write(tmp_path / "bad.txt", b"good one\n\nfine\nbad \xff\xfe byte\nlast\n")
    with pytest.raises(ValueError, match=r"bad\.txt:4: not valid UTF-8"):
        read_all([path], "text")
    assert read_all([path], "text", skip_bad_lines=True) == [["good one"], ["fine", "last"]]


def test_unreadable_file(tmp_path):
    path = write(tmp_path / "locked.txt", "x\n")
    os.chmod(path, 0)
    if os.access(path, os.R_OK):  # root ignores permissions
        pytest.skip("running as root")
    with pytest.raises(OSError, match="locked.txt: cannot read"):
        read_all([path], "text")


def test_list_input_files(tmp_path):
    for name in ("b.txt", "a.txt", "c.dat"):
        write(tmp_path / name, "x\n")
    files = corpus.list_input_files(f"{tmp_path}/c.dat,{tmp_path}/*.txt")
    assert [os.path.basename(f) for f in files] == ["c.dat", "a.txt", "b.txt"]
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        corpus.list_input_files(f"{tmp_path}/nothing-here*")
    with pytest.raises(FileNotFoundError, match="no input files"):
        corpus.list_input_files(" , ")


@pytest.mark.parametrize("paragraph, sentences", [
    ("He met Dr. Smith in the U.S. Army. It rained.",
     ["He met Dr. Smith in the U.S. Army.", "It rained."]),
    ('"Why?" she asked. J. R. R. Tolkien wrote it in 1937. The end',
     ['"Why?" she asked.', "J. R. R. Tolkien wrote it in 1937.", "The end"]),
    ("Pi is 3.14 and e is 2.72. (Both are irrational.) Yes!",
     ["Pi is 3.14 and e is 2.72.", "(Both are irrational.)", "Yes!"]),
    ("no capital after. so one sentence", ["no capital after. so one sentence"]),
    ("  Professional career.  ", ["Professional career."]),
])
def test_split_sentences(paragraph, sentences):
    assert corpus.split_sentences(paragraph) == sentences
