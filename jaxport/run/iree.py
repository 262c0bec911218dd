"""A second backend: IREE's CPU compiler (``llvm-cpu``), behind the same checks as the JAX backend.

For each input shape signature, JAX lowers the artifact's program with the concrete shapes (resolving the platform
index of multi-platform artifacts and inlining the wrapped ``main``), ``refine_polymorphic_shapes`` turns it into
a module with static shapes, and IREE compiles that module for the local CPU. Compiled modules are cached by the
sha256 of the refined module and the IREE version, in an ``iree`` directory next to JAX's compilation cache.
Bound weights are passed as arguments on every call. Needs the optional extra ``jaxport[iree]``
(``iree-base-compiler``, ``iree-base-runtime``).
"""

from __future__ import annotations

import hashlib
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .. import dtypes
from .._fsio import atomic_write
from ..errors import PlatformError, PolicyError
from .backend import Compilation, ShapeKey
from .jax_backend import JaxBackend

#: Custom calls the IREE path accepts: shape assertions are folded away once shapes are static.
_SUPPORTED_CUSTOM_CALLS = {"shape_assertion"}


def compile_module(module: bytes | str, cpu: str = "host") -> bytes:
    """IREE's ``llvm-cpu`` compilation of a StableHLO module; ``cpu`` is ``host`` (this machine) or ``generic``."""
    compiler, _ = _iree()
    return compiler.compile_str(module, target_backends=["llvm-cpu"], input_type="stablehlo",
                                extra_args=[f"--iree-llvmcpu-target-cpu={cpu}"])


def _iree() -> tuple[Any, Any]:
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


def check_supported(manifest_function: dict[str, Any], where: str) -> None:
    """Refuse what the IREE path cannot run: unknown custom calls and multi-device programs."""
    targets = sorted({c["target"] for c in manifest_function.get("custom_calls") or []} - _SUPPORTED_CUSTOM_CALLS)
    if targets:
        raise PolicyError(f"{where}: the program uses custom calls that IREE does not provide ({', '.join(targets)}); "
                          f"run it with the JAX runtime (--runtime jax).")
    if manifest_function.get("nr_devices", 1) > 1:
        raise PolicyError(f"{where}: the program is sharded over {manifest_function['nr_devices']} devices; the IREE "
                          f"runtime runs single-device programs only. Use the JAX runtime.")


def static_module(backend: JaxBackend, structs: list[Any]) -> bytes:
    """The program specialized to concrete input shapes, as StableHLO bytecode with static shapes only.

    Its arguments are the function's bound tensors (in the manifest's order), then its free inputs; unused ones are
    kept, so every caller passes the same list.
    """
    import jax
    from jax.extend import mlir as jmlir

    with backend.x64():
        lowered = jax.jit(backend.program, keep_unused=True).lower(backend.weights, *structs)
    text = lowered.as_text(debug_info=False)  # without locations: the same program gives the same bytes
    try:
        return bytes(jmlir.refine_polymorphic_shapes(text.encode("utf-8")))
    except Exception as e:  # noqa: BLE001 - the refinement reports shape-assertion failures as errors
        raise PlatformError(f"{backend.where}: cannot specialize the program to these shapes for IREE: "
                            f"{str(e).strip().splitlines()[0][:300]}") from None


class IreeBackend:
    """Compiles and runs a loaded program with IREE on the local CPU; JAX lowers it (and traces it under JAX
    transformations) through ``jax_backend``."""

    name = "iree"
    mesh = None

    def __init__(self, jax_backend: JaxBackend, function: dict[str, Any], cache_dir: str | Path | None = None):
        import numpy as np

        self.where = jax_backend.where
        check_supported(function, self.where)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._jax = jax_backend
        self.weights = jax_backend.weights
        self._host_weights = [np.asarray(w) for w in jax_backend.weights]
        self._executables: dict[ShapeKey, Any] = {}

    def x64(self) -> AbstractContextManager[Any]:
        return self._jax.x64()

    def compile(self, key: ShapeKey) -> Compilation:
        import jax

        compiler, runtime = _iree()
        start = time.perf_counter()
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt)) for shape, dt in key]
        module = static_module(self._jax, structs)
        lower_seconds = time.perf_counter() - start
        start = time.perf_counter()
        digest = hashlib.sha256(module + f"{iree_version()} llvm-cpu host {_host_cpu()}".encode()).hexdigest()
        cached = self.cache_dir / f"{digest}.vmfb" if self.cache_dir is not None else None
        hit = None
        if cached is not None and cached.is_file():
            vmfb, hit = cached.read_bytes(), True
        else:
            try:
                vmfb = compile_module(module, "host")
            except Exception as e:  # noqa: BLE001 - IREE reports every compile failure as CompilerToolError
                lines = [ln for ln in str(e).splitlines() if "error:" in ln]
                raise PlatformError(f"{self.where}: IREE could not compile the program: "
                                    f"{(lines[0] if lines else str(e).splitlines()[0]).strip()[:400]}") from None
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
        main = context.modules[vm_module.name]["main"]
        out_tree = self._jax.exported.out_tree
        host_weights = self._host_weights

        def run(*flat: Any) -> Any:
            import numpy as np

            result = main(*host_weights, *[np.asarray(a) for a in flat])
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            arrays = [np.asarray(o.to_host()) if hasattr(o, "to_host") else np.asarray(o) for o in outs]
            return jax.tree_util.tree_unflatten(out_tree, arrays)

        seconds = time.perf_counter() - start
        self._executables[key] = run
        return Compilation(lower_seconds, seconds, hit)

    def place(self, flat: list[Any], *, resident: bool = False) -> list[Any]:
        """The inputs as given; IREE reads host arrays, so ``resident`` makes them numpy arrays once."""
        import numpy as np

        return [np.asarray(v) for v in flat] if resident else flat

    def execute(self, key: ShapeKey, flat: list[Any]) -> Any:
        return self._executables[key](*flat)

    def trace(self, flat: list[Any], weights: list[Any] | None = None) -> Any:
        return self._jax.trace(flat, weights)

    def placement(self) -> dict[str, Any] | None:
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


def iree_cache_dir(jax_cache_dir: str | Path | None) -> Path | None:
    """Where compiled IREE modules are kept: an ``iree`` directory beside JAX's compilation cache."""
    if jax_cache_dir is None:
        return None
    path = Path(jax_cache_dir)
    return path.with_name("iree") if path.name == "xla" else path / "iree"
