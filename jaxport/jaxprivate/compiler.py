"""The point where JAX hands a program to XLA: what an executable is compiled from, and an executable compiled
elsewhere used in its place.

JAX has no public API for either. ``jax.experimental.serialize_executable`` ships an executable as a pickle (its
Python wrapper and tree definitions with it), which a reader of files from elsewhere must never load; and JAX's
persistent compilation cache keys an executable by one hash of everything, so an entry written by a compile for a
TPU on a machine without one is never found on the TPU (the TPU host's ``LIBTPU_INIT_ARGS`` alone changes the hash).
Every JAX jaxport supports (0.9.1 - 0.12.x) compiles each ``jax.jit`` program through one private function,
``jax._src.compiler.compile_or_get_cached(backend, computation, devices, compile_options, host_callbacks,
executable_devices, ...)``: :func:`steered` wraps it, for the calling thread only, so that

- :class:`~.facts.Facts` of the compilation are read there: the program XLA gets, its compile options, the platform
  and its version, the devices' kinds and topology, the XLA flags and the jaxlib (what JAX's own cache key covers,
  digest by digest, so that a mismatch can be named);
- a caller may answer with an executable deserialized from native bytes (``Client.deserialize_executable``, the call
  JAX's own cache makes), and JAX then builds its usual ``Compiled`` around it: its C++ dispatch, shardings and
  layouts, read from the executable as after a compile.

Outside a :func:`steered` block, and in other threads, compilation is JAX's own. A JAX without the function (a
future release) is reported by :func:`steering_available`, and callers compile as usual.

What a ``jax.stages.Compiled`` keeps privately is read here too: its native executable (:func:`serialized_executable`)
and the C++ call JAX creates on its first call (:func:`cpp_call`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .facts import Facts, compilation_facts

#: What a :func:`steered` block's callback gets: the compilation's facts and a function that turns native executable
#: bytes into an executable loaded for this compilation's devices and options. It returns that executable to use it,
#: or None to let XLA compile. A :func:`steered` block with ``persistent=False`` has XLA compile without JAX's
#: persistent compilation cache (neither read nor written: what a required signature does not cover,
#: ``run.vouching``), through ``jax._src.compiler.backend_compile_and_load``, the call JAX makes when its cache is
#: off.
Steer = Callable[[Facts, Callable[[bytes], Any]], Any]


_local = threading.local()


_lock = threading.Lock()


def steering_available() -> bool:
    """Whether this JAX compiles through the function :func:`steered` wraps."""
    try:
        from jax._src import compiler  # no public API: see the module docstring
    except ImportError:
        return False
    return callable(getattr(compiler, "compile_or_get_cached", None))


@contextlib.contextmanager
def steered(steer: Steer | None, *, persistent: bool) -> Iterator[None]:
    """Within the block, every compilation of this thread goes through ``steer`` first (see :data:`Steer`; None:
    offers nothing), and reads and writes JAX's persistent compilation cache only with ``persistent``. Every caller
    says which (``usercache.vouching_required``: not under a required signature for the program), so that no
    compile a signature covers reaches JAX's cache by a default."""
    _install()
    previous = getattr(_local, "steer", None)
    _local.steer = (steer, persistent)
    try:
        yield
    finally:
        _local.steer = previous


def private_compiles() -> contextlib.AbstractContextManager[None]:
    """Within the block, every compilation of this thread bypasses JAX's persistent compilation cache (neither read
    nor written): the programs a command derives from one under a required signature (its derivative), which no
    signer vouched for in any cache."""
    return steered(None, persistent=False)


def _install() -> None:
    from jax._src import compiler  # no public API: see the module docstring

    with _lock:
        original = compiler.compile_or_get_cached
        if getattr(original, "_jaxport_steer", False):
            return

        def compile_or_get_cached(backend: Any, computation: Any, devices: Any, compile_options: Any,
                                  host_callbacks: Any, executable_devices: Any, *rest: Any, **kwargs: Any) -> Any:
            steer, persistent = getattr(_local, "steer", None) or (None, True)
            if not host_callbacks:
                if steer is not None:
                    facts = compilation_facts(backend, computation, devices, compile_options)

                    def load(blob: bytes) -> Any:
                        return backend.deserialize_executable(blob, executable_devices, compile_options)

                    executable = steer(facts, load)
                    if executable is not None:
                        return executable
                if not persistent:  # compiled here, past JAX's persistent cache
                    return compiler.backend_compile_and_load(backend, computation, executable_devices,
                                                             compile_options, host_callbacks)
            return original(backend, computation, devices, compile_options, host_callbacks, executable_devices,
                            *rest, **kwargs)

        compile_or_get_cached._jaxport_steer = True  # type: ignore[attr-defined]
        compiler.compile_or_get_cached = compile_or_get_cached


# --- what a compiled program keeps privately -----------------------------------------------------------------------


def serialized_executable(compiled: Any) -> bytes:
    """The native bytes of a ``jax.stages.Compiled``'s executable (what ``Client.deserialize_executable`` reads).

    Raises ``ValueError`` for a compilation that has none (one with host callbacks, or a pmap)."""
    executable = getattr(getattr(compiled, "_executable", None), "xla_executable", None)
    if executable is None:
        raise ValueError("this compilation has no serializable executable")
    if hasattr(executable, "serialize"):  # an executable compiled for devices this process does not have
        return bytes(executable.serialize())
    return bytes(executable.client.serialize_executable(executable))


def memory_analysis(compiled: Any) -> dict[str, int] | None:
    """Bytes of device memory the executable needs, by kind (``arguments``, ``outputs``, ``aliased``,
    ``temporaries``, ``code``), from XLA's analysis; None where the platform gives none."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - platforms without the analysis raise their own errors
        return None
    if stats is None:
        return None
    fields = {"arguments": "argument_size_in_bytes", "outputs": "output_size_in_bytes",
              "aliased": "alias_size_in_bytes", "temporaries": "temp_size_in_bytes",
              "code": "generated_code_size_in_bytes"}
    return {name: int(getattr(stats, attr, 0) or 0) for name, attr in fields.items()}


def cpp_call(compiled: Any) -> Callable[..., Any]:
    """A ``jax.stages.Compiled``'s call as JAX's C++ dispatch runs it, without the Python frame of
    ``Compiled.__call__`` in front (one microsecond a call on a CPU, more on a TPU host): the callable it creates on
    its first call and keeps (``_call``; JAX's own fallback where it has no C++ path). The compiled object itself
    before its first call, or where this JAX keeps no such callable."""
    call = getattr(compiled, "_call", None)
    return call if callable(call) else compiled
