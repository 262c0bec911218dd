"""``jax.export.Exported``, where JAX's public API stops: one built around a module JAX did not lower (``jaxport
import``) or from jaxport's own reading of a serialization older than JAX's window (``program.jaxser``), the
private fields of one (its VJP getter, its named shardings), and JAX's custom-call refusal listed through the
wildcard an older JAX lacks.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from .. import dtypes
from ..program import jaxser


def make_exported(*, fun_name: str, in_avals: Sequence[Any], out_avals: Sequence[Any], platforms: Sequence[str],
                  mlir_module_serialized: bytes, calling_convention_version: int, uses_global_constants: bool,
                  disabled_safety_checks: Sequence[Any]) -> Any:
    """A ``jax.export.Exported`` around an existing serialized module (``jaxport import``).

    No public API builds one: ``jax.export.export`` only lowers Python functions, ``jax.export.deserialize`` only
    reads JAX's own serialization, and the constructor takes private fields (the named shardings). The module runs
    on one device with unspecified shardings, no effects and no VJP; it takes its inputs as positional arguments, and
    every one is kept, and returns its one output, or a tuple of several. ``in_avals`` and ``out_avals`` are
    ``jax.ShapeDtypeStruct``s, possibly with symbolic dimensions.
    """
    from jax import export, tree_util
    from jax._src import core  # ShapedArray: the aval type Exported holds

    n_in, n_out = len(in_avals), len(out_avals)
    in_tree = tree_util.tree_structure((tuple(range(n_in)), {}))
    out_tree = tree_util.tree_structure(0 if n_out == 1 else tuple(range(n_out)))
    # jax 0.9.1 - 0.11.0 take ``_has_named_shardings`` (True: the named shardings below are meant); 0.11.1 dropped the
    # field, every Exported having named shardings from then on.
    legacy = {"_has_named_shardings": True} if _has_field(export.Exported, "_has_named_shardings") else {}
    return export.Exported(
        **legacy,
        fun_name=fun_name,
        in_tree=in_tree,
        in_avals=tuple(core.ShapedArray(a.shape, a.dtype) for a in in_avals),
        out_tree=out_tree,
        out_avals=tuple(core.ShapedArray(a.shape, a.dtype) for a in out_avals),
        _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out,
        in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out,
        nr_devices=1,
        platforms=tuple(platforms),
        ordered_effects=(),
        unordered_effects=(),
        disabled_safety_checks=tuple(disabled_safety_checks),
        mlir_module_serialized=bytes(mlir_module_serialized),
        calling_convention_version=calling_convention_version,
        module_kept_var_idx=tuple(range(n_in)),
        uses_global_constants=uses_global_constants,
        _get_vjp=None,
    )


def _has_field(cls: Any, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def vjp_getter(exported: Any) -> Callable[[Any], Any] | None:
    """The function that gives an ``Exported``'s VJP program (``Exported``), or None when it carries none.

    ``Exported.vjp()`` calls it, but JAX has no public API to ask whether one is stored without calling it, nor to
    wrap it: it is the private field ``_get_vjp``.
    """
    return exported._get_vjp


def with_vjp_getter(exported: Any, get_vjp: Callable[[Any], Any] | None) -> Any:
    """A copy of ``exported`` whose VJP programs come from ``get_vjp`` (see :func:`vjp_getter`)."""
    return dataclasses.replace(exported, _get_vjp=get_vjp)


def named_shardings(exported: Any) -> tuple[list[Any], list[Any]]:
    """An ``Exported``'s ``NamedSharding`` (or None) per flat input and per flat output.

    The public ``in_shardings_jax(mesh)`` needs the mesh, which is what jaxport wants to read from them: the
    shardings over the abstract mesh the program was exported with are only in the private fields.
    """
    ins = list(getattr(exported, "_in_named_shardings", None) or [None] * len(exported.in_avals))
    outs = list(getattr(exported, "_out_named_shardings", None) or [None] * len(exported.out_avals))
    return ins, outs


def hlo_sharding_text(sharding: Any, rank: int) -> str:
    """The HLO sharding of a ``NamedSharding`` for an array of ``rank`` axes, as XLA prints it.

    No public API converts a sharding to its HLO form.
    """
    return str(sharding._to_xla_hlo_sharding(rank))


#: How JAX's refusal of a custom call names its target: ``stablehlo.custom_call @target(...)``, the target quoted
#: when it is not a bare identifier, or the generic form's ``call_target_name = "target"``.
_REFUSED_TARGET = re.compile(r'custom_call @(?:"((?:[^"\\]|\\.)*)"|([\w.$-]+))|call_target_name = "((?:[^"\\]|\\.)*)"')


def export_allowing_every_custom_call(run_export: Callable[[list[Any]], Any]) -> Any:
    """``run_export(disabled_checks)`` with every custom-call target allowed, to list the targets JAX refused.

    jax 0.10.2 allows every target for ``DisabledSafetyCheck.custom_call("ALL")``; older releases (0.9.1 to 0.10.1)
    read "ALL" as one more target name, so the targets their refusal names are allowed too, and the export tried
    again until it passes (a refusal naming no new target is raised as it is).
    """
    from jax import export

    allowed = {"ALL"}
    while True:
        try:
            return run_export([export.DisabledSafetyCheck.custom_call(t) for t in sorted(allowed)])
        except ValueError as e:
            refused = {a or b or c for a, b, c in _REFUSED_TARGET.findall(str(e))} - allowed
            if not refused:
                raise
            allowed |= refused


# --- serializations outside the running JAX's window (``jaxser`` reads them; JAX builds the Exported) -------------


def exported_from_serialized(rec: Any, constraints: Sequence[str] = ()) -> Any:
    """A ``jax.export.Exported`` built from jaxport's own reading of a JAX serialization (``jaxser.Serialized``).

    What ``jax.export.deserialize`` gives for the same bytes (``tests/foundation/test_rescue.py`` compares them
    field by field), for serializations the running JAX refuses as older than its window: the trees, avals (with
    ``constraints``, which JAX's serialization drops, in their symbolic scope), named shardings, platforms, effects,
    disabled checks, the module's bytes and the VJPs. No public API builds one (see :func:`make_exported`).
    """
    import jax
    import jax.numpy as jnp
    from jax import dtypes as jax_dtypes
    from jax import export, tree_util
    from jax._src import core, effects  # no public API: ShapedArray, and the effect types JAX registered
    from jax._src.export import _export  # no public API: the custom pytree nodes registered for deserialization

    scope = export.SymbolicScope(list(constraints))

    def dtype(name: str) -> Any:
        if name == "float0":
            return jax_dtypes.float0
        return dtypes.to_numpy(name) if dtypes.is_key(name) else jnp.dtype(name)  # a typed PRNG key: JAX's dtype

    def aval(a: Any, sharding: Any) -> Any:
        shape = export.symbolic_shape(",".join(a.shape), scope=scope) if a.shape else ()
        memory = {"host": core.MemorySpace.Host, "any": core.MemorySpace.Any}.get(a.memory_space or "",
                                                                                core.MemorySpace.Device)
        base = core.ShapedArray(shape, dtype(a.dtype), weak_type=a.weak_type, memory_space=memory)
        return base if sharding is None else core.update_aval_with_sharding(base, sharding)

    def sharding(s: Any) -> Any:
        if s is None or s.kind == "unspecified":
            return None
        if s.kind != "named":
            raise ValueError("an XLA HloSharding, which this JAX no longer reads as a named sharding")
        axis_type = {"auto": jax.sharding.AxisType.Auto, "explicit": jax.sharding.AxisType.Explicit,
                     "manual": jax.sharding.AxisType.Manual}
        mesh = jax.sharding.AbstractMesh(tuple(s.mesh.axis_sizes), tuple(s.mesh.axis_names),
                                         axis_types=tuple(axis_type[t] for t in s.mesh.axis_types))
        axes = [None if p is None else (p[0] if len(p) == 1 else tuple(p)) for p in s.spec]
        spec = jax.sharding.PartitionSpec(*axes, unreduced=frozenset(s.unreduced), reduced=frozenset(s.reduced))
        return jax.sharding.NamedSharding(mesh, spec, memory_kind=s.memory_kind)

    def pytree(node: Any) -> Any:
        children = [pytree(c) for c in node.children]
        if node.kind == "leaf":
            return 0.0
        if node.kind == "none":
            return None
        if node.kind in ("tuple", "list"):
            return tuple(children) if node.kind == "tuple" else children
        if node.kind == "dict":
            return dict(zip(node.names, children))
        registered = _export.deserialization_registry.get(node.custom_name)
        if registered is None:
            raise ValueError(f"its pytree holds the custom node {node.custom_name!r}, not registered in this process "
                             f"(jax.export.register_pytree_node_serialization)")
        _, from_bytes, from_iter = registered
        return from_iter(from_bytes(node.custom_auxdata or b""), children)

    def effect(name: str) -> Any:
        for kind in effects.lowerable_effects._effect_types:
            if str(kind) == name:
                return kind()
        raise ValueError(f"it has the effect {name!r}, which this JAX does not know")

    in_shardings = tuple(sharding(s) for s in rec.in_shardings) or (None,) * len(rec.in_avals)
    out_shardings = tuple(sharding(s) for s in rec.out_shardings) or (None,) * len(rec.out_avals)
    in_avals = tuple(aval(a, s) for a, s in zip(rec.in_avals, in_shardings))
    out_avals = tuple(aval(a, s) for a, s in zip(rec.out_avals, out_shardings))
    checks = tuple(export.DisabledSafetyCheck.custom_call(c.target) if c.kind == "custom_call"
                   else export.DisabledSafetyCheck.platform() for c in rec.disabled_checks
                   if c.kind in ("custom_call", "platform"))
    legacy = {"_has_named_shardings": True} if _has_field(export.Exported, "_has_named_shardings") else {}
    vjp = rec.vjp
    return export.Exported(
        **legacy,
        fun_name=rec.function_name,
        in_tree=tree_util.tree_structure(pytree(rec.in_tree)),
        in_avals=in_avals,
        out_tree=tree_util.tree_structure(pytree(rec.out_tree)),
        out_avals=out_avals,
        _in_named_shardings=in_shardings,
        _out_named_shardings=out_shardings,
        in_shardings_hlo=(None,) * len(in_avals),
        out_shardings_hlo=(None,) * len(out_avals),
        nr_devices=rec.nr_devices,
        platforms=tuple(rec.platforms),
        ordered_effects=tuple(effect(e) for e in rec.ordered_effects),
        unordered_effects=tuple(effect(e) for e in rec.unordered_effects),
        disabled_safety_checks=checks,
        mlir_module_serialized=bytes(rec.module),
        calling_convention_version=rec.calling_convention,
        module_kept_var_idx=tuple(rec.kept_var_idx),
        uses_global_constants=rec.uses_global_constants,
        _get_vjp=(lambda _: exported_from_serialized(vjp, constraints)) if vjp is not None else None,
    )


#: What ``jax.export.deserialize`` says when it refuses a serialization as older than its window (jax >= 0.11.1).
_EXPIRED = ("older than the 6-month", "backward-compatibility window")


def is_expired_refusal(e: BaseException) -> bool:
    """Whether an error of ``jax.export.deserialize`` is its refusal of a serialization older than its window."""
    return any(s in str(e) for s in _EXPIRED)


def writer_of(rec: Any) -> str:
    """Who wrote a serialization (``jaxser.Serialized``), as a message names it: the JAX release when it says."""
    return f"jax {rec.jax_version}" if rec.jax_version else \
        f"an older JAX (serialization version {rec.serialization_version})"


def read_exported(payload: bytes, constraints: Sequence[str] = ()) -> tuple[Any, str | None]:
    """A payload as a ``jax.export.Exported``, and why jaxport read it itself (None when JAX's reader did).

    ``jax.export.deserialize`` first. Where it refuses the bytes as older than its window (a serialization whose
    layout JAX stopped reading: the 16-bit device count of serialization versions 1-4, XLA's HloSharding protos),
    the same ``Exported`` is built from jaxport's own reading of them (``jaxser``, checked against JAX's reader by
    ``tests/foundation/test_rescue.py``): the StableHLO inside is read by this JAX's StableHLO, whose promise spans
    years. Any other failure, and anything jaxport's reader refuses, is raised as JAX raised it.
    """
    from jax import export

    try:
        return export.deserialize(bytearray(payload)), None
    except Exception as e:  # noqa: BLE001 - re-raised unless it is JAX's refusal of an old serialization
        if not is_expired_refusal(e):
            raise
        refusal = e
    try:
        rec = jaxser.read(payload, "payload")
        exported = exported_from_serialized(rec, constraints)
    except Exception:  # noqa: BLE001 - jaxport cannot read it either: JAX's own words say why
        raise refusal from None
    return exported, f"written by {writer_of(rec)}, older than this JAX's window: jaxport read it and runs its " \
                     f"StableHLO"
