"""JAX's persistent compilation cache: where it lives (``usercache.default_cache_dir``), turning it on for a block,
and whether a compilation was served from it (counted from JAX's monitoring events).

JAX's cache key covers everything that makes a compiled executable valid (``jax._src.cache_key.get``): the
program itself (its StableHLO, debug information stripped), the jaxlib version, the backend's platform and
platform version, the devices' topology or device kinds, the compile options and XLA flags. So a cache directory
shared by several jaxlib versions, machines or programs never hands one of them another's executable.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..usercache import default_cache_dir, untrusted_reason

__all__ = ["CacheState", "CacheWatch", "compilation_cache", "default_cache_dir"]

_EVENTS: Counter[str] = Counter()
_HIT = "/jax/compilation_cache/cache_hits"
_MISS = "/jax/compilation_cache/cache_misses"
_listening = False

_CACHE_KEYS = ("jax_compilation_cache_dir", "jax_enable_compilation_cache",
               "jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes")


@dataclass(frozen=True)
class CacheState:
    """The persistent cache a block runs with."""

    directory: Path | None  # None: no persistent cache
    problem: str | None = None  # why the requested directory is not used, and that the block runs without it
    #: The reason alone: ``cannot use the compilation cache DIR: REASON`` (None when the directory is used).
    reason: str | None = None


@contextlib.contextmanager
def compilation_cache(directory: str | Path | None) -> Iterator[CacheState]:
    """Use JAX's persistent compilation cache in ``directory`` (None: none) inside the block, then restore.

    Every compilation is cached, however fast or small. A directory that cannot be created is reported in the
    yielded state, and the block runs without a cache.
    """
    import jax
    from jax.experimental.compilation_cache import compilation_cache as jax_cache

    state = CacheState(None)
    if directory is not None:
        path = Path(directory).expanduser()
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            untrusted = untrusted_reason(path)
            state = CacheState(path)
            if untrusted is not None:  # others could plant compiled programs (and check verdicts) there
                reason = f"not using the compilation cache {path}: {untrusted}, so what it holds cannot be trusted"
                state = CacheState(None, f"{reason}; running without it (use a directory of your own, mode 0700)",
                                   reason)
        except OSError as e:
            reason = f"cannot use the compilation cache {path}: {e.strerror or e}"
            state = CacheState(None, f"{reason}; running without it", reason)
    saved = {k: getattr(jax.config, k) for k in _CACHE_KEYS}
    try:
        if state.directory is not None:
            jax.config.update("jax_compilation_cache_dir", str(state.directory))
            jax.config.update("jax_enable_compilation_cache", True)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        else:
            jax.config.update("jax_enable_compilation_cache", False)
        jax_cache.reset_cache()  # JAX opens its cache once per process; make it see this directory
        yield state
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)
        jax_cache.reset_cache()


def executable_directory() -> Path | None:
    """Where shipped executables (``run.executables``) are looked for now: the directory of JAX's persistent
    compilation cache when it has one (``call --cache-dir``, ``compilation_cache``), else the user's cache directory
    (``usercache.default_cache_dir``) unless JAX's cache is turned off (``--no-cache``: compile everything)."""
    import jax

    if not jax.config.jax_enable_compilation_cache:
        return None
    directory = jax.config.jax_compilation_cache_dir
    return Path(directory) if directory else default_cache_dir()


def _listen() -> None:
    """Count JAX's persistent-cache events (once per process: JAX keeps every listener registered)."""
    global _listening
    if _listening:
        return
    import jax.monitoring

    def on_event(event: str, **_: Any) -> None:
        if event.startswith("/jax/compilation_cache/"):
            _EVENTS[event] += 1

    jax.monitoring.register_event_listener(on_event)
    _listening = True


@dataclass(frozen=True)
class CacheWatch:
    """The persistent cache's hit and miss counts when a compilation started; :meth:`hit` reads the outcome."""

    hits: int
    misses: int

    @classmethod
    def start(cls) -> CacheWatch:
        _listen()
        return cls(_EVENTS[_HIT], _EVENTS[_MISS])

    def hit(self) -> bool | None:
        """Whether the compilations since :meth:`start` were served from the cache; None when none consulted it."""
        return True if _EVENTS[_HIT] > self.hits else False if _EVENTS[_MISS] > self.misses else None
