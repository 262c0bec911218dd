"""The bounds of a server's settings in the library, as on the command line (``jaxport.serve.limits``; issue 54):
each number finite and in its range, and no empty socket path or host, each refused with one ``UsageError`` naming
the field, the value and what to give. Engine-free: no kserve, no artifact."""

from __future__ import annotations

import re

import pytest

from jaxport.errors import UsageError
from jaxport.serve.transport.models import Listen, Serving


@pytest.mark.parametrize(("field", "value", "message"), [
    ("window_ms", float("inf"), "window_ms=inf: give a number from 0 to 60000."),
    ("window_ms", float("nan"), "window_ms=nan: give a number from 0 to 60000."),
    ("window_ms", -1, "window_ms=-1: give a number from 0 to 60000."),
    ("window_ms", "5", "window_ms='5': give a number from 0 to 60000."),
    ("max_rows", 0, "max_rows=0: give a whole number from 1 to 2**62."),
    ("max_rows", 2.0, "max_rows=2.0: give a whole number from 1 to 2**62."),
    ("max_rows", 1 << 63, f"max_rows={1 << 63}: give a whole number from 1 to 2**62."),
    ("warmup_budget_s", 1e300, "warmup_budget_s=1e+300: give a number from 0 to 86400."),
    ("warmup_budget_s", float("-inf"), "warmup_budget_s=-inf: give a number from 0 to 86400."),
    ("max_executables", True, "max_executables=True: give a whole number from 1 to 4096."),
    ("max_executables", 10**9, "max_executables=1000000000: give a whole number from 1 to 4096."),
])
def test_serving_refuses_numbers_out_of_their_range(field, value, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        Serving(**{field: value}).check()


def test_serving_takes_the_bounds_themselves():
    Serving(window_ms=60_000, max_rows=1 << 62, warmup_budget_s=86_400, max_executables=4096).check()
    Serving(window_ms=0, max_rows=None, warmup_budget_s=0, max_executables=1).check()


@pytest.mark.parametrize(("fields", "message"), [
    ({"uds": ""}, "uds='': an empty path names no socket file; give the socket's path, or uds=None to listen on TCP "
                  "ports."),
    ({"host": ""}, "host='': an empty host would listen on every interface; give an address of this machine: "
                   "'127.0.0.1', or '0.0.0.0' for every interface."),
])
def test_listen_refuses_an_empty_socket_path_or_host(fields, message):
    """``uds=''`` served on TCP ports, ``host=''`` would listen on every interface."""
    with pytest.raises(UsageError, match=re.escape(message)):
        Listen(**fields)
