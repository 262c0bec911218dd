"""A program exported again by the running JAX: a call of its ``Exported``, with the same signature.

``jaxport upgrade`` re-serializes an artifact's programs this way: ``jax.export`` of ``jax.jit(exported.call)``
inlines the old module (its shape assertions and custom calls included) into a program in the running JAX's calling
convention and serialization. The symbolic dimensions get the manifest's bounds and constraints, which JAX's
serialization drops; a sharded program keeps its named shardings. The program's locations are the old module's:
jaxport's own frames are excluded and the export runs on a fresh stack, so the bytes do not depend on the caller.
"""

from __future__ import annotations

from typing import Any

from ...artifact.model import Function
from ...errors import ExportError, UsageError
from ...jaxprivate.exported import named_shardings
from .tracing import exclude_own_frames, jax_config, on_fresh_stack


def reexport(exported: Any, f: Function, where: str) -> Any:
    """``exported`` exported again by the running JAX: a program that calls it, with the same signature (symbolic
    dimensions in a scope with the manifest's bounds and constraints, which JAX's serialization drops)."""
    import jax
    from jax import export, tree_util

    bounds = []
    for v, d in f.dims.items():
        if d.bounds.lo > 1:
            bounds.append(f"{v} >= {d.bounds.lo}")
        if d.bounds.hi is not None:
            bounds.append(f"{v} <= {d.bounds.hi}")
    scope = export.SymbolicScope(bounds + list(f.constraints))
    structs = [jax.ShapeDtypeStruct(export.symbolic_shape(",".join(str(d) for d in a.shape), scope=scope)
                                    if a.shape else (), a.dtype) for a in exported.in_avals]
    args, kwargs = tree_util.tree_unflatten(exported.in_tree, structs)
    program: Any = jax.jit(exported.call)
    if exported.nr_devices != 1:
        # A sharded program keeps its named shardings over the abstract mesh it was exported with: jax.jit shards
        # positional arguments only, which is how jaxport's own sharded exports take theirs (sharding.jit_sharded).
        if kwargs:
            raise UsageError(f"{where}: the program runs over {exported.nr_devices} devices and takes keyword "
                             f"arguments, whose shardings jax.jit cannot give; export the function again with "
                             f"this JAX instead.")
        ins, outs = named_shardings(exported)
        in_shardings = tree_util.tree_unflatten(exported.in_tree, ins)[0]
        out_shardings = tree_util.tree_unflatten(exported.out_tree, outs)
        program = jax.jit(exported.call, in_shardings=in_shardings, out_shardings=out_shardings)

    def run() -> Any:  # on a fresh stack, jaxport's frames excluded: no caller's path in the program's locations
        with jax_config(jax_include_full_tracebacks_in_locations=False):
            return export.export(program, platforms=exported.platforms,
                                 disabled_checks=exported.disabled_safety_checks)(*args, **kwargs)

    exclude_own_frames()
    try:
        return on_fresh_stack(run)
    except Exception as e:  # noqa: BLE001 - JAX's own reasons for a program it cannot call
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise ExportError(f"{where}: this JAX cannot export a call of the program: {first}") from None
