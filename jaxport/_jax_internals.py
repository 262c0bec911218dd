"""The few things jaxport reads from JAX's private modules, kept in this one file.

JAX has no public API for the set of custom-call targets it guarantees to keep stable across versions; its export
code keeps it as a module constant. jaxport's allowlist must match the installed JAX, so it reads that constant
here. ``tests/foundation/test_checks.py`` compares it with the reviewed copy below and fails when JAX changes the set,
so a change is noticed and reviewed rather than silently inherited.

``jaxport import`` also needs two things JAX does not expose: an MLIR context that knows the ``func`` dialect, and
an ``Exported`` built around a module that JAX did not lower (see ``make_ir_context`` and ``make_exported``).
The other readers and writers of JAX's private state (an ``Exported``'s VJP function and named shardings, whether
the backends started) are here for the same reason: each says which public API is missing.

The shims for the older JAX releases jaxport supports (pyproject.toml: ``jax>=0.9.1,<0.13``) are here too, each
naming the JAX it is for: a public function whose signature changed (``deserialize_portable_artifact`` and
``serialize_portable_artifact`` of ``jax.extend.mlir``) or a feature an older release lacks (the custom-call
wildcard). Everything else jaxport calls works the same from jax 0.9.1 on; ``make test-compat`` runs the tests there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import dtypes
from .program import jaxser


def guaranteed_stable_custom_calls() -> frozenset[str]:
    """Custom-call targets JAX's export guarantees stable, from the installed JAX."""
    from jax._src.export import _export  # no public API: see the module docstring

    return frozenset(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)


#: The set as reviewed for jax 0.10.2, unchanged through 0.11.x and 0.12.0.1 (update it, after reading the JAX change,
#: when the test says it differs).
REVIEWED_JAX_VERSION = "0.12.0.1"
REVIEWED_STABLE_TARGETS = frozenset({
    "AllocateBuffer", "ApproxTopK", "Eigh", "LuDecomposition", "ProductOfElementaryHouseholderReflectors", "Qr",
    "SPMDFullToShardShape", "SPMDShardToFullShape", "Sharding", "annotate_device_placement",
    "cu_lu_pivots_to_permutation", "cu_threefry2x32_ffi", "cusolver_geqrf_ffi", "cusolver_gesvd_ffi",
    "cusolver_gesvdj_ffi", "cusolver_getrf_ffi", "cusolver_orgqr_ffi", "cusolver_potrf_ffi", "cusolver_syevd_ffi",
    "cusolver_sytrd_ffi", "cusparse_gtsv2_ffi", "hip_lu_pivots_to_permutation", "hip_threefry2x32_ffi",
    "hipsolver_geqrf_ffi", "hipsolver_gesdd_ffi", "hipsolver_gesvd_ffi", "hipsolver_gesvdj_ffi",
    "hipsolver_getrf_ffi", "hipsolver_orgqr_ffi", "hipsolver_potrf_ffi", "hipsolver_syevd_ffi",
    "hipsolver_sytrd_ffi", "lapack_cgees_ffi", "lapack_cgeev_ffi", "lapack_cgehrd_ffi", "lapack_cgeqrf_ffi",
    "lapack_cgesdd_ffi", "lapack_cgetrf_ffi", "lapack_cgtsv_ffi", "lapack_cheevd_ffi", "lapack_chetrd_ffi",
    "lapack_cpotrf_ffi", "lapack_ctrsm_ffi", "lapack_cungqr_ffi", "lapack_dgees_ffi", "lapack_dgeev_ffi",
    "lapack_dgehrd_ffi", "lapack_dgeqrf_ffi", "lapack_dgesdd_ffi", "lapack_dgetrf_ffi", "lapack_dgtsv_ffi",
    "lapack_dorgqr_ffi", "lapack_dpotrf_ffi", "lapack_dsyevd_ffi", "lapack_dsytrd_ffi", "lapack_dtrsm_ffi",
    "lapack_sgees_ffi", "lapack_sgeev_ffi", "lapack_sgehrd_ffi", "lapack_sgeqrf_ffi", "lapack_sgesdd_ffi",
    "lapack_sgetrf_ffi", "lapack_sgtsv_ffi", "lapack_sorgqr_ffi", "lapack_spotrf_ffi", "lapack_ssyevd_ffi",
    "lapack_ssytrd_ffi", "lapack_strsm_ffi", "lapack_zgees_ffi", "lapack_zgeev_ffi", "lapack_zgehrd_ffi",
    "lapack_zgeqrf_ffi", "lapack_zgesdd_ffi", "lapack_zgetrf_ffi", "lapack_zgtsv_ffi", "lapack_zheevd_ffi",
    "lapack_zhetrd_ffi", "lapack_zpotrf_ffi", "lapack_ztrsm_ffi", "lapack_zungqr_ffi", "mosaic_gpu_v2",
    "shape_assertion", "stablehlo.dynamic_approx_top_k", "stablehlo.dynamic_reduce_window",
    "stablehlo.dynamic_rng_bit_generator", "stablehlo.dynamic_top_k", "tf.call_tf_function", "tpu_custom_call",
})

#: The targets JAX added to the set after the oldest release jaxport supports, by the release that added them (read
#: from ``jax/_src/export/_export.py`` of every supported release): a supported JAX older than that release guarantees
#: the reviewed set without them. Add a row (and review it) when the supported range or the reviewed version moves.
STABLE_TARGETS_ADDED_IN: dict[str, frozenset[str]] = {
    "0.10.0": frozenset({"hipsolver_gesdd_ffi"}),
}


def _version_tuple(version: str) -> tuple[int, ...]:
    """``"0.9.0.1"`` -> ``(0, 9, 0, 1)``; a local or pre-release suffix (``0.10.2+cuda12``, ``0.11.0rc1``) ends it."""
    parts = []
    for part in version.split("."):
        digits = len(part) - len(part.lstrip("0123456789"))
        if not digits:
            break
        parts.append(int(part[:digits]))
        if digits < len(part):
            break
    return tuple(parts)


def reviewed_stable_targets(jax_version: str) -> frozenset[str]:
    """The reviewed set as JAX ``jax_version`` (a supported release) guarantees it: :data:`REVIEWED_STABLE_TARGETS`
    less the targets :data:`STABLE_TARGETS_ADDED_IN` a later release."""
    have = _version_tuple(jax_version)
    return REVIEWED_STABLE_TARGETS.difference(*(targets for added_in, targets in STABLE_TARGETS_ADDED_IN.items()
                                                if have < _version_tuple(added_in)))


def registered_host_callbacks() -> frozenset[str]:
    """The host-callback custom-call targets the installed jaxlib registers (for every platform it knows): each
    registered target whose name says it calls back into Python. ``checks.HOST_CALLBACK_TARGETS`` is the reviewed
    floor; these are added to it, so a callback a new JAX registers under a new name is never runnable either.

    No public API lists registered targets: ``xla_client.custom_call_targets`` is jaxlib's."""
    from jax._src.lib import xla_client  # no public API: see the docstring

    found: set[str] = set()
    for platform in ("cpu", "cuda", "rocm", "tpu"):
        try:
            names = xla_client.custom_call_targets(platform)
        except Exception:  # noqa: BLE001 - a platform jaxlib was not built for
            continue
        found.update(n for n in names if isinstance(n, str) and ("python" in n.lower() or "callback" in n.lower()))
    return frozenset(found)


def mlir_ir() -> Any:
    """JAX's MLIR Python bindings, ``jax.extend.mlir.ir``, without importing ``jax.extend`` (see
    :func:`_jaxlib_mlir`)."""
    from jaxlib.mlir import ir  # what jax.extend.mlir.ir re-exports

    return ir


def stablehlo_dialect() -> Any:
    """``jax.extend.mlir.dialects.stablehlo``, imported without ``jax.extend`` (see :func:`_jaxlib_mlir`)."""
    from jaxlib.mlir.dialects import stablehlo  # what jax.extend.mlir.dialects.stablehlo re-exports

    return stablehlo


def _jaxlib_mlir() -> Any:
    """jaxlib's MLIR helpers that ``jax.extend.mlir`` re-exports (``deserialize_portable_artifact`` and
    ``serialize_portable_artifact``).

    ``import jax.extend.mlir`` first runs ``jax/extend/__init__.py``, which imports every ``jax.extend`` module, Pallas
    included: 40-70 ms of every ``jaxport call`` process that reads a program (BENCHMARKS.md, issue 16), where a
    native script imports none of it. These are the same objects (``tests/foundation/test_checks.py`` compares them).
    """
    from jax._src.lib import _jax  # no public API: see the docstring

    return _jax.mlir


def make_ir_context() -> Any:
    """An MLIR context with every dialect JAX's programs use (func, stablehlo, chlo, mhlo, sdy, ...).

    ``jax.extend.mlir`` registers stablehlo, chlo and sdy, but not the upstream ``func`` dialect in which every
    module's ``main`` is written, so parsing a module's text or plain bytecode (``jaxport import``) needs the context
    JAX builds for its own lowerings. No public API gives it.
    """
    from jax._src.interpreters import mlir  # no public API: see the docstring

    return mlir.make_ir_context()


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


def serialize_with_sdy() -> bool:
    """Whether JAX's export writes Shardy sharding ops as they are when it serializes a module (the third argument
    of ``serialize_portable_artifact``, which JAX reads from its backend); a module re-serialized without it has
    its sharding annotations turned into custom calls that no JAX guarantees."""
    from jax._src import xla_bridge  # no public API

    return bool(getattr(xla_bridge.get_backend(), "serialize_with_sdy", False))


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


def register_frame_exclusion(prefix: str) -> None:
    """Make JAX skip the frames of files under ``prefix`` when it picks the user frame of an op's source location.

    The public name is ``jax.extend.source_info_util.register_exclusion``, whose import brings ``jax.extend`` (Pallas,
    checkify: 25 modules) into every export; this is the function it re-exports."""
    from jax._src import source_info_util  # jax.extend re-exports it: see the docstring

    source_info_util.register_exclusion(prefix)


def backends_initialized() -> bool:
    """Whether JAX has started its backends in this process (after which the device count is fixed).

    No public API tells without starting them.
    """
    from jax._src import xla_bridge  # no public API

    return bool(xla_bridge.backends_are_initialized())


def lapack_targets() -> frozenset[str]:
    """The custom-call targets of jaxlib's CPU LAPACK kernels: the kernels that need LAPACK initialized.

    No public API lists them; they are jaxlib's registrations for the CPU platform.
    """
    try:
        from jax._src.lib import lapack  # no public API
    except ImportError:
        return frozenset()
    return frozenset(name for name, *_ in lapack.registrations().get("cpu", []))


def initialize_lapack() -> None:
    """Make jaxlib's CPU LAPACK kernels callable (idempotent; it imports ``scipy.linalg``).

    jax 0.10 does it itself when it lowers a call of an exported program for CPU; jax 0.9.x does not, and a process
    that runs an exported program calling a LAPACK kernel before anything else initialized them dies of SIGSEGV
    (measured with jax 0.9.1: ``jnp.linalg.solve`` exported, then called in a fresh process). No public API does it.
    """
    try:
        from jax._src.lib import lapack  # no public API: see the docstring

        start = lapack._lapack.initialize
    except (ImportError, AttributeError):
        return
    start()


#: Per thread: how many :func:`lapack_left_alone` blocks are open.
_lapack_skips = threading.local()


@contextlib.contextmanager
def lapack_left_alone() -> Iterator[None]:
    """Within the block, lowering ``Exported.call`` in this thread does not initialize the CPU LAPACK kernels.

    JAX's lowering of a call to an exported program initializes them for every program exported for CPU (jax 0.10:
    ``_export._ensure_backends_initialized``), which imports ``scipy.linalg``: 0.09 s of every process's first call
    (BENCHMARKS.md, issue 16), whether the program calls LAPACK or not. The caller opens this block only for a
    program whose custom calls, as the allowlist check read them, include none of :func:`lapack_targets`; a program
    that does call one initializes LAPACK as JAX does. Lowering outside the block (another thread, a user's own
    ``jax.jit`` around a loaded function) is unchanged. No public API controls this; a JAX without the hook (jax 0.9)
    is left as it is.
    """
    try:
        from jax._src.lax import linalg  # no public API
    except ImportError:
        yield
        return
    original = getattr(linalg, "initialize_lapack", None)
    if original is None:
        yield
        return
    if not getattr(original, "_jaxport_gate", False):
        def gate() -> None:
            if not getattr(_lapack_skips, "depth", 0):
                original()

        gate._jaxport_gate = True  # type: ignore[attr-defined]
        linalg.initialize_lapack = gate
    _lapack_skips.depth = getattr(_lapack_skips, "depth", 0) + 1
    try:
        yield
    finally:
        _lapack_skips.depth -= 1


# --- the older JAX releases jaxport supports (measured with jax 0.9.1, 0.9.2, 0.10.0, 0.10.1 and 0.10.2) -----------


def _load_jax_dialects(ctx: Any) -> None:
    """Load into ``ctx`` every dialect JAX's programs use, as :func:`make_ir_context` does for a new context."""
    from jax._src.interpreters import mlir  # no public API: see make_ir_context
    from jax._src.lib.mlir import dialects

    ctx.append_dialect_registry(mlir.upstream_dialects)
    ctx.load_all_available_dialects()
    dialects.sdy.register_dialect(ctx)
    dialects.chlo.register_dialect(ctx)
    dialects.hlo.register_dialect(ctx)


def deserialize_portable_artifact(data: bytes) -> Any:
    """A StableHLO portable artifact as an ``ir.Module`` of the current MLIR context (``with ctx:``).

    ``jax.extend.mlir.deserialize_portable_artifact`` returns the module from jaxlib 0.10.0 on, but its text (with
    locations) in jaxlib 0.9.x: that text is parsed here, in the current context with JAX's dialects loaded (the
    newer reader loads them itself).
    """
    ir = mlir_ir()
    result = _jaxlib_mlir().deserialize_portable_artifact(data)
    if isinstance(result, str):  # jaxlib 0.9.x
        _load_jax_dialects(ir.Context.current)
        return ir.Module.parse(result)
    return result


def serialize_portable_artifact(module: Any, target: str, use_mixed_serialization: bool = False) -> bytes:
    """``module`` (an ``ir.Module``) as a StableHLO portable artifact for StableHLO version ``target``.

    ``jax.extend.mlir.serialize_portable_artifact`` takes the module from jaxlib 0.10.1 on, but only MLIR bytecode
    or text in jaxlib 0.9.x and 0.10.0, which refuse the module with a TypeError before reading anything: they are
    given the module's bytecode (which keeps its locations; the same bytes as from the module, measured with 0.9.x).
    """
    jmlir = _jaxlib_mlir()
    try:
        return bytes(jmlir.serialize_portable_artifact(module, target, use_mixed_serialization))
    except TypeError:  # jaxlib 0.9.x and 0.10.0: "incompatible function arguments"
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
        return bytes(jmlir.serialize_portable_artifact(buffer.getvalue(), target, use_mixed_serialization))


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
        base = core.ShapedArray(shape, dtype(a.dtype), memory_space=memory)
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
