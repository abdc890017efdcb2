"""No downloads in tests: a Python lookup of a host other than this machine's fails the test.

`install(on_lookup)` replaces `socket.getaddrinfo`: this machine's names resolve as before; any
other name is passed to `on_lookup` and then fails as unknown, so that nothing is fetched on a
machine with a network either. A library that catches the error and falls back (as Beam's
DirectRunner did after failing to fetch its Prism binary from GitHub) would otherwise pass
offline unseen. The test process records the names and fails the test (tests/conftest.py); a
child started with `tests.fresh_process.environment()` (fresh_process_site/sitecustomize.py),
a notebook's Jupyter kernel (tests/notebooks/conftest.py) and the isolated serving process
(tests/export/test_saved_model.py) exit at once with `EXIT_STATUS` (`exit_at`). Lookups made
in C++ (gRPC, TensorFlow's file systems) are not covered.
"""

import os
import socket
import sys

# The release-download tests serve on 127.0.0.1; the two-worker test listens there too.
LOCAL_HOSTS = frozenset({None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0",
                         socket.gethostname()})
EXIT_STATUS = 97


def install(on_lookup):
    """Replaces `socket.getaddrinfo` as above; returns the function it replaced."""
    lookup = socket.getaddrinfo

    def local_only(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in LOCAL_HOSTS:
            on_lookup(name)
            raise socket.gaierror(socket.EAI_NONAME, f"a test may not look up {name!r}")
        return lookup(host, *args, **kwargs)

    socket.getaddrinfo = local_only
    return lookup


def exit_at(host):
    """`install`'s `on_lookup` for a child process: says which name, exits with EXIT_STATUS."""
    sys.stderr.write(f"tests/network_guard: this process looked up {host!r}; tests may "
                     "download nothing\n")
    sys.stderr.flush()
    os._exit(EXIT_STATUS)
