"""What the serving tests share: a free port on 127.0.0.1, and a ``jaxport serve`` process started, waited for
until ``/v2/health/ready`` answers 200 (bounded in count and time), and stopped."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(args: Sequence[str], *, http: int, env: dict[str, str], log: IO[str], ready_s: float,
            cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    """``jaxport serve ARGS`` (its output in ``log``), ready within ``ready_s`` seconds or the test fails with the
    end of its log; SIGTERM (then SIGKILL) when the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", "from jaxport_cli.main import main; main()", "serve", *args],
                            cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + ready_s
    ready = False
    for _ in range(int(ready_s * 4)):  # bounded in count and time
        if proc.poll() is not None or time.monotonic() > deadline:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=10) as r:
                ready = r.status == 200
        except (OSError, urllib.error.HTTPError):
            pass
        if ready:
            break
        time.sleep(0.25)
    try:
        if not ready:
            log.seek(0)
            pytest.fail(f"jaxport serve did not become ready:\n{log.read()[-4000:]}")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
