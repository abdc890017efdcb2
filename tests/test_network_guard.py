"""tests/network_guard.py: a test, or a child it starts, that looks up another host fails."""

import socket
import subprocess
import sys

import pytest

from tests import fresh_process
from tests import network_guard


def test_a_lookup_of_another_host_fails_and_is_reported():
    seen = []
    lookup = network_guard.install(seen.append)
    try:
        with pytest.raises(socket.gaierror, match="may not look up 'example.com'"):
            socket.getaddrinfo("example.com", 443)
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo(b"pypi.org", 443)
        assert socket.getaddrinfo("127.0.0.1", 80)  # this machine's names resolve
    finally:
        socket.getaddrinfo = lookup
    assert seen == ["example.com", "pypi.org"]


def test_a_child_process_exits_at_its_first_lookup(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import urllib.request; urllib.request.urlopen("
         "'https://example.com/model.zip'); print('fetched')"],
        env=fresh_process.environment(), capture_output=True, text=True, timeout=60,
        cwd=tmp_path)
    assert result.returncode == network_guard.EXIT_STATUS
    assert "looked up 'example.com'" in result.stderr and "fetched" not in result.stdout
