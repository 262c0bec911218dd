"""The JAX backend: a loaded program compiled by XLA through one ``jax.jit`` of ``Exported.call``.

The program is compiled ahead of time once per input shape signature (``Exported.call`` alone re-traces on every
call). A sharded program (one with a ``mesh``) runs on the mesh laid over the devices JAX lists, its inputs and
bound weights placed with the shardings recorded at export (``sharding.py``). Bound weights go to the device once
and are passed as arguments on every call (not baked in as constants).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .. import dtypes, usercache
from .._api_types import runs_program
from ..artifact.calltree import argument_positions
from ..artifact.model import Function, Mesh
from ..errors import FormatError, InputError, PlatformError
from ..jaxprivate.compiler import cpp_call, steered
from ..jaxprivate.facts import Facts
from ..jaxprivate.runtime import (
    MOSAIC_GPU_TARGET,
    initialize_lapack,
    lapack_left_alone,
    lapack_targets,
    mosaic_gpu_runtime,
)
from ..program.checks import checked_targets
from ..sharding import mesh_text, named, place, runtime_mesh
from .backend import Compilation, Placement, ShapeKey, is_tracer
from .cache import CacheWatch, executable_directory
from .executables import shipped


class JaxBackend:
    """Runs a deserialized ``Exported`` with JAX on the local devices (see the module docstring)."""

    name = "jax"

    def __init__(self, exported: Any, weights: list[Any], function: Function, *, where: str, fname: str,
                 platform: str, platform_mismatch: bool, weights_check: Callable[[], None] | None = None,
                 program: str | None = None):
        """``weights`` are the bound tensors in the manifest's order; ``function`` is its manifest record;
        ``where`` (``FILE: function 'NAME'``) starts every message. ``weights_check``, when given, is the weights'
        digest check still running (``load``'s ``defer_verify``): nothing runs on the weights before it passes.
        ``program`` is the payload's sha256 (the manifest's), under which ``warmup --target`` ships executables
        (``executables``): a matching one is loaded instead of compiling."""
        import jax

        self.exported = exported
        #: The payload's sha256 (the manifest's), which shipped executables and vouches name.
        self.program_sha256 = program
        self.where = where
        self.platform = platform
        self.platform_mismatch = platform_mismatch
        self._platforms = list(function.platforms)
        self._mesh_info = function.mesh
        self._needs_x64 = function.x64
        # Whether the program is known to call no LAPACK kernel (from the allowlist check's reading of it): lowering
        # it then need not initialize LAPACK (``jaxprivate.runtime.lapack_left_alone``); any other program has LAPACK
        # initialized before it is lowered (JAX before 0.10 does not do it, and the call would crash).
        targets = checked_targets(exported.mlir_module_serialized)
        self._lapack_free = targets is not None and not targets & lapack_targets()
        if targets is not None and MOSAIC_GPU_TARGET in targets:
            mosaic_gpu_runtime()  # a Pallas Mosaic GPU kernel compiles only with its runtime library found
        free, weight_positions = argument_positions(exported)
        #: The program as a function of ``(bound tensors, *free inputs)``, for ``jax.jit`` and ``jax.eval_shape``.
        self.program = program_function(exported, fname)
        self._jit = jax.jit(self.program)
        #: A sharded program's mesh over the local devices (None: unsharded).
        self.mesh: Any = None
        self._in_shardings: list[Any] | None = None
        weight_shardings = None
        if self._mesh_info:
            self.mesh, self._in_shardings, weight_shardings = self._shardings(self._mesh_info, free, weight_positions)
        with self.x64():
            if weight_shardings is None:
                self.weights = [jax.device_put(w) for w in weights]
            else:
                self.weights = [place(w, s) for w, s in zip(weights, weight_shardings)]
        #: Compiled executables by input shape signature.
        self._executables: dict[ShapeKey, Any] = {}
        self._weights_check = weights_check

    def _weights_checked(self) -> None:
        """Wait for the weights' digest check, if one is running; it raises (each time) if it failed."""
        if self._weights_check is not None:
            self._weights_check()
            self._weights_check = None

    def _shardings(self, mesh_info: Mesh, free: list[int],
                   weight_positions: list[int]) -> tuple[Any, list[Any], list[Any]]:
        """The mesh over the devices JAX sees, and the shardings of the free inputs and of the bound tensors, as
        recorded at export."""
        mesh = runtime_mesh(mesh_info, self.where)
        try:
            recorded = self.exported.in_shardings_jax(mesh)
        except ValueError as e:  # the program's mesh is not the manifest's
            raise FormatError(f"{self.where}: the payload disagrees with the manifest (mesh: {str(e)[:300]}); the "
                              f"artifact was edited or written by a faulty producer. Re-export it.") from None
        shardings = [s if s is not None else named(mesh, None) for s in recorded]
        return mesh, [shardings[p] for p in free], [shardings[p] for p in weight_positions]

    def x64(self) -> AbstractContextManager[Any]:
        import jax

        return jax.enable_x64(True) if self._needs_x64 else contextlib.nullcontext()

    @runs_program
    def compile(self, key: ShapeKey) -> Compilation:
        import jax

        shardings = self._in_shardings or [None] * len(key)
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt), sharding=s)
                   for (shape, dt), s in zip(key, shardings)]
        if not self._lapack_free:
            initialize_lapack()
        watch = CacheWatch.start()
        start = time.perf_counter()
        with self.x64(), (lapack_left_alone() if self._lapack_free else contextlib.nullcontext()):
            try:
                lowered = self._jit.lower(self.weights, *structs)
            except ValueError as e:
                raise self._failure("JAX refused the inputs", e, InputError) from None
            lower_seconds = time.perf_counter() - start
            # an executable shipped in the cache for this program and shape (warmup --target) replaces XLA's compile
            offer = shipped(executable_directory(), self.program_sha256, key)
            start = time.perf_counter()
            try:
                with steered(offer, persistent=offer.persistent) if offer is not None else contextlib.nullcontext():
                    compiled = lowered.compile()
            except Exception as e:  # noqa: BLE001 - XLA raises its runtime error type for any compile failure
                raise self._failure(f"XLA on {self.platform} could not compile the program", e,
                                    PlatformError) from None
        seconds = time.perf_counter() - start
        self._executables[key] = compiled
        self._weights_checked()  # the digest check ran while XLA compiled: it ends before anything runs
        used = offer is not None and offer.used is not None
        return Compilation(lower_seconds, seconds, True if used else watch.hit(), used,
                           tuple(offer.notes) if offer is not None else (),
                           offer.vouched_by if offer is not None else None)

    def recompile(self, key: ShapeKey) -> tuple[Any, Facts | None]:
        """The program compiled for ``key`` again, here, by XLA (no shipped executable offered: on a GPU, XLA
        autotunes it), and the facts of that compilation (None where JAX compiled past jaxport's view); what runs
        for ``key`` changes only with :meth:`use` (``run.compile.retune``)."""
        import jax

        shardings = self._in_shardings or [None] * len(key)
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt), sharding=s)
                   for (shape, dt), s in zip(key, shardings)]
        seen: list[Facts] = []
        with self.x64(), (lapack_left_alone() if self._lapack_free else contextlib.nullcontext()):
            lowered = self._jit.lower(self.weights, *structs)
            # under a required signature, XLA's own compile: nothing from JAX's cache, which no signer vouched for
            with steered(lambda facts, load: seen.append(facts),
                         persistent=not usercache.vouching_required(self.program_sha256)):
                compiled = lowered.compile()
        return compiled, seen[0] if seen else None

    def use(self, key: ShapeKey, compiled: Any) -> None:
        """Run ``key`` with ``compiled`` (from :meth:`recompile`) from now on; a call already running finishes with
        the executable it started with."""
        self._executables[key] = compiled

    def forget(self, keys: list[ShapeKey]) -> None:
        """Drop the executables of ``keys``. JAX keeps every program it lowered and compiled in caches of its own
        (keyed by the traced program, so a compile of the same shapes returns the same executable): those are
        cleared too, for every function of the process; an executable a caller still holds keeps working."""
        import jax

        dropped = [self._executables.pop(key) for key in keys if key in self._executables]
        if dropped:
            del dropped
            jax.clear_caches()

    def place(self, flat: list[Any], *, resident: bool = False) -> list[Any]:
        """A sharded program's inputs laid out as recorded (each device reads its slice); others as given (JAX
        copies them at the call), or on the default device when ``resident``."""
        import jax

        with self.x64():
            if self._in_shardings is None:
                return [jax.device_put(v) for v in flat] if resident else flat
            return [v if is_tracer(v) else place(v, s) for v, s in zip(flat, self._in_shardings)]

    @runs_program
    def execute(self, key: ShapeKey, flat: list[Any]) -> Any:
        import jax

        self._weights_checked()
        with self.x64():
            try:
                return self._executables[key](self.weights, *flat)
            except Exception as e:  # noqa: BLE001
                if self.platform_mismatch:
                    raise self._failure("running failed", e, PlatformError) from None
                if isinstance(e, jax.errors.JaxRuntimeError):  # XLA refused to run it (a kernel's own checks)
                    raise self._failure(f"XLA on {self.platform} could not run the program", e,
                                        PlatformError) from None
                if isinstance(e, MemoryError):
                    raise
                # XLA's native code raises other types too (a failed bounds check is an IndexError): still the
                # program's failure, never the caller's argument
                raise self._failure(f"XLA on {self.platform} could not run the program ({type(e).__name__})", e,
                                    PlatformError) from None

    def direct(self, key: ShapeKey) -> Callable[..., Any] | None:
        """The program compiled for ``key`` as a plain call on unplaced inputs, when a call needs nothing else (no
        64-bit mode to enter, no mesh to place inputs on, the weights' check passed); else None. Its failures are
        raw: the caller reports them through :meth:`execute`."""
        if self._needs_x64 or self._in_shardings is not None or self._weights_check is not None or \
                key not in self._executables:
            return None
        return functools.partial(cpp_call(self._executables[key]), self.weights)

    @runs_program
    def trace(self, flat: list[Any], weights: list[Any] | None = None) -> Any:
        self._weights_checked()
        # The caller's own transformation lowers and runs it, with the VJP programs JAX asks for: a JAX of 0.10 or
        # later starts LAPACK there anyway; an older one never does, and a (VJP) program calling LAPACK would crash.
        initialize_lapack()
        with self.x64():
            return self._jit(self.weights if weights is None else weights, *flat)

    def placement(self) -> Placement | None:
        if self.mesh is None:
            return None
        import jax

        return Placement(int(self.mesh.size), mesh_text(self._mesh_info), jax.process_index(), jax.process_count())

    def _failure(self, what: str, e: Exception, kind: type) -> Exception:
        text = xla_message(e)
        if self.platform_mismatch:
            return PlatformError(f"{self.where} was exported for {', '.join(self._platforms)} and cannot run on "
                                 f"{self.platform} ({what}: {text}). Run it on a machine with one of its platforms, "
                                 f"or re-export it with --platform {self.platform}.")
        hint = ""
        if "custom call" in text or "FFI handler" in text:
            hint = (" The program calls a kernel that this process does not provide: register its implementation "
                    "(for example with jax.ffi.register_ffi_target) before calling, or run it where it is available.")
        return kind(f"{self.where}: {what}: {text}.{hint}")


def program_function(exported: Any, fname: str) -> Callable[..., Any]:
    """An exported program as a function of ``(bound tensors, *free inputs)`` (the manifest's orders), named
    ``fname``: what ``jax.jit`` lowers, here and for a target without its devices (``aot``), identically."""
    free, weight_positions = argument_positions(exported)
    n = len(exported.in_avals)

    def program(weights: list[Any], *flat: Any) -> Any:
        full: list[Any] = [None] * n
        for pos, value in zip(free, flat):
            full[pos] = value
        for pos, value in zip(weight_positions, weights):
            full[pos] = value
        args, kwargs = exported.in_tree.unflatten(full)
        return exported.call(*args, **kwargs)

    program.__name__ = fname
    return program


#: The most characters of XLA's message a one-line error keeps (its sentences name the sizes and limits).
MAX_XLA_MESSAGE = 2000


def xla_message(e: BaseException) -> str:
    """XLA's (or JAX's) message of ``e`` on one line: every line of it, whitespace collapsed (a compile error names
    what did not fit on its second line: "Scoped allocation with size 64.00M and limit 16.00M ..."), without the
    trailer of source locations XLA's status adds; cut only past :data:`MAX_XLA_MESSAGE` characters."""
    lines = []
    for line in str(e).splitlines():
        if line.strip().startswith("=== Source Location Trace"):
            break
        if line.strip():
            lines.append(" ".join(line.split()))
    text = " ".join(lines) or type(e).__name__
    return text if len(text) <= MAX_XLA_MESSAGE else text[:MAX_XLA_MESSAGE] + "..."
