"""Limits shared by the tests that run a tool or a script in a subprocess."""

# A guard against a hung subprocess, not a speed check (speed lives in bench/): generous, so
# that a tiny run on a loaded 2-core machine (a benchmark beside the suite) does not fail.
SUBPROCESS_TIMEOUT = 900
