"""The manifest writer: what an export (or an import) records about each function it lowered.

``build_function_entry`` describes one lowered function as the records of ``artifact.model`` (which serialize to the
layout of ``specs/FORMAT.md``); ``artifact.manifest.validate`` is the reader's side of the same document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import dimexpr
from ..._version import __version__
from ...artifact import model
from ...artifact.bounds import Bounds
from ...jaxprivate.stable import guaranteed_stable_custom_calls
from ...program.module_scan import short_location, stablehlo_version
from ...sharding import describe
from ..lowering.lower import function_constraints


def versions() -> model.Producer:
    """Versions of jaxport, jax and jaxlib in this process (imports jax)."""
    import jax
    import jaxlib
    from jax import export

    return model.Producer(__version__, jax.__version__, jaxlib.__version__,
                          (export.minimum_supported_calling_convention_version,
                           export.maximum_supported_calling_convention_version))


def _dim(d: Any) -> int | str:
    return d if isinstance(d, int) else str(d)


def derivations(inputs: Sequence[model.Input]) -> dict[str, model.Derivation]:
    """For each dimension variable, the first input axis it can be solved from, in solving order."""
    known: dict[str, int] = {}
    out: dict[str, model.Derivation] = {}
    progress = True
    parsed = [(i.name, [d if isinstance(d, int) else dimexpr.parse(d) for d in i.shape]) for i in inputs]
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
                out[v] = model.Derivation(name, axis, str(d))
                progress = True
    return out


def program_fields(exported: Any, scan: Any) -> dict[str, Any]:
    """The fields of a function's manifest entry that its program determines (``scan``: ``module_scan`` of its
    module): the calling convention, StableHLO version, shape assertions, custom calls, disabled checks, kept
    inputs and embedded constants. ``upgrade`` re-reads them for a re-serialized program."""
    stable = guaranteed_stable_custom_calls()
    counts = scan.custom_call_counts()
    big = sorted(scan.constants, key=lambda c: -c.nbytes)
    return {
        "calling_convention_version": exported.calling_convention_version,
        "stablehlo_version": stablehlo_version(exported.mlir_module_serialized),
        "shape_assertions": tuple(scan.shape_assertions),
        "custom_calls": tuple(model.CustomCall(t, counts[t], "guaranteed" if t in stable else "allowed")
                              for t in sorted(counts)),
        "disabled_safety_checks": tuple(str(c) for c in exported.disabled_safety_checks),
        "kept_inputs": tuple(exported.module_kept_var_idx),
        "embedded_constants": model.EmbeddedConstants(
            len(big), scan.constant_bytes(),
            tuple(model.Constant(c.type, c.nbytes, short_location(c.location)) for c in big[:5] if c.nbytes > 0)),
    }


def build_function_entry(lowered: Any, spec: Any, entrypoint: str, payload: str, allowed_custom_calls: list[str],
                         vjp_order: int = 0) -> model.Function:
    """The manifest entry of one lowered function (see ``lowering.lower.Lowered``), whose payload carries ``vjp_order``
    orders of derivatives."""
    exp = lowered.exported
    mesh, in_shardings, out_shardings = describe(exp)
    positions = lowered.input_positions or list(range(len(lowered.inputs)))
    inputs = []
    for inp, pos in zip(lowered.inputs, positions):
        aval, (sh, pspec) = exp.in_avals[pos], in_shardings[pos]
        inputs.append(model.Input(inp.name, tuple(_dim(d) for d in aval.shape), str(aval.dtype), inp.spec_path, sh,
                                  pspec, None if inp.leaf.range is None else tuple(inp.leaf.range), inp.leaf.weak,
                                  inp.leaf.range_example and inp.leaf.range is not None))
    outputs = [model.Output(name, tuple(_dim(d) for d in aval.shape), str(aval.dtype), sh, pspec,
                            lowered.output_keys.get(i))
               for i, (name, aval, (sh, pspec)) in enumerate(zip(lowered.outputs, exp.out_avals, out_shardings))]
    dims = {v: model.DimVar(Bounds.of(spec.dims.get(v)), d) for v, d in derivations(inputs).items()}
    return model.Function(
        payload=payload,
        platforms=tuple(exp.platforms),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        signature=lowered.signature,
        entrypoint=entrypoint,
        x64=lowered.x64,
        weights=tuple(t.name for t in lowered.tensors),
        output_tree=lowered.output_tree,
        dims=dims,
        constraints=tuple(function_constraints(lowered.inputs, spec)[1]),
        allowed_custom_calls=tuple(sorted(set(allowed_custom_calls))),
        effects=model.Effects(tuple(str(e) for e in exp.ordered_effects),
                              tuple(str(e) for e in exp.unordered_effects)),
        nr_devices=exp.nr_devices,
        vjp_order=vjp_order,
        **program_fields(exp, lowered.scan),
        mesh=None if mesh is None else model.Mesh(tuple(mesh[0]), tuple(mesh[1])),
        weights_partition_specs=None if mesh is None else {
            t.name: in_shardings[pos][1] for t, pos in zip(lowered.tensors, lowered.weight_positions)})
