"""Compiling an artifact's function ahead of time into an IREE module (``jaxport compile``), to deploy it
without Python JAX. Needs the optional extra ``jaxport[iree]``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import dtypes
from .._fsio import atomic_write, check_output
from ..artifact import contract
from ..artifact.calltree import argument_positions
from ..artifact.container import manifest_bytes
from ..errors import PlatformError, UsageError
from ..module_scan import module_text
from .iree import check_supported, compile_module, iree_version, static_module
from .jax_backend import JaxBackend
from .load import load


def compile_artifact(path: str | Path, output: str | Path, *, function: str | None = None,
                     dims: dict[str, int] | None = None, cpu: str = "generic",
                     allow_custom_calls: Iterable[str] | None = None) -> dict[str, Any]:
    """Compile a function of an artifact into an IREE module (``.vmfb``) for deployment without JAX.

    With ``dims``, the program is specialized to those sizes (the others take their smallest valid values) and has
    static shapes. Without, the shape-polymorphic ``main`` is compiled as is, which IREE supports for many but not
    all programs. Writes ``output`` and ``output + ".json"``, which describes the module's arguments in order
    (platform index, bound tensors, inputs) and its outputs; returns that description. ``allow_custom_calls``: the
    custom-call targets beyond JAX's guaranteed-stable ones the program may use, as for ``load``.
    """
    import jax

    for written in (output, f"{output}.json"):  # before anything is compiled
        check_output(written, [path])
    loaded = load(path, function, allow_custom_calls=allow_custom_calls)
    backend = loaded.backend
    assert isinstance(backend, JaxBackend)  # load's default runtime
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
        module: bytes | str = static_module(backend, structs)
        arguments = weight_args + [{"kind": "input", "name": i["name"], "shape": list(s), "dtype": i["dtype"]}
                                   for i, s in zip(f["inputs"], shapes)]
        outputs = jax.eval_shape(backend.program, backend.weights, *structs)
        out_specs = [{"name": o["name"], "shape": list(a.shape), "dtype": str(a.dtype)}
                     for o, a in zip(f["outputs"], jax.tree_util.tree_leaves(outputs))]
        fixed: dict[str, int] | None = dict(env)
    else:
        exported = backend.exported
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
    atomic_write(output, lambda fh: fh.write(vmfb), inputs=[path])
    atomic_write(f"{output}.json", lambda fh: fh.write(manifest_bytes(description)), inputs=[path])
    return description
