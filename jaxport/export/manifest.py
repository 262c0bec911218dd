"""The manifest writer: what an export (or an import) records about each function it lowered.

``build_function_entry`` describes one lowered function in the layout of ``specs/FORMAT.md``;
``artifact.manifest.validate`` is the reader's side of the same document.
"""

from __future__ import annotations

from typing import Any

from .. import dimexpr
from .._jax_internals import guaranteed_stable_custom_calls
from .._version import __version__
from ..artifact.bounds import Bounds
from ..module_scan import short_location, stablehlo_version
from ..sharding import describe
from .lower import function_constraints


def versions() -> dict[str, Any]:
    """Versions of jaxport, jax and jaxlib in this process (imports jax)."""
    import jax
    import jaxlib
    from jax import export

    return {"jaxport": __version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "calling_convention_range": [export.minimum_supported_calling_convention_version,
                                         export.maximum_supported_calling_convention_version]}


def _dim(d: Any) -> int | str:
    return d if isinstance(d, int) else str(d)


def derivations(inputs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For each dimension variable, the first input axis it can be solved from, in solving order."""
    known: dict[str, int] = {}
    out: dict[str, dict[str, Any]] = {}
    progress = True
    parsed = [(i["name"], [d if isinstance(d, int) else dimexpr.parse(d) for d in i["shape"]]) for i in inputs]
    while progress:
        progress = False
        for name, dims in parsed:
            for axis, d in enumerate(dims):
                if isinstance(d, int):
                    continue
                unknown = dimexpr.variables(d) - known.keys()
                if len(unknown) != 1:
                    continue
                (v,) = unknown
                lin = dimexpr.linear(d, v, known)
                if lin is None or lin[0] == 0:
                    continue
                known[v] = 1
                out[v] = {"input": name, "axis": axis, "expression": str(d)}
                progress = True
    return out


def build_function_entry(lowered: Any, spec: Any, entrypoint: str, payload: str,
                         allowed_custom_calls: list[str]) -> dict[str, Any]:
    """The manifest entry of one lowered function (see ``lower.Lowered``)."""
    exp = lowered.exported
    stable = guaranteed_stable_custom_calls()
    shardings = describe(exp)
    mesh = shardings["mesh"]
    in_shardings, out_shardings = shardings["inputs"], shardings["outputs"]
    positions = lowered.input_positions or list(range(len(lowered.inputs)))
    inputs = []
    for inp, pos in zip(lowered.inputs, positions):
        aval, (sh, pspec) = exp.in_avals[pos], in_shardings[pos]
        inputs.append({"name": inp.name, "spec_path": inp.spec_path, "shape": [_dim(d) for d in aval.shape],
                       "dtype": str(aval.dtype), "sharding": sh})
        if mesh:
            inputs[-1]["partition_spec"] = pspec
        if inp.leaf.range is not None:
            inputs[-1]["range"] = list(inp.leaf.range)
    outputs = []
    for name, aval, (sh, pspec) in zip(lowered.outputs, exp.out_avals, out_shardings):
        outputs.append({"name": name, "shape": [_dim(d) for d in aval.shape], "dtype": str(aval.dtype),
                        "sharding": sh})
        if mesh:
            outputs[-1]["partition_spec"] = pspec
    derived = derivations(inputs)
    dims = {}
    for v in sorted(derived, key=lambda v: list(derived).index(v)):
        dims[v] = {**Bounds.of(spec.dims.get(v)).to_manifest(), "derived_from": derived[v]}
    counts = lowered.scan.custom_call_counts()
    custom_calls = [{"target": t, "count": counts[t],
                     "stability": "guaranteed" if t in stable else "allowed"} for t in sorted(counts)]
    big = sorted(lowered.scan.constants, key=lambda c: -c.nbytes)
    return {
        "entrypoint": entrypoint,
        "payload": payload,
        "calling_convention_version": exp.calling_convention_version,
        "stablehlo_version": stablehlo_version(exp.mlir_module_serialized),
        "platforms": list(exp.platforms),
        "x64": lowered.x64,
        "signature": lowered.signature,
        "inputs": inputs,
        "weights": [t.name for t in lowered.tensors],
        "outputs": outputs,
        "output_tree": lowered.output_tree,
        "dims": dims,
        "constraints": function_constraints(lowered.inputs, spec)[1],
        "shape_assertions": lowered.scan.shape_assertions,
        "custom_calls": custom_calls,
        "allowed_custom_calls": sorted(set(allowed_custom_calls)),
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
        "kept_inputs": list(exp.module_kept_var_idx),
        "effects": {"ordered": [str(e) for e in exp.ordered_effects],
                    "unordered": [str(e) for e in exp.unordered_effects]},
        "nr_devices": exp.nr_devices,
        "vjp_order": 0,
        "embedded_constants": {
            "count": len(big), "bytes": lowered.scan.constant_bytes(),
            "largest": [{"type": c.type, "bytes": c.nbytes, "location": short_location(c.location)}
                        for c in big[:5] if c.nbytes > 0]},
        **({"mesh": mesh, "weights_partition_specs": {
            t.name: in_shardings[pos][1] for t, pos in zip(lowered.tensors, lowered.weight_positions)}}
           if mesh else {}),
    }
