"""The backend seam: what a runtime implements so that :class:`~jaxport.run.loaded.Loaded` can run a program on it.

``Loaded`` owns everything that does not depend on the runtime: the signature, binding a caller's arguments to input
names, the input checks (``artifact.contract``), result records. It hands a backend only inputs that passed the
checks, keyed by their shape signature, and asks it to:

1. :meth:`Backend.compile` the program for one shape signature (once; later calls return the first record);
2. :meth:`Backend.place` the inputs where the program reads them;
3. :meth:`Backend.execute` the compiled program on them, returning the output pytree;
4. :meth:`Backend.trace` the program on JAX tracers, when a Loaded is called inside ``jax.grad``, ``jax.jit``...:
   JAX then differentiates it with the VJPs the artifact stores;
5. :meth:`Backend.placement` describe the devices a sharded program runs on;
6. :meth:`Backend.forget` drop executables a server no longer keeps (``serve.compiled`` bounds how many it holds).

Two backends exist: ``jax_backend.JaxBackend`` (XLA through ``jax.jit``, sharded programs included) and
``iree.IreeBackend`` (IREE's CPU compiler, single-device; it traces through a JaxBackend).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

#: An input shape signature: ``((shape, dtype name), ...)``, one entry per free input, in the manifest's order.
ShapeKey = tuple[tuple[tuple[int, ...], str], ...]

#: What a direct call of a compiled program raises (a backend's optional ``direct(key)``: the executable called as
#: JAX's C++ dispatch calls it, ``JaxBackend.direct``) when the dispatch refuses the inputs or the program fails: the
#: caller runs the call again through :meth:`Backend.execute`, which reports the failure in the backend's words (XLA
#: raises a failed bounds check as an ``IndexError``). Anything else, ``MemoryError`` above all, is no call's failure
#: to repeat and passes as it is.
DIRECT_FAILURES: tuple[type[Exception], ...] = (RuntimeError, TypeError, ValueError, IndexError)


class Placement(NamedTuple):
    """Where a sharded program runs (a call report's ``devices``)."""

    devices: int
    mesh: str
    process_index: int
    process_count: int

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class Compilation:
    """How the program was compiled for one shape signature."""

    lower_seconds: float  # tracing Exported.call and building the module
    seconds: float  # XLA compilation (or fetching it from the persistent cache, or loading a shipped executable)
    cache_hit: bool | None  # served from the persistent cache; None when no persistent cache is in use
    #: Whether the executable was a shipped one (``run.executables``: built by ``warmup --target``), loaded from the
    #: cache directory instead of compiled (then ``cache_hit`` is True as well).
    shipped: bool = False
    #: Lines about the compilation: a shipped executable that was not used, and why.
    notes: tuple[str, ...] = ()
    #: Under a required signature, the trusted signer who vouched for the shipped executable (``run.vouching``).
    vouched_by: str | None = None

    @property
    def source(self) -> str:
        """Where the executable came from: ``shipped``, ``cache`` (JAX's persistent cache) or ``compiled``."""
        return "shipped" if self.shipped else "cache" if self.cache_hit else "compiled"


class Backend(Protocol):
    """What a runtime implements to compile and run a loaded function's program."""

    #: The runtime's name, as ``call --runtime`` spells it (``jax``, ``iree``).
    name: str
    #: The ``jax.sharding.Mesh`` a sharded program runs on here, or None.
    mesh: Any
    #: The bound tensors, as the program receives them (on the device for JAX).
    weights: list[Any]

    def x64(self) -> AbstractContextManager[Any]:
        """The context the program runs in: 64-bit types enabled for an artifact exported with them."""
        ...

    def compile(self, key: ShapeKey) -> Compilation:
        """Compile for one input shape signature, once; later calls return the first compilation's record."""
        ...

    def place(self, flat: list[Any], *, resident: bool = False) -> list[Any]:
        """Checked inputs where the program reads them; ``resident`` puts them on the device now, for repeated
        calls (else the runtime may copy them at the call)."""
        ...

    def execute(self, key: ShapeKey, flat: list[Any]) -> Any:
        """Run the program compiled for ``key`` on placed inputs; returns the output pytree."""
        ...

    def trace(self, flat: list[Any], weights: list[Any] | None = None) -> Any:
        """The program applied to inputs that may be JAX tracers (bound tensors: ``weights``, default the loaded
        ones), through ``Exported.call``: what ``jax.grad`` and ``jax.jit`` of a Loaded see."""
        ...

    def placement(self) -> Placement | None:
        """Where a sharded program runs: devices, mesh, processes (None for a single-device program)."""
        ...

    def forget(self, keys: list[ShapeKey]) -> None:
        """Drop the executables compiled for ``keys``, so that their memory is freed once no call holds them; a
        later :meth:`compile` of one compiles it again (or fetches it from the persistent cache)."""
        ...


def is_tracer(value: Any) -> bool:
    """Whether ``value`` is a JAX tracer: the Loaded is being called inside a JAX transformation."""
    import jax

    return isinstance(value, jax.core.Tracer)
