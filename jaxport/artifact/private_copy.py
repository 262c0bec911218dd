"""Bound weights copied into this process's own memory, their sha256 computed over that copy.

The guarantee (specs/FORMAT.md, "Weights that run are the weights checked"), for ``load``, ``extract`` and
``rebind``: with the digest check on (the default; ``verify=False`` skips it), the bytes a program runs on (or that
are written out) are the bytes whose sha256 was checked. A memory map
of the artifact cannot give it: a shared mapping shows every later write to the file, and so does a private one
(``MAP_PRIVATE`` copies a page only when this process writes it), so a same-size rewrite of the file in place after
its check (or between the check's reading and XLA's) would run bytes nobody checked. So the weights member is read
with ``os.preadv`` from the artifact's descriptor straight into an anonymous buffer, chunk by chunk, and each chunk is
hashed from that buffer; the buffer is what numpy's views, ``jax.device_put`` and XLA then use, and nothing writes
it again. A file rewritten meanwhile gives either the bytes before or after (refused by the digest) or a mix of
them (refused too); a file cut short is a short read, an ``IntegrityError``, never a SIGBUS.

The copy is made before ``load`` returns (a read at the disk's or page cache's speed); only the hashing of the copy
runs in a thread with ``defer`` (``jaxport call``), while XLA compiles, and the first run waits for it. The cost is
the copy's memory (the size of the weights, anonymous instead of page cache) and its time (BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any

from ..errors import IntegrityError

#: Bytes read and hashed at a time.
CHUNK = 16 << 20
#: Alignment of the copy: what XLA's CPU client needs to use a host buffer without copying it again.
ALIGN = 64


class DigestCheck:
    """The sha256 of a private copy, computed in a thread (``hashlib`` releases the GIL); :meth:`wait` joins it and
    raises what it found (``IntegrityError``), each time it is called."""

    def __init__(self, run: Any):
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True, name="jaxport-weights-sha256")
        self._thread.start()

    def _run(self, run: Any) -> None:
        try:
            run()
        except BaseException as e:  # noqa: BLE001 - raised again by wait(), in the caller's thread
            self._error = e

    def join(self) -> None:
        self._thread.join()

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def private_member(art: Any, name: str, defer: bool = False) -> tuple[memoryview, DigestCheck | None]:
    """The member ``name`` of the open artifact ``art``, copied into anonymous memory (a read-only view of it), and
    its digest checked over the copy: before returning, or with ``defer`` in the returned :class:`DigestCheck`."""
    import numpy as np

    member = art.members[name]
    expected = art.model.members[name].sha256
    size = member.size
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    buffer = memoryview(raw[start:start + size])
    fd = art.fileno()
    got = 0
    while got < size:
        n = os.preadv(fd, [buffer[got:got + min(CHUNK, size - got)]], member.offset + got)
        if n <= 0:
            raise IntegrityError(f"{art.path}: member {name!r} is cut short: {got} of its {size} bytes could be read "
                                 f"(the file was truncated while it was read). Re-download or re-export the "
                                 f"artifact.")
        got += n

    def check() -> None:
        digest = hashlib.sha256()
        for offset in range(0, size, CHUNK):
            digest.update(buffer[offset:offset + CHUNK])
        actual = digest.hexdigest()
        if actual != expected:
            raise IntegrityError(f"{art.path}: member {name!r} is damaged: its sha256 is {actual[:16]}..., the "
                                 f"manifest says {expected[:16]}.... Re-download or re-export the artifact.")

    readonly = buffer.toreadonly()
    if defer:
        return readonly, DigestCheck(check)
    check()
    return readonly, None
