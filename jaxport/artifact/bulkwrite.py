"""Writing a large member's data (bound weights) into an artifact file: plain writes, or direct I/O.

``write_data`` writes the buffers a member's data comes in, in order, at the file's position. Through the file
object (``fp.write``) each buffer goes to the kernel's page cache, which on some machines costs more than the disk
itself: every page of a fresh 340 MB file is memory the kernel must hand out (0.07 - 0.7 s measured on a VM, against
0.1 s for the ``fsync`` that follows). With ``direct``, a member of at least ``DIRECT_MIN`` bytes in a regular file
goes to the disk with ``O_DIRECT`` instead, for the whole blocks it covers: copied into two page-aligned buffers of
``BOUNCE`` bytes (direct I/O needs aligned memory, offsets and lengths), one written by a helper thread while the
other fills, the partial blocks at either end through the file object. The bytes in the file are the same; the
writer's ``fsync`` still makes them durable; a file system that refuses direct I/O (``fcntl`` or the first write
fails with ``EINVAL``) gets plain writes. The data is then not in the page cache: a process that reads the artifact
next reads it from the disk (measured: a first ``jaxport call`` right after the export took as long as after a
plain write).
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from collections.abc import Iterable

TYPE_CHECKING = False  # typing's constant, without importing typing: the artifact reader imports this module
if TYPE_CHECKING:
    from typing import Any

#: The smallest member written with direct I/O, and each of the two aligned buffers it is copied through.
DIRECT_MIN = 32 << 20
BOUNCE = 2 << 20
#: Offsets, lengths and addresses of direct writes are multiples of this (every common logical block size divides
#: it).
BLOCK = 4096


def write_data(fp: Any, chunks: Iterable[Any], size: int, direct: bool = False,
               crc: bool = False) -> tuple[int, int]:
    """Write the buffers ``chunks`` (``size`` bytes in all) at the current position of the binary file ``fp``, and
    leave ``fp`` positioned after them; returns the number of bytes the buffers held and, with ``crc``, their CRC-32
    (computed as they are written, while each piece is in the CPU's cache; else 0). ``direct``: with direct I/O
    where it applies (see the module docstring)."""
    fd = _regular_fd(fp) if direct and size >= DIRECT_MIN and hasattr(os, "O_DIRECT") else None
    if fd is not None:
        return _Direct(fp, fd, size, crc).write(chunks)
    written = value = 0
    for chunk in chunks:
        fp.write(chunk)
        if crc:
            value = zlib.crc32(chunk, value)
        written += memoryview(chunk).nbytes
    return written, value


def _regular_fd(fp: Any) -> int | None:
    """``fp``'s descriptor when it is a regular file, else None (memory, a pipe, a file object without one)."""
    try:
        fd = fp.fileno()
        return fd if isinstance(fd, int) and stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None


class _Direct:
    """One member's data written at ``fp``'s position: the bytes before the first whole block and after the last one
    through ``fp``, the whole blocks in between with ``O_DIRECT`` through two page-aligned buffers (with plain
    ``pwrite`` where direct I/O is refused), each written by a helper thread while the other fills: copying a
    buffer and its CRC-32 then take the time the disk takes anyway."""

    def __init__(self, fp: Any, fd: int, size: int, crc: bool):
        self.fp, self.fd, self.with_crc = fp, fd, crc
        self.start = self.pos = fp.tell()  # where the data begins; of the next byte given
        self.lo = -(-self.start // BLOCK) * BLOCK  # the blocks [lo, hi) go through the buffers
        self.hi = max(self.lo, (self.start + size) // BLOCK * BLOCK)
        self.at, self.fill = self.lo, 0  # where the current buffer's content goes, and how much it holds
        self.flags: int | None = None  # the descriptor's flags, while O_DIRECT is added to them
        self.tried = self.wrote_direct = False
        self.crc = 0
        self.writes: list[Any] = [None, None]  # the write in flight from each buffer (a Future)

    def write(self, chunks: Iterable[Any]) -> tuple[int, int]:
        import mmap
        from concurrent.futures import ThreadPoolExecutor

        self.views = [memoryview(mmap.mmap(-1, BOUNCE)) for _ in range(2)]  # anonymous memory: page-aligned
        self.current = 0
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="jaxport-direct-write")
        try:
            for chunk in chunks:
                data = memoryview(chunk).cast("B")
                while data:
                    if self.lo <= self.pos < self.hi:
                        k = min(len(data), BOUNCE - self.fill, self.hi - self.pos)
                        self.views[self.current][self.fill:self.fill + k] = data[:k]
                        self.fill += k
                        if self.fill == BOUNCE or self.pos + k == self.hi:
                            self._drain()
                    else:  # a partial block at either end
                        k = len(data) if self.pos >= self.hi else min(len(data), self.lo - self.pos)
                        if self.pos >= self.hi:
                            self._finish()
                        self.fp.write(data[:k])
                        if self.with_crc:
                            self.crc = zlib.crc32(data[:k], self.crc)
                    self.pos += k
                    data = data[k:]
            self._settle()
            self._drain()  # what data that ended early left in a buffer
        finally:
            self.pool.shutdown(wait=True)  # no write may follow the caller's next step (closing the file)
            self._plain()
            del self.views
        self.fp.seek(self.pos)  # the direct writes left the file object's position behind
        return self.pos - self.start, self.crc

    def _settle(self) -> None:
        """Wait for the writes in flight (raising their errors)."""
        for i, pending in enumerate(self.writes):
            if pending is not None:
                self.writes[i] = None
                pending.result()

    def _finish(self) -> None:
        """The direct region is written: the file object continues after it."""
        if self.tried:
            self._settle()
            self._plain()
            self.fp.seek(self.hi)
            self.tried = False

    def _drain(self) -> None:
        """Write the current buffer: the first time here (trying direct I/O), then by the helper thread while the
        other buffer fills."""
        if not self.fill:
            return
        view, at = self.views[self.current][:self.fill], self.at
        if self.with_crc:
            self.crc = zlib.crc32(view, self.crc)
        self.at, self.fill = at + len(view), 0
        if not self.tried:
            self.tried = True
            self.fp.flush()  # nothing of the file object's may reach the descriptor once O_DIRECT is set
            self._set_direct()
            self._write(view, at)
            return
        if len(view) % BLOCK:  # data that ended early: not whole blocks, after everything else
            self._plain()
            self._write(view, at)
            return
        self.writes[self.current] = self.pool.submit(self._write, view, at)
        self.current = 1 - self.current
        pending, self.writes[self.current] = self.writes[self.current], None
        if pending is not None:  # the buffer to fill next is written out first
            pending.result()

    def _write(self, view: memoryview, at: int) -> None:
        while view:
            try:
                k = os.pwrite(self.fd, view, at)
            except OSError as e:
                if e.errno != errno.EINVAL or self.flags is None or self.wrote_direct:
                    raise
                self._plain()  # refused: this file takes no direct I/O at these alignments
                continue
            if self.flags is not None:
                self.wrote_direct = True
                if k % BLOCK:  # a short direct write leaves an unaligned rest: the rest goes plain
                    self._plain()
            view, at = view[k:], at + k

    def _set_direct(self) -> None:
        import fcntl

        try:
            flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, flags | os.O_DIRECT)
        except OSError:  # this file system does no direct I/O
            return
        self.flags = flags

    def _plain(self) -> None:
        """Take O_DIRECT off the descriptor again."""
        if self.flags is not None:
            import fcntl

            flags, self.flags = self.flags, None
            fcntl.fcntl(self.fd, fcntl.F_SETFL, flags)
