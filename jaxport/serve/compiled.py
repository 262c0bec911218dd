"""The compiled buckets of one served function (``batching.Batched``): each compiled once, by whoever needs it
first, and kept within a bound.

- **One compile per bucket, one at a time.** The first caller that needs a bucket compiles it; others that need
  it meanwhile wait for that compile (a *flight*) rather than starting their own. Compiles run one at a time in
  the process (:data:`COMPILING`): XLA uses every core for one, and JAX's compilation-cache settings are the
  process's. A server compiles what a request needs on the compile thread (:meth:`Compiled.submit`), never on its
  event loop, so the buckets already compiled keep answering meanwhile.
- **In the cache directory.** Every compile runs with JAX's persistent compilation cache in ``cache_dir``
  (``Loaded.warmup``), so what ``jaxport warmup`` compiled, or shipped (``warmup --target``, ``Compilation.shipped``),
  is fetched or loaded rather than compiled, before ready, in the background and on first use alike.
- **A bounded cache.** The buckets compiled by :meth:`Compiled.warmup` (a server's warm-up before it is ready, a
  batch worker's first bucket) are kept for good; the others, at most ``most`` of them, are evicted least recently
  used first (``Loaded.forget`` frees their memory; using one again compiles it again, or fetches it from the
  persistent cache). Eviction waits for the program call running (``calls``, the lock calls hold), so no call
  loses its executable.
- **Counted.** Compiles by phase (:data:`PHASES`: ``warmup``, ``background``, ``request``), evictions, and each
  compile after warm-up reported once to ``on_compile`` (a server's log line).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..run.backend import DIRECT_FAILURES
from ..run.buckets.served import Key, bucket_label
from ..run.loaded import Loaded
from ..run.warmup import Warmed, signature

#: When a bucket was compiled: in a warm-up (before a server is ready; a batch worker's first bucket), by a
#: server's background compiler after it is ready, or because a call needed it.
PHASES = ("warmup", "background", "request")

#: The most buckets compiled after warm-up that one function keeps (the warm-up's own are kept besides).
MAX_EXECUTABLES = 64

#: One compile at a time in the process (see the module docstring).
COMPILING = threading.Lock()

_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()

#: A compiled bucket as a call on its inputs in order, giving the output arrays as a list.
Runner = Callable[[list[Any]], list[Any]]


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's compile thread (one: compiles run one at a time anyway), started on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxport-compile")
        return _POOL


class Compiled:
    """The compiled buckets of ``loaded``'s function (see the module docstring). ``variables``: the function's
    dimension variables, in the order of a bucket's :data:`~served.Key`; ``calls``: the lock a program call holds
    while it runs."""

    def __init__(self, loaded: Loaded, variables: Sequence[str], calls: threading.Lock, *,
                 cache_dir: str | Path | None = None, most: int = MAX_EXECUTABLES):
        self.loaded = loaded
        self.variables = list(variables)
        self.cache_dir = cache_dir
        self.most = most
        self.counts = dict.fromkeys(PHASES, 0)
        self.evicted = 0
        #: Called once per compile after warm-up: ``(bucket, phase, seconds, executable source)``.
        self.on_compile: Callable[[dict[str, int], str, float, str], None] | None = None
        self._calls = calls
        self._state = threading.Lock()
        self._runners: dict[Key, Runner] = {}
        self._warm: set[Key] = set()
        self._recent: OrderedDict[Key, None] = OrderedDict()  # the others, least recently used first
        self._flights: dict[Key, concurrent.futures.Future[None]] = {}
        #: The input signatures counted as compiled (once each; an evicted one counts again when compiled again).
        self._counted: set[Any] = set()

    def key(self, bucket: Mapping[str, int]) -> Key:
        return tuple(bucket[v] for v in self.variables)

    def bucket(self, key: Key) -> dict[str, int]:
        return dict(zip(self.variables, key))

    # -- what is compiled --

    def runner(self, key: Key) -> Runner | None:
        """The compiled bucket's call, or None (not compiled, or evicted); the caller holds ``calls``."""
        run = self._runners.get(key)
        if run is not None and key in self._recent:
            self._recent.move_to_end(key)
        return run

    def has(self, key: Key) -> bool:
        return key in self._runners

    @property
    def warm(self) -> list[dict[str, int]]:
        """The buckets compiled by a warm-up (kept for good), in the order compiled."""
        return [self.bucket(k) for k in self._runners if k in self._warm]

    @property
    def held(self) -> list[dict[str, int]]:
        """Every bucket compiled and held now, in the order compiled."""
        return [self.bucket(k) for k in self._runners]

    @property
    def after_warmup(self) -> int:
        """Buckets compiled after warm-up (in the background or because a call needed them), evictions' recompiles
        included."""
        return self.counts["background"] + self.counts["request"]

    # -- compiling --

    def warmup(self, buckets: Sequence[Mapping[str, int]]) -> list[Warmed]:
        """Compile ``buckets`` now (``Loaded.warmup``, in ``cache_dir``), one at a time in the process, and keep
        them for good."""
        chosen = [dict(b) for b in buckets]
        with COMPILING:
            done = self.loaded.warmup(chosen, cache_dir=self.cache_dir)
        with self._state:
            new = {w.key for w in done} - self._counted
            self.counts["warmup"] += len(new)
            self._counted |= new
        with self._calls:
            for b in chosen:
                k = self.key(b)
                self._warm.add(k)
                self._recent.pop(k, None)
                self._runners[k] = self._runner(b)
        return done

    def compile(self, bucket: Mapping[str, int], phase: str) -> None:
        """Compile ``bucket`` unless it is compiled, or wait for the compile of it already running (see the module
        docstring); raises what compiling raised."""
        key = self.key(bucket)
        with self._state:
            if key in self._runners:
                return
            flight = self._flights.get(key)
            mine = flight is None
            if mine:
                flight = self._flights[key] = concurrent.futures.Future()
        assert flight is not None
        if mine:
            self._fly(key, flight, phase)
        flight.result()

    def submit(self, buckets: Sequence[Mapping[str, int]], phase: str) -> concurrent.futures.Future[None] | None:
        """The future of ``buckets`` compiled on the process's compile thread (those not compiled yet; None when
        all are), each joining a compile of it already running."""
        waits: list[concurrent.futures.Future[None]] = []
        with self._state:
            for b in buckets:
                key = self.key(b)
                if key in self._runners:
                    continue
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = concurrent.futures.Future()
                    _pool().submit(self._fly, key, flight, phase)
                waits.append(flight)
        if not waits:
            return None
        if len(waits) == 1:
            return waits[0]
        together: concurrent.futures.Future[None] = concurrent.futures.Future()

        def done(_: Any) -> None:
            if all(w.done() for w in waits) and not together.done():
                failed = [w.exception() for w in waits if w.exception() is not None]
                if failed:
                    together.set_exception(failed[0])  # type: ignore[arg-type]
                else:
                    together.set_result(None)

        for w in waits:
            w.add_done_callback(done)
        return together

    def _fly(self, key: Key, flight: concurrent.futures.Future[None], phase: str) -> None:
        """Compile the bucket of ``key`` for its flight, then settle the flight (never raises: waiters get it)."""
        bucket = self.bucket(key)
        try:
            start = time.perf_counter()
            with COMPILING:
                (warmed,) = self.loaded.warmup([bucket], cache_dir=self.cache_dir)
            seconds = time.perf_counter() - start
            run = self._runner(bucket)
            with self._state:
                compiled = warmed.key not in self._counted
                self._counted.add(warmed.key)
                if compiled:
                    self.counts[phase] += 1
            with self._calls:
                self._runners[key] = run
                self._recent[key] = None
                evicted = self._evict()
            if compiled:
                if self.on_compile is not None:
                    self.on_compile(bucket, phase, seconds, warmed.compilation.source)
            flight.set_result(None)
            del evicted  # their executables' memory goes with the last reference
        except BaseException as e:  # noqa: BLE001 - every waiter gets the compile's error
            flight.set_exception(e)
        finally:
            with self._state:
                self._flights.pop(key, None)

    def _evict(self) -> list[Runner]:
        """Drop the least recently used buckets compiled after warm-up past ``most`` (``calls`` held: no program
        runs); returns their calls, for the caller to release after the lock."""
        gone = []
        while len(self._recent) > self.most:
            key, _ = self._recent.popitem(last=False)
            gone.append(key)
        if not gone:
            return []
        runs = [self._runners.pop(k) for k in gone]
        keys = [signature(self.loaded.function_record, self.bucket(k)) for k in gone]
        with self._state:
            self._counted.difference_update(keys)
        self.loaded.forget(keys)
        self.evicted += len(gone)
        return runs

    def refresh(self, signature_key: Any) -> None:
        """Rebuild the calls of the buckets compiled for the input signature ``signature_key``, whose executable
        was replaced (``run.compile.retune``): the next call of one runs the new one."""
        with self._calls:
            for key in list(self._runners):
                bucket = self.bucket(key)
                if signature(self.loaded.function_record, bucket) == signature_key:
                    self._runners[key] = self._runner(bucket)

    def _runner(self, bucket: Mapping[str, int]) -> Runner:
        """The program compiled for ``bucket`` as a call on its inputs in order: the compiled executable itself
        where the backend offers it (``direct``), else ``execute``; the outputs as a list of arrays."""
        import jax

        loaded, key = self.loaded, signature(self.loaded.function_record, bucket)
        backend = loaded.backend
        direct = getattr(backend, "direct", None)
        program = direct(key) if direct is not None else None

        def reported(flat: list[Any]) -> Any:
            return backend.execute(key, backend.place(flat))

        def run(flat: list[Any]) -> list[Any]:
            out = None
            if program is not None:
                try:
                    out = program(*flat)
                except DIRECT_FAILURES:  # execute runs it again and reports the failure
                    out = None
            return jax.tree_util.tree_leaves(reported(flat) if out is None else out)

        return run


def describe_compile(name: str, bucket: Mapping[str, int], phase: str, seconds: float, source: str,
                     compiled: Compiled) -> str:
    """A server's log line for one compile after warm-up."""
    why = {"request": "on first use", "background": "in the background"}.get(phase, phase)
    how = {"shipped": "loaded the shipped executable", "cache": "fetched from the compilation cache"}.get(
        source, "compiled")
    return (f"{name}: {bucket_label(bucket)} {how} {why} in {seconds:.2f} s ({compiled.after_warmup} after ready, "
            f"{len(compiled.held)} held, {compiled.evicted} evicted)")
