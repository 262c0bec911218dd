"""A second backend: IREE's CPU compiler (``llvm-cpu``), behind the same checks as the JAX backend.

For each input shape signature, JAX lowers the artifact's program with the concrete shapes (resolving the platform
index of multi-platform artifacts and inlining the wrapped ``main``), ``refine_polymorphic_shapes`` turns it into
a module with static shapes, and IREE compiles that module, as MLIR text (JAX's MLIR bytecode is newer than the one
IREE reads), for the local CPU. What IREE cannot run is refused as a platform error naming what would make it run:
the custom calls left in the *specialized* program (shape assertions and JAX's ``stablehlo.dynamic_*`` calls, which
only a polymorphic program needs, are gone by then) and programs sharded over several devices. Compiled modules are
cached by the sha256 of the module text and the IREE version, in an ``iree`` directory next to JAX's compilation
cache. Bound weights are passed as arguments on every call. ``int4`` and ``uint4`` arrays go to IREE packed, two
elements per byte (its ``i4`` buffers), and come back unpacked; a tensor of them must fill whole bytes (an even
element count: IREE's rule), and ``float4_e2m1fn``, which IREE cannot compile, is refused. Needs the optional extra
``jaxport[iree]`` (``iree-base-compiler``, ``iree-base-runtime``). ``deploy`` builds deployable modules from the same
pieces.
"""

from __future__ import annotations

import hashlib
import re
import signal
import time
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .. import dtypes, usercache
from .._api_types import runs_program
from .._fsio import atomic_write
from ..arrayfiles import subbyte
from ..artifact.model import Function
from ..errors import PlatformError
from .backend import Compilation, Placement, ShapeKey
from .buckets.specialize import DYNAMIC_PREFIX, GONE_WHEN_STATIC, RUN_WITH_JAX, custom_call_error, specialize
from .jax_backend import JaxBackend
from .values import keys


def compile_module(module: bytes | str, cpu: str = "host") -> bytes:
    """IREE's ``llvm-cpu`` compilation of a StableHLO module (MLIR text, which may also use IREE's ``util`` and
    ``stream`` dialects for parameters); ``cpu`` is ``host`` (this machine) or ``generic``."""
    compiler, _ = iree_packages()
    return compiler.compile_str(module, target_backends=["llvm-cpu"], input_type="stablehlo",
                                extra_args=[f"--iree-llvmcpu-target-cpu={cpu}"])


def compile_error(where: str, e: BaseException, shapes: str) -> PlatformError:
    """The platform error for IREE refusing to compile a program: IREE's first error line (which names the
    operation it could not lower) and what to do."""
    lines = [ln for ln in str(e).splitlines() if "error:" in ln]
    crashed = re.search(r"^Error code: -(\d+)$", str(e), re.MULTILINE)
    if crashed and not lines:  # iree-compile died of a signal: IREE's bug, its stack dump says nothing to a user
        number = int(crashed.group(1))
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        reason = f"iree-compile crashed ({name}, a bug of IREE's compiler)"
    else:
        line = (lines[0] if lines else (str(e).splitlines() or [type(e).__name__])[0]).strip()
        reason = line.split("error:", 1)[1].strip() if "error:" in line else line
    return PlatformError(f"{where}: IREE cannot compile the program {shapes}: {reason[:400]}; {RUN_WITH_JAX}.")


def run_error(e: BaseException) -> str:
    """IREE's runtime error as a message quotes it: its first line, without the source location IREE puts first
    (``c/runtime/src/iree/hal/....c:196: OUT_OF_RANGE; ...``), cut at a word."""
    line = (str(e).strip().splitlines() or [type(e).__name__])[0].strip()
    line = re.sub(r"^Error invoking function:\s*", "", line)
    line = re.sub(r"^\S+\.(?:c|cc|cpp|h):\d+:\s*", "", line).rstrip(" ;,.")
    return line if len(line) <= 300 else line[:300].rsplit(" ", 1)[0] + " ..."


def iree_packages() -> tuple[Any, Any]:
    """``iree.compiler`` and ``iree.runtime``; a platform error saying how to install them when they are missing."""
    try:
        import iree.compiler as compiler
        import iree.runtime as runtime
    except ImportError:
        raise PlatformError("the IREE runtime is not installed: pip install 'jaxport[iree]' (iree-base-compiler and "
                            "iree-base-runtime).") from None
    return compiler, runtime


def iree_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{version('iree-base-compiler')}/{version('iree-base-runtime')}"
    except PackageNotFoundError:
        return "unknown"


def check_supported(f: Function, where: str, weights: dict[str, Any] | None = None) -> None:
    """Refuse early what IREE cannot run whatever the shapes: programs sharded over several devices, custom calls
    that stay in the program once its shapes are static, and sub-byte types it has no buffers for (``weights``: the
    bound tensors, anything with a ``dtype`` and a ``shape``, by name). The specialized program is checked again
    (:func:`specialize`), which is what decides."""
    check_subbyte(f, where, weights)
    if f.nr_devices > 1:
        raise PlatformError(f"{where}: the program is sharded over {f.nr_devices} devices; the "
                            f"IREE runtime runs single-device programs only; {RUN_WITH_JAX}, or export the function "
                            f"without a mesh.")
    staying: Counter[str] = Counter()
    for c in f.custom_calls:
        if c.target not in GONE_WHEN_STATIC and not c.target.startswith(DYNAMIC_PREFIX):
            staying[c.target] += 1 if c.count is None else c.count
    if staying:
        raise custom_call_error(where, staying)


def check_subbyte(f: Function, where: str, weights: dict[str, Any] | None = None) -> None:
    """Refuse a ``float4_e2m1fn`` input, output or bound tensor (IREE compiles no ``f4E2M1FN``: "unsupported element
    type"), and a bound ``int4``/``uint4`` tensor of an odd number of elements (IREE's ``i4`` buffers are whole
    bytes); an input's count is known per call, where IREE refuses an odd one itself."""
    arrays = [(f"input {i.name!r}", i.dtype, None) for i in f.inputs] + \
        [(f"output {o.name!r}", o.dtype, None) for o in f.outputs] + \
        [(f"bound tensor {n!r}", str(t.dtype), tuple(t.shape)) for n, t in (weights or {}).items()]
    for what, dtype, shape in arrays:
        d = dtypes.BY_NAME.get(dtype)
        if d is None or not d.packed:
            continue
        if d.kind == "float":
            raise PlatformError(f"{where}: {what} is {dtype}, which IREE cannot compile (it has no {d.mlir} element "
                                f"type); {RUN_WITH_JAX}.")
        count = 1
        for n in shape or ():
            count *= n
        if shape is not None and count * d.width % 8:
            raise PlatformError(f"{where}: {what} is {dtype} with {count} elements, which IREE cannot hold (its "
                                f"{d.mlir} buffers are whole bytes: an even number of elements); {RUN_WITH_JAX}.")


def to_iree(runtime: Any, device: Any, value: Any) -> Any:
    """A host array as IREE takes it: the array itself, or for ``int4``/``uint4`` a buffer view of its packed
    bytes (IREE's Python runtime maps no ml_dtypes 4-bit type)."""
    import numpy as np

    d = dtypes.from_numpy(getattr(value, "dtype", None))
    if d is None or not d.packed:
        return value
    array = np.asarray(value)
    element = runtime.HalElementType.SINT_4 if d.kind == "int" else runtime.HalElementType.UINT_4
    buffer = device.allocator.allocate_buffer_copy(memory_type=runtime.MemoryType.DEVICE_LOCAL,
                                                   allowed_usage=runtime.BufferUsage.DEFAULT, device=device,
                                                   buffer=subbyte.pack(array))
    return runtime.HalBufferView(buffer, list(array.shape), element)


def from_iree(result: Any, dtype: str) -> Any:
    """An IREE result as a numpy array of ``dtype`` (``int4``/``uint4`` unpacked from the bytes of its buffer)."""
    import math

    import numpy as np

    if not dtypes.BY_NAME[dtype].packed:
        return np.asarray(result.to_host()) if hasattr(result, "to_host") else np.asarray(result)
    view = getattr(result, "_buffer_view", result)  # an iree.runtime DeviceArray holds its HalBufferView
    shape = [int(n) for n in view.shape]
    raw = np.array(view.map().asarray((int(view.byte_length),), np.dtype(np.uint8)))
    return subbyte.unpack(raw, dtype, math.prod(shape)).reshape(shape)


def shapes_text(key: ShapeKey | list[Any]) -> str:
    """``for inputs of shapes (4, 784)`` as messages name a specialization."""
    return "for inputs of shapes " + ", ".join(str(tuple(s)) for s, _ in key)


#: The largest compiled module read back from the cache (a module holds the program's code, not its weights).
MAX_MODULE_BYTES = 1 << 31


class IreeBackend:
    """Compiles and runs a loaded program with IREE on the local CPU; JAX lowers it (and traces it under JAX
    transformations) through ``jax_backend``."""

    name = "iree"
    mesh = None

    def __init__(self, jax_backend: JaxBackend, function: Function, cache_dir: str | Path | None = None):
        import numpy as np

        self.where = jax_backend.where
        check_supported(function, self.where, dict(zip(function.weights, jax_backend.weights)))
        self._output_dtypes = [o.dtype for o in function.outputs]
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._jax = jax_backend
        self.weights = jax_backend.weights
        self._host_weights = [np.asarray(w) for w in jax_backend.weights]
        self._executables: dict[ShapeKey, Any] = {}

    def forget(self, keys: list[ShapeKey]) -> None:
        """Drop the modules compiled for ``keys`` (and their JAX lowering's executables)."""
        for key in keys:
            self._executables.pop(key, None)
        self._jax.forget(keys)

    def x64(self) -> AbstractContextManager[Any]:
        return self._jax.x64()

    @runs_program
    def compile(self, key: ShapeKey) -> Compilation:
        import jax

        compiler, runtime = iree_packages()
        start = time.perf_counter()
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt)) for shape, dt in key]
        module = specialize(self._jax, structs)
        assert isinstance(module, str)  # MLIR text, which IREE reads
        lower_seconds = time.perf_counter() - start
        start = time.perf_counter()
        digest = hashlib.sha256(f"{module}\n{iree_version()} llvm-cpu host {_host_cpu()}".encode()).hexdigest()
        cached = self.cache_dir / f"{digest}.vmfb" if self.cache_dir is not None else None
        hit = None
        # a module is native code: read only from a directory and file of this user's that no one else can write
        # (``usercache``), and never for a program under a required signature, which no signer can vouch for here
        vmfb = None if cached is None or usercache.vouching_required(self._jax.program_sha256) or \
            usercache.untrusted_reason(cached.parent) is not None else \
            usercache.read_small(cached, MAX_MODULE_BYTES)
        if vmfb is not None:
            hit = True
        else:
            try:
                vmfb = compile_module(module, "host")
            except Exception as e:  # noqa: BLE001 - IREE reports every compile failure as CompilerToolError
                raise compile_error(self.where, e, shapes_text(key)) from None
            if cached is not None:
                hit = False
                try:
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(cached, lambda f: f.write(vmfb))
                except Exception:  # noqa: BLE001 - a cache that cannot be written only costs time
                    pass
        config = runtime.Config("local-task")
        vm_module = runtime.VmModule.copy_buffer(config.vm_instance, vmfb)
        context = runtime.SystemContext(config=config, vm_modules=[vm_module])
        main = context.modules[vm_module.name].main
        out_tree = self._jax.exported.out_tree
        device = config.device
        host_weights = [to_iree(runtime, device, w) for w in self._host_weights]
        output_dtypes = self._output_dtypes

        where, shapes = self.where, shapes_text(key)

        def run(*flat: Any) -> Any:
            try:  # IREE takes a key as its data
                result = main(*host_weights, *[to_iree(runtime, device, keys.key_data(a)) for a in flat])
            except Exception as e:  # noqa: BLE001 - IREE's runtime reports its failures as IndexError, RuntimeError
                raise PlatformError(f"{where}: IREE failed while running the program {shapes}: "
                                    f"{run_error(e)}; {RUN_WITH_JAX}.") from None
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            arrays = [from_iree(o, dtype) for o, dtype in zip(outs, output_dtypes)]
            return jax.tree_util.tree_unflatten(out_tree, arrays)

        seconds = time.perf_counter() - start
        self._executables[key] = run
        return Compilation(lower_seconds, seconds, hit)

    def place(self, flat: list[Any], *, resident: bool = False) -> list[Any]:
        """The inputs as given; IREE reads host arrays, so ``resident`` makes them numpy arrays once."""
        return [keys.key_data(v) for v in flat] if resident else flat

    @runs_program
    def execute(self, key: ShapeKey, flat: list[Any]) -> Any:
        return self._executables[key](*flat)

    @runs_program
    def trace(self, flat: list[Any], weights: list[Any] | None = None) -> Any:
        return self._jax.trace(flat, weights)

    def placement(self) -> Placement | None:
        return None


def _host_cpu() -> str:
    """The CPU model, part of the cache key of modules compiled for the host CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
