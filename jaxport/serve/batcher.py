"""Requests of one :class:`batching.Batched` run on one worker thread, merged where they can be: the engine-free
dispatcher of ``jaxport serve`` (``transport.kserve_server`` is its only transport; nothing here imports a server).

- **Dispatch when the worker is free.** A request is checked once (``Batched.admit``) and queued; whenever the
  worker is free it takes the oldest request and every queued one that can share its call (the same shapes past
  axis 0, ``Admitted.key``), oldest first, up to ``max_rows`` rows and what a compiled bucket holds
  (``Batched.merge_rows``: a merged call never waits for a compile; its own size compiles meanwhile), and runs
  them as one program call. What queues behind a running call is merged into the next, however long the call
  takes.
- **The window bounds waiting; it is never a floor.** When the worker is free it waits for more requests only while
  others are arriving (a transport counts them with :meth:`Batcher.arrival`: a request being read or decoded), or
  while fewer are queued than its last call served (the clients it just answered are sending their next ones), and
  only until the oldest queued request has waited ``window`` seconds. A lone client's request (its last call served
  one) with nothing else arriving runs at once.
- **Fast calls skip the thread.** A request that arrives to an idle worker with nothing queued or arriving, on a
  compiled bucket whose calls took less than ``inline_seconds`` (:data:`INLINE_SECONDS`) on average so far (its first
  call, which pays one-time costs, not counted), runs on the caller's thread (:meth:`Batcher.inline`): a hop to the
  worker and back costs more than the call. Slower calls, and any that would compile, go to the worker, so an event
  loop is never held longer than that.
- Merging needs a batch variable whose rows may be split and merged (``Batched.splits``: each output row depends
  on its own input row only, not on its position) and ``merge``; otherwise every request is its own call, still
  on the worker (``no_merge_reason`` says why). A failure of a merged call goes to every request in it.
- **No request is left waiting.** The window is a finite number of milliseconds, 0 to ``limits.MAX_WINDOW_MS``
  (anything else is a ``UsageError`` here, before the worker starts). Should the dispatch itself fail (not a call,
  whose error goes to its requests), every request the worker holds or has queued is answered with that failure,
  ``on_failure`` is told, and the worker carries on with the requests that come next. :meth:`Batcher.unanswered`
  counts the requests held without an answer: a server that stops with some says so.

Statistics for ``/metrics``: requests per program call (``per_call``), seconds queued and seconds running.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import limits
from .batching import Admitted, Batched

#: Calls faster than this (seconds, the bucket's mean so far) run on the caller's thread when nothing waits.
INLINE_SECONDS = 0.001

#: The arrival of the request the current context serves (set by :meth:`Batcher.arrival`).
_ARRIVAL: contextvars.ContextVar[object | None] = contextvars.ContextVar("jaxport_arrival", default=None)


@dataclass
class _Queued:
    admitted: Admitted
    future: concurrent.futures.Future[dict[str, Any]]
    since: float


@dataclass
class Waits:
    """Seconds requests spent queued and program calls spent running, summed, with their counts."""

    queued_seconds: float = 0.0
    requests: int = 0
    run_seconds: float = 0.0
    calls: int = 0
    inline: int = 0
    #: How many requests each program call served: ``{requests: calls}``.
    per_call: dict[int, int] = field(default_factory=dict)


class Batcher:
    """One worker thread running a :class:`Batched`'s admitted requests (see the module docstring)."""

    def __init__(self, batched: Batched, *, merge: bool = True, max_rows: int | None = None,
                 window_ms: float = 0.0, inline_seconds: float = INLINE_SECONDS, name: str = "jaxport",
                 on_failure: Callable[[str], None] | None = None):
        limits.check_number("window_ms", window_ms, 0, limits.MAX_WINDOW_MS)
        if max_rows is not None:
            limits.check_number("max_rows", max_rows, 1, limits.MAX_BATCH_ROWS, whole=True)
        self.batched = batched
        self.name = name
        #: Told, in one line, of a failure of the dispatch (see the module docstring).
        self.on_failure = on_failure
        most = batched.max_rows
        self.max_rows = min(max_rows or most, most) if most is not None else None
        self.merge = merge and batched.splits and self.max_rows is not None
        #: Why requests are not merged though ``merge`` asked for it ("" when they are, or it did not).
        self.no_merge_reason = "" if self.merge or not merge else batched.split_reason
        self.window = window_ms / 1000
        self.inline_seconds = inline_seconds
        self.waits = Waits()
        self._queue: deque[_Queued] = deque()
        self._running: list[_Queued] = []  # taken by the worker for its call, not answered yet
        self._arriving: set[object] = set()
        self._busy = False
        self._closed = False
        #: How many requests the last call took: the clients it answered are likely to send the next ones.
        self._last = 0
        self._cond = threading.Condition()
        self._seconds: dict[tuple[tuple[str, int], ...], tuple[float, int]] = {}
        self._first: set[tuple[tuple[str, int], ...]] = set()
        self._thread = threading.Thread(target=self._work, name=f"{name}-worker", daemon=True)
        self._thread.start()

    # -- arrivals --

    @contextlib.contextmanager
    def arrival(self) -> Iterator[None]:
        """Count a request as arriving while the transport reads and decodes it (until :meth:`submit` or the end
        of the block): the worker waits for arriving requests, up to the window, before it runs a call."""
        token = object()
        with self._cond:
            self._arriving.add(token)
        reset = _ARRIVAL.set(token)
        try:
            yield
        finally:
            _ARRIVAL.reset(reset)
            with self._cond:
                if token in self._arriving:
                    self._arriving.discard(token)
                    self._cond.notify_all()

    def _arrived(self) -> None:
        token = _ARRIVAL.get()
        if token is not None:
            self._arriving.discard(token)

    # -- requests --

    def inline(self, admitted: Admitted) -> dict[str, Any] | None:
        """The outputs of a request run on the caller's thread, when the worker is idle, nothing is queued or
        arriving and the request's calls are fast (see the module docstring); else None (then :meth:`submit`)."""
        if admitted.chunks:
            return None
        seconds, count = self._seconds.get(tuple(admitted.dims.items()), (0.0, 0))
        if not count or seconds / count >= self.inline_seconds or not self.batched.compiled_for(admitted):
            return None  # slow, or its bucket was evicted since: compiling it is the worker's
        with self._cond:
            self._arrived()
            if self._busy or self._queue or self._arriving or self._closed:
                return None
            self._busy = True
        try:
            return self._run([admitted], inline=True)[0]
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def submit(self, admitted: Admitted) -> concurrent.futures.Future[dict[str, Any]]:
        """Queue a request for the worker; the future gives its outputs by name (or the call's error)."""
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._arrived()
            self._queue.append(_Queued(admitted, future, time.perf_counter()))
            self._cond.notify_all()
        return future

    def __call__(self, admitted: Admitted) -> dict[str, Any]:
        """Run a request (inline or on the worker) and wait for its outputs."""
        out = self.inline(admitted)
        return out if out is not None else self.submit(admitted).result()

    def unanswered(self) -> int:
        """How many requests the worker holds, queued or in its call, without an answer: none, unless a call runs,
        requests wait behind it, or the transport gave up on some (a request cut off when a server stopped)."""
        with self._cond:
            return sum(1 for q in (*self._queue, *self._running) if q.future.cancelled() or not q.future.done())

    def close(self, timeout: float | None = 10.0) -> None:
        """Let the queued requests finish, then stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    # -- the worker --

    def _take(self) -> list[_Queued]:
        """The oldest queued request and the queued ones that may share its call (see the module docstring), taken
        off the queue at once at the end: should choosing them fail, every request is still queued."""
        first, rest = self._queue[0], list(self._queue)[1:]
        if not self.merge or first.admitted.chunks or first.admitted.rows is None:
            self._queue.popleft()
            return [first]
        assert self.max_rows is not None

        def joins(a: Admitted) -> bool:
            return a.key == first.admitted.key and not a.chunks and a.rows is not None

        # at most what a compiled bucket holds: the bucket of what is queued compiles meanwhile (``Batched``)
        wanted = min(self.max_rows, first.admitted.rows + sum(q.admitted.rows or 0 for q in rest if joins(q.admitted)))
        limit = min(self.max_rows, self.batched.merge_rows(first.admitted, wanted))
        rows, taken, kept = first.admitted.rows, [first], deque[_Queued]()
        for q in rest:
            a = q.admitted
            if joins(a) and a.rows is not None and rows + a.rows <= limit:
                taken.append(q)
                rows += a.rows
            else:
                kept.append(q)
        self._queue = kept
        return taken

    def _queued_rows(self) -> int:
        return sum(q.admitted.rows or 0 for q in self._queue)

    def _work(self) -> None:
        """The worker thread: one call after another (:meth:`_next`) until the batcher is closed and its queue is
        empty. A failure of the dispatch itself answers every request held (:meth:`_fail_held`), and the worker goes
        on."""
        while True:
            try:
                if not self._next():
                    return
            except BaseException as e:  # noqa: BLE001 - no request may be left waiting for a worker that is gone
                self._fail_held(e)

    def _next(self) -> bool:
        """Wait for requests, take the next call's (see the module docstring), run it and answer its requests; False
        once the batcher is closed and nothing is queued."""
        with self._cond:
            while not self._queue and not self._closed or self._busy:
                self._cond.wait()
            if not self._queue:
                return False
            if self.merge and self.window:
                assert self.max_rows is not None
                deadline = self._queue[0].since + self.window
                while (self._arriving or len(self._queue) < self._last) and \
                        self._queued_rows() < self.max_rows and not self._closed:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            self._running = taken = [q for q in self._take() if q.future.set_running_or_notify_cancel()]
            self._last = len(taken)
            self._busy = True
        started = time.perf_counter()
        try:
            results = self._run([q.admitted for q in taken]) if taken else []
            if len(results) != len(taken):
                raise RuntimeError(f"the call of {len(taken)} requests gave {len(results)} results")
        except BaseException as e:  # noqa: BLE001 - every request of the call gets its error
            for q in taken:
                q.future.set_exception(e)
        else:
            for q, r in zip(taken, results):
                q.future.set_result(r)
        with self._cond:
            self.waits.queued_seconds += sum(started - q.since for q in taken)
            self.waits.requests += len(taken)
            self._running = []
            self._busy = False
            self._cond.notify_all()
        return True

    def _fail_held(self, error: BaseException) -> None:
        """The dispatch failed with ``error``: answer every request the worker holds or has queued with it (none is
        left waiting), tell ``on_failure``, and let the worker take the requests that come next."""
        with self._cond:
            held = [q for q in (*self._running, *self._queue) if not q.future.done()]
            self._queue.clear()
            self._running = []
            self._busy = False
            self._cond.notify_all()
        what = f"{type(error).__name__}: {error}"
        failure = RuntimeError(f"the batching worker of {self.name} failed ({what}) before this request was "
                               f"answered; it goes on with the next requests: send this one again.")
        for q in held:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled meanwhile: no one waits
                q.future.set_exception(failure)
        if self.on_failure is not None:
            self.on_failure(f"the batching worker of {self.name} failed ({what}); the {len(held)} request"
                            f"{'s' if len(held) != 1 else ''} it held {'were' if len(held) != 1 else 'was'} "
                            f"answered with that error, and it goes on with the next ones")

    def _run(self, requests: list[Admitted], *, inline: bool = False) -> list[dict[str, Any]]:
        start = time.perf_counter()
        try:
            return self.batched.run(requests)
        finally:
            seconds = time.perf_counter() - start
            w = self.waits
            w.run_seconds += seconds
            w.calls += 1
            w.inline += inline
            w.per_call[len(requests)] = w.per_call.get(len(requests), 0) + 1
            if len(requests) == 1:
                key = tuple(requests[0].dims.items())
                if key not in self._first:  # a size's first call pays one-time costs (allocations): not counted
                    self._first.add(key)
                else:
                    total, count = self._seconds.get(key, (0.0, 0))
                    self._seconds[key] = (total + seconds, count + 1)
