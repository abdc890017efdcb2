"""Google's releases by name: served from a local HTTP server on 127.0.0.1, never the network."""

import http.server
import io
import os
import re
import socket
import threading
import zipfile

import numpy as np
import pytest

import kbert
from kbert.checkpoints import releases

BASE = "uncased_L-12_H-768_A-12"
SMALL = "uncased_L-2_H-128_A-2"


def release_zip(release_dir, folder):
    """The release directory zipped as Google does: in one top-level folder, or at the root."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name in sorted(os.listdir(release_dir)):
            zf.write(os.path.join(release_dir, name), f"{folder}/{name}" if folder else name)
    return buffer.getvalue()


class _Handler(http.server.BaseHTTPRequestHandler):
    files = {}  # URL path -> (body, declared Content-Length)

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path not in self.files:
            self.send_error(404)
            return
        body, length = self.files[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)  # fewer bytes than declared: the connection drops mid-file

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch, tmp_path):
    """A local server of release zips, KBERT_RELEASE_BASE_URL pointing at it, KBERT_HOME empty."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.files = {}
    monkeypatch.setenv(releases.BASE_URL_ENV, f"http://127.0.0.1:{httpd.server_port}/bert_models")
    monkeypatch.setenv(releases.HOME_ENV, str(tmp_path / "cache"))
    yield _Handler.files
    httpd.shutdown()
    httpd.server_close()


def serve(files, name, body, length=None):
    files[f"/bert_models/{releases.RELEASES[name].path}"] = (body, length or len(body))


def test_release_table_is_googles():
    assert len(releases.RELEASES) == 9 + 24
    assert releases.RELEASES[BASE].url(releases.GOOGLE_BASE_URL) == (
        "https://storage.googleapis.com/bert_models/2018_10_18/uncased_L-12_H-768_A-12.zip")
    assert releases.RELEASES["multi_cased_L-12_H-768_A-12"].path == (
        "2018_11_23/multi_cased_L-12_H-768_A-12.zip")
    assert releases.RELEASES["uncased_L-12_H-768_A-12_2020_02_20"].path == (
        "2020_02_20/uncased_L-12_H-768_A-12.zip")
    text = kbert.list_presets()
    assert re.search(r"\nwwm_cased_L-24_H-1024_A-16 +340M parameters +cased ", text)
    assert re.search(r"\nchinese_L-12_H-768_A-12 +110M parameters +uncased ", text)
    assert "uncased_L-4_H-256_A-4" in text and "BERT-Mini" in text


@pytest.mark.parametrize("name,folder", [(BASE, BASE), (SMALL, None)])
def test_downloads_once_and_loads(server, name, folder, tiny_google_dir, tmp_path):
    serve(server, name, release_zip(tiny_google_dir, folder))
    encoder = kbert.BertEncoder.from_preset(name)
    expected = kbert.BertEncoder.from_google_checkpoint(tiny_google_dir)
    np.testing.assert_array_equal(encoder.pooler.kernel.numpy(), expected.pooler.kernel.numpy())
    target = tmp_path / "cache" / name
    assert sorted(os.listdir(target)) == sorted(os.listdir(tiny_google_dir))
    assert os.listdir(tmp_path / "cache") == [name]  # no temporary left behind
    server.clear()  # a second load reads the cache only
    assert kbert.resolve_release(name) == str(target)
    kbert.BertClassifier.from_google_checkpoint(name, num_classes=2)


def test_interrupted_download_leaves_no_cache_entry(server, tiny_google_dir, tmp_path):
    body = release_zip(tiny_google_dir, BASE)
    serve(server, BASE, body[: len(body) // 2], length=len(body))
    with pytest.raises(OSError, match=rf"/2018_10_18/{BASE}.zip: download interrupted "
                                      rf"\({len(body) // 2} of {len(body)} bytes\)"):
        kbert.resolve_release(BASE)
    assert os.listdir(tmp_path / "cache") == []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped"])
def test_corrupt_zip_is_a_clear_error(server, damage, tiny_google_dir, tmp_path):
    body = release_zip(tiny_google_dir, BASE)
    if damage == "garbage":
        body = b"PK\x03\x04 this is not a zip archive"
    elif damage == "truncated":  # served in full, as if the file itself were cut
        body = body[: len(body) - 100]
    else:  # a byte of a checkpoint member changed: its CRC no longer matches
        body = body[:200] + bytes([body[200] ^ 0xFF]) + body[201:]
    serve(server, BASE, body)
    with pytest.raises(ValueError, match=r"zip.*: not a valid zip archive \(.*\); nothing "
                                         r"was written to .*cache/uncased_L-12_H-768_A-12"):
        kbert.resolve_release(BASE)
    assert os.listdir(tmp_path / "cache") == []


def test_zip_without_a_release(server, tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("README.txt", "nothing here")
    serve(server, BASE, buffer.getvalue())
    with pytest.raises(ValueError, match="holds no BERT release"):
        kbert.resolve_release(BASE)
    assert os.listdir(tmp_path / "cache") == []


def test_unreachable_host_names_url_and_cache_path(monkeypatch, tmp_path):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(releases.BASE_URL_ENV, f"http://127.0.0.1:{port}/bert_models")
    monkeypatch.setenv(releases.HOME_ENV, str(tmp_path / "cache"))
    url = f"http://127.0.0.1:{port}/bert_models/2018_10_18/{BASE}.zip"
    target = os.path.join(str(tmp_path / "cache"), BASE)
    with pytest.raises(OSError) as error:
        kbert.BertEncoder.from_preset(BASE)
    assert url in str(error.value) and f"so that {target}/ holds" in str(error.value)


def test_paths_pass_through(tiny_google_dir):
    assert kbert.resolve_release(tiny_google_dir) == tiny_google_dir
    assert kbert.resolve_release("no/such/dir") == "no/such/dir"
