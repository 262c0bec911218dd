"""A second runtime: IREE's CPU backend (``llvm-cpu``), behind the same checks as the JAX runtime.

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
from pathlib import Path
from typing import Any

from ..artifact import contract
from ..errors import PlatformError, PolicyError
from .loaded import Compilation, Loaded

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


def static_module(loaded: Loaded, structs: list[Any]) -> bytes:
    """The program specialized to concrete input shapes, as StableHLO bytecode with static shapes only.

    Its arguments are the function's bound tensors (in the manifest's order), then its free inputs; unused ones are
    kept, so every caller passes the same list.
    """
    import jax
    from jax.extend import mlir as jmlir

    with loaded._x64():
        lowered = jax.jit(loaded._program, keep_unused=True).lower(loaded._weights, *structs)
    text = lowered.as_text(debug_info=False)  # without locations: the same program gives the same bytes
    try:
        return bytes(jmlir.refine_polymorphic_shapes(text.encode("utf-8")))
    except Exception as e:  # noqa: BLE001 - the refinement reports shape-assertion failures as errors
        raise PlatformError(f"{loaded.path}: function {loaded.function!r}: cannot specialize the program to these "
                            f"shapes for IREE: {str(e).strip().splitlines()[0][:300]}") from None


class IreeLoaded(Loaded):
    """A :class:`Loaded` whose programs are compiled and run by IREE on the local CPU."""

    runtime = "iree"

    def __init__(self, *args: Any, cache_dir: str | Path | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        check_supported(self.function_manifest, f"{self.path}: function {self.function!r}")
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._host_weights = [__import__("numpy").asarray(w) for w in self._weights]

    def _compile(self, key: tuple[Any, ...]) -> Compilation:
        if key in self._compiled:
            return self._compiled[key][1]
        import jax

        from .. import dtypes

        compiler, runtime = _iree()
        start = time.perf_counter()
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt)) for shape, dt in key]
        module = static_module(self, structs)
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
                raise PlatformError(f"{self.path}: function {self.function!r}: IREE could not compile the program: "
                                    f"{(lines[0] if lines else str(e).splitlines()[0]).strip()[:400]}") from None
            if cached is not None:
                hit = False
                from ..artifact.container import atomic_write

                try:
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(cached, lambda f: f.write(vmfb))
                except Exception:  # noqa: BLE001 - a cache that cannot be written only costs time
                    pass
        config = runtime.Config("local-task")
        vm_module = runtime.VmModule.copy_buffer(config.vm_instance, vmfb)
        context = runtime.SystemContext(config=config, vm_modules=[vm_module])
        main = context.modules[vm_module.name]["main"]
        out_tree = self._exported.out_tree
        host_weights = self._host_weights

        def run(_weights: Any, *flat: Any) -> Any:
            import numpy as np

            result = main(*host_weights, *[np.asarray(a) for a in flat])
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            arrays = [np.asarray(o.to_host()) if hasattr(o, "to_host") else np.asarray(o) for o in outs]
            return jax.tree_util.tree_unflatten(out_tree, arrays)

        seconds = time.perf_counter() - start
        self._compiled[key] = (run, Compilation(lower_seconds, seconds, hit))
        return self._compiled[key][1]

    def _execute(self, key: tuple[Any, ...], flat: list[Any]) -> Any:
        return self._compiled[key][0](None, *flat)


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


def compile_artifact(path: str | Path, output: str | Path, *, function: str | None = None,
                     dims: dict[str, int] | None = None, cpu: str = "generic") -> dict[str, Any]:
    """Compile a function of an artifact into an IREE module (``.vmfb``) for deployment without JAX.

    With ``dims``, the program is specialized to those sizes (the others take their smallest valid values) and has
    static shapes. Without, the shape-polymorphic ``main`` is compiled as is, which IREE supports for many but not
    all programs. Writes ``output`` and ``output + ".json"``, which describes the module's arguments in order
    (platform index, bound tensors, inputs) and its outputs; returns that description.
    """
    import jax

    from .. import dtypes
    from ..artifact.calltree import argument_positions
    from ..artifact.container import atomic_write, manifest_bytes
    from ..errors import UsageError
    from ..module_scan import module_text
    from .loaded import load

    loaded = load(path, function)
    f = loaded.function_manifest
    where = f"{path}: function {loaded.function!r}"
    check_supported(f, where)
    tensors = (loaded.manifest.get("weights") or {}).get("tensors") or {}
    weight_args = [{"kind": "weight", "name": n, "shape": tensors[n]["shape"], "dtype": tensors[n]["dtype"]}
                   for n in f.get("weights") or []]
    if dims or not f.get("dims"):
        env = contract.resolve_dims(f, dims or {})
        shapes = [contract.concrete_shape(i, env) for i in f["inputs"]]
        structs = [jax.ShapeDtypeStruct(s, dtypes.to_numpy(i["dtype"])) for s, i in zip(shapes, f["inputs"])]
        module: bytes | str = static_module(loaded, structs)
        arguments = weight_args + [{"kind": "input", "name": i["name"], "shape": list(s), "dtype": i["dtype"]}
                                   for i, s in zip(f["inputs"], shapes)]
        outputs = jax.eval_shape(loaded._program, loaded._weights, *structs)
        out_specs = [{"name": o["name"], "shape": list(a.shape), "dtype": str(a.dtype)}
                     for o, a in zip(f["outputs"], jax.tree_util.tree_leaves(outputs))]
        fixed: dict[str, int] | None = dict(env)
    else:
        exported = loaded._exported
        module = module_text(exported.mlir_module_serialized)
        free, weight_positions = argument_positions(exported)
        by_position: dict[int, dict[str, Any]] = {}
        for pos, i in zip(free, f["inputs"]):
            by_position[pos] = {"kind": "input", "name": i["name"], "shape": i["shape"], "dtype": i["dtype"]}
        for pos, w in zip(weight_positions, weight_args):
            by_position[pos] = w
        arguments = [by_position[p] for p in f["kept_inputs"]]
        if len(f["platforms"]) > 1:
            arguments.insert(0, {"kind": "platform_index", "value": f["platforms"].index("cpu") if "cpu" in
                                 f["platforms"] else 0, "dtype": "int32", "shape": []})
        out_specs = [{"name": o["name"], "shape": o["shape"], "dtype": o["dtype"]} for o in f["outputs"]]
        fixed = None
    try:
        vmfb = compile_module(module, cpu)
    except PlatformError:
        raise
    except Exception as e:  # noqa: BLE001
        lines = [ln for ln in str(e).splitlines() if "error:" in ln]
        reason = (lines[0] if lines else str(e).splitlines()[0]).strip()[:300]
        if fixed is None:
            names = ", ".join(f"{d}=N" for d in f["dims"])
            raise UsageError(f"{where}: IREE cannot compile the shape-polymorphic program ({reason}). Compile a "
                             f"module specialized to concrete sizes with --dim ({names}).") from None
        raise PlatformError(f"{where}: IREE could not compile the program: {reason}") from None
    description = {
        "artifact": Path(path).name,
        "function": loaded.function,
        "target": "iree-llvm-cpu",
        "cpu": cpu,
        "iree": iree_version(),
        "entry_function": "main",
        "dims": fixed,
        "arguments": arguments,
        "outputs": out_specs,
    }
    atomic_write(output, lambda fh: fh.write(vmfb))
    atomic_write(f"{output}.json", lambda fh: fh.write(manifest_bytes(description)))
    return description
