"""Importing a JAX serialization: the bytes of ``jax.export.Exported.serialize()``, from any JAX since 0.4.30.

A file is one by its content, whatever its name (``.jaxexport`` by convention): ``jaxser.looks_like_serialization``.
jaxport reads it itself (``jaxser``: the flatbuffer's published schema, every serialization version), so a file
older than the running JAX's window imports as one inside it; the signature comes from the file, not a spec: the
input and output avals with their symbolic dimensions, the input pytree (positional and keyword arguments) and the
output pytree (custom nodes, which need their Python type registered, become tuples), the platforms and the stored
VJPs. A spec (``--shapes``) may add what the file does not keep: bounds of the dimension variables, constraints
(JAX's serialization drops them), the name and metadata.

The program is the file's StableHLO, called through ``jax.export`` as the running JAX calls it (``Exported.call``)
and exported again by the same lowering as ``jaxport export``: the artifact gets this JAX's calling convention and
serialization and a fresh window, its shape assertions and custom calls are the file's (checked against the
allowlist like any export), and ``verify`` follows the recorded file (``module_function``). Serializations for
several devices are refused: their shardings would have to be proved to mean the same over the new mesh.

Trust model: the file is read by jaxport's defensive reader and its StableHLO first in a child process
(``isolate.check_payload``); nothing in it is executed while importing, except that lowering traces the call.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import dimexpr
from .._fsio import open_for_reading, read_at_most
from .._yaml import load
from ..artifact.contract import concrete_shape, resolve_dims
from ..artifact.model import Function, replace
from ..artifact.window.payload import dotted, readable_stablehlo, stablehlo_version
from ..errors import EntrypointError, ExportError, FormatError, InputError, PolicyError, SpecError, UsageError
from ..export.entry.entrypoint import Entrypoint
from ..export.lowering import gradients, lower
from ..export.writing.manifest import build_function_entry, versions
from ..export.writing.target import for_target
from ..export.writing.write import Contents, ExportResult, artifact_metadata, relative_path, write_artifact
from ..isolation.isolate import check_payload, check_runs
from ..jaxprivate.exported import exported_from_serialized, is_expired_refusal, writer_of
from ..jaxprivate.mlir import (
    deserialize_portable_artifact,
    make_ir_context,
    serialize_portable_artifact,
    serialize_with_sdy,
    stablehlo_dialect,
)
from ..jaxprivate.stable import guaranteed_stable_custom_calls
from ..program import jaxser
from ..program.checks import check_custom_calls
from ..program.module_scan import scan_module
from ..spec import SPEC_DOCUMENT, ShapeSpec
from ..spec.build import DICT, TEXT, as_shape_spec
from .recompose import recompose
from .request import ImportRequest

#: A serialization larger than this is refused before it is read (the program and its constants, no weights).
MAX_SERIALIZATION_BYTES = 2 << 30

#: The keys a spec for a serialization may give: the signature itself comes from the file.
SPEC_KEYS = ("jaxport", "name", "dims", "constraints", "outputs", "metadata", "allow_custom_calls")


def is_serialization(path: str | Path) -> bool:
    """Whether the file at ``path`` holds a JAX serialization (by its content)."""
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > MAX_SERIALIZATION_BYTES:
            return False
        return jaxser.looks_like_serialization(p.read_bytes())
    except OSError:
        return False


def _recomposed(rec: jaxser.Serialized) -> tuple[jaxser.Serialized, list[str]]:
    """``rec`` with the CHLO operations its StableHLO wrote as ``mhlo.*`` custom calls recomposed (``recompose``),
    in its module and its VJPs' (re-serialized as this JAX's StableHLO), and the targets replaced."""
    vjp, below = _recomposed(rec.vjp) if rec.vjp is not None else (None, [])
    with make_ir_context():
        module = deserialize_portable_artifact(rec.module)
        replaced = recompose(module)
        data = serialize_portable_artifact(module, str(stablehlo_dialect().get_current_version()),
                                           serialize_with_sdy()) if replaced else rec.module
    return replace(rec, module=data, vjp=vjp), replaced + below


def _ffi_form(target: str, stable: frozenset[str]) -> str | None:
    """The kernel the running JAX guarantees in place of a legacy target (``lapack_spotrf``: ``lapack_spotrf_ffi``;
    ``blas_strsm``: ``lapack_strsm_ffi``), or None."""
    for name in (f"{target}_ffi", f"lapack_{target.removeprefix('blas_')}_ffi"):
        if name in stable and target not in stable:
            return name
    return None


def _refuse_legacy_kernels(rec: jaxser.Serialized, display: str) -> None:
    """Refuse a program that calls a kernel by its legacy name (``lapack_spotrf``, ``blas_strsm``: jax before 0.4.36
    wrote them) where the running JAX guarantees only the new one (``lapack_spotrf_ffi``): this jaxlib no longer
    provides the legacy kernel, so the program cannot run here whatever is allowed."""
    stable = guaranteed_stable_custom_calls()
    legacy = {t: f for t in sorted(scan_module(rec.module).custom_call_counts()) if (f := _ffi_form(t, stable))}
    if legacy:
        shown = ", ".join(f"{t} (now {f})" for t, f in legacy.items())
        raise PolicyError(f"{display}: its program calls {shown}: the legacy form of a kernel this JAX provides only "
                          f"in its new form, so it cannot run under this JAX (jaxlib removed the legacy kernels). Run "
                          f"it under the JAX that wrote it, or export the function again with a current JAX.")


def read_serialization(path: str | Path) -> tuple[bytes, jaxser.Serialized]:
    """The bytes of a serialization file and jaxport's reading of them (``FormatError`` when damaged).

    The file is read as every input is (``_fsio.open_for_reading``: a regular file, remembered so that no output of
    the command replaces it), and every dimension it declares is read by jaxport's own parser with the spec
    language's limits (:func:`check_dimensions`) before JAX's parser, which recurses, sees any of them."""
    display = str(path)
    too_big = (f"more than the {MAX_SERIALIZATION_BYTES} a JAX serialization may have here (weights belong beside "
               f"the program, not inside it).")
    with open_for_reading(path, lambda m: UsageError(m.replace(": cannot read:", ": cannot be read:")),
                          missing="JAX serialization") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_SERIALIZATION_BYTES:
            raise FormatError(f"{display}: {size} bytes, {too_big}")
        data = read_at_most(f, MAX_SERIALIZATION_BYTES + 1)
    if len(data) > MAX_SERIALIZATION_BYTES:
        raise FormatError(f"{display}: {len(data)} bytes or more, {too_big}")
    rec = jaxser.read(data, display)
    check_dimensions(rec, display)
    return data, rec


def check_dimensions(rec: jaxser.Serialized, display: str) -> None:
    """Refuse (``FormatError``) a serialization declaring a dimension, in its signature or in a stored VJP's, that
    jaxport's parser does not read: over the length, nesting or size limits of dimension expressions (SPEC.md), or
    not an expression. JAX's own parser, which import and ``verify`` then hand the dimensions to, recurses once per
    parenthesis: 3000 of them raised ``RecursionError`` from it."""
    level: jaxser.Serialized | None = rec
    where = "signature"
    while level is not None:
        for kind, avals in (("input", level.in_avals), ("output", level.out_avals)):
            for i, aval in enumerate(avals):
                for d in aval.shape:
                    try:
                        dimexpr.parse(d)
                    except dimexpr.DimExprError as e:
                        raise FormatError(f"{display}: {kind} {i} of its {where} has the dimension "
                                          f"{dimexpr.clipped(d)}, which is not an expression jaxport reads: "
                                          f"{e}.") from None
        level, where = level.vjp, "VJP" if where == "signature" else f"{where}'s VJP"


def _tuples(node: jaxser.TreeNode) -> jaxser.TreeNode:
    """``node`` with every custom node (a registered dataclass, a namedtuple) as a tuple of its children."""
    children = tuple(_tuples(c) for c in node.children)
    if node.kind == "custom":
        return jaxser.TreeNode("tuple", children, (), None, None)
    return jaxser.TreeNode(node.kind, children, node.names, node.custom_name, node.custom_auxdata)


def local_record(rec: jaxser.Serialized) -> jaxser.Serialized:
    """``rec`` with its custom pytree nodes as tuples, down its VJPs: what any process can build an ``Exported`` of."""
    vjp = local_record(rec.vjp) if rec.vjp is not None else None
    return replace(rec, in_tree=_tuples(rec.in_tree), out_tree=_tuples(rec.out_tree), vjp=vjp)


def flat_call(exported: Any, n_args: int, keywords: list[str]) -> Callable[..., Any]:
    """A function of ``n_args`` positional arrays (``arg0``, ...) and the keyword arrays ``keywords`` (each a pytree
    as ``exported`` takes it) that calls ``exported``: its arguments are regrouped by their leaves, in order."""
    from jax import tree_util

    def program(*args: Any, **kwargs: Any) -> Any:
        leaves = tree_util.tree_leaves((args, {k: kwargs[k] for k in keywords}))
        call_args, call_kwargs = tree_util.tree_unflatten(exported.in_tree, leaves)
        return exported.call(*call_args, **call_kwargs)

    params = [inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(n_args)]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY) for k in keywords]
    program.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    program.__name__ = exported.fun_name
    return program


def _partition(sharding: jaxser.Sharding) -> list[Any]:
    """A named sharding's PartitionSpec as a spec writes it: one entry per leading axis (null, an axis, axes)."""
    return [None if p is None else (p[0] if len(p) == 1 else list(p)) for p in sharding.spec]


def _leaf(aval: jaxser.Aval, sharding: jaxser.Sharding | None) -> Any:
    if sharding is None:
        return f"{aval.dtype}[{', '.join(aval.shape)}]"
    return {"shape": ", ".join(aval.shape), "dtype": aval.dtype, "sharding": _partition(sharding)}


def _spec_tree(node: jaxser.TreeNode, leaves: list[tuple[jaxser.Aval, jaxser.Sharding | None]]) -> Any:
    """The spec's value for one argument pytree: leaves as ``dtype[dims]`` (with their shardings), consuming
    ``leaves`` in order."""
    if node.kind == "leaf":
        return _leaf(*leaves.pop(0))
    if node.kind == "none":
        return {"static": None}
    if node.kind == "dict":
        return {k: _spec_tree(c, leaves) for k, c in zip(node.names, node.children)}
    return [_spec_tree(c, leaves) for c in node.children]  # tuple, list (custom nodes are tuples by now)


def mesh_of(rec: jaxser.Serialized, display: str) -> dict[str, int] | None:
    """The mesh (axis name -> size) of a serialization for several devices, None for one device. Its shardings
    must be stated exactly in a spec: named shardings over one mesh whose sizes multiply to the device count,
    without memory kinds or reductions; anything else is refused (``EntrypointError``) naming why."""
    if rec.nr_devices == 1:
        return None

    def refuse(why: str) -> EntrypointError:
        return EntrypointError(f"{display}: the serialization is for {rec.nr_devices} devices, and {why}, so its "
                               f"shardings cannot be shown to mean the same over this JAX's mesh. Export the "
                               f"function again with jaxport (a spec with mesh: and sharding:).")

    given = [s for s in (*rec.in_shardings, *rec.out_shardings) if s is not None]
    if any(s.kind != "named" or s.mesh is None for s in given):
        raise refuse("its shardings are XLA HloSharding protos (jax before 0.9 wrote them), not a mesh's "
                     "PartitionSpecs")
    meshes = {(s.mesh.axis_names, s.mesh.axis_sizes) for s in given if s.mesh is not None}
    if len(meshes) != 1:
        raise refuse("no sharding names its mesh" if not meshes else "its shardings are over several meshes")
    if any(s.memory_kind not in (None, "device") or s.unreduced or s.reduced for s in given):
        raise refuse("a sharding places an array in host memory or holds a reduction")
    names, sizes = meshes.pop()
    total = 1
    for n in sizes:
        total *= n
    if total != rec.nr_devices:
        raise refuse(f"its mesh ({', '.join(f'{a}={n}' for a, n in zip(names, sizes))}) holds {total} devices")
    return dict(zip(names, sizes))


def signature_spec(rec: jaxser.Serialized, display: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec (as a dict with the YAML's structure) of a serialization's signature, with what ``given`` adds."""
    root = rec.in_tree
    if root.kind != "tuple" or len(root.children) != 2 or root.children[0].kind != "tuple" \
            or root.children[1].kind != "dict":
        raise FormatError(f"{display}: the input pytree is not JAX's (positional arguments, keyword arguments) pair; "
                          f"the file is not a jax.export serialization of a function.")
    mesh = mesh_of(rec, display)
    leaves = list(zip(rec.in_avals, rec.in_shardings or (None,) * len(rec.in_avals)))
    args = [_spec_tree(c, leaves) for c in root.children[0].children]
    kwargs = {k: _spec_tree(c, leaves) for k, c in zip(root.children[1].names, root.children[1].children)}
    variables: list[str] = []
    for a in (*rec.in_avals, *rec.out_avals):
        for d in a.shape:  # each read before (read_serialization: check_dimensions)
            found = dimexpr.variables(dimexpr.parse(d))
            variables += sorted(v for v in found if v not in variables)
    given = dict(given or {})
    dims = dict(given.pop("dims", None) or {})
    unknown = sorted(set(dims) - set(variables))
    if unknown:
        raise SpecError(f"the spec's dims names {', '.join(unknown)}, which {display} "
                        f"does not have (its dimension variables: {', '.join(variables) or 'none'}).")
    spec: dict[str, Any] = {"jaxport": 1, "dims": {v: dims.get(v) or {} for v in variables}, "args": args}
    if kwargs:
        spec["kwargs"] = kwargs
    if mesh is not None:
        spec["mesh"] = mesh
        outs = rec.out_shardings or (None,) * len(rec.out_avals)
        if any(o is not None for o in outs):
            spec["outputs_sharding"] = [None if o is None else _partition(o) for o in outs]
    spec["platforms"] = list(rec.platforms)
    for key in ("name", "constraints", "outputs", "metadata", "allow_custom_calls"):
        if given.get(key) is not None:
            spec[key] = given[key]
    return spec


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _given_spec(spec: Any) -> dict[str, Any] | None:
    """What a user's spec (a file, YAML text or a dict with the YAML's structure) adds to a serialization's
    signature: the keys of ``SPEC_KEYS``; a spec that gives arguments is refused (the file gives them). The merged
    spec is checked as a whole by the spec language's own parser."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        file, value = DICT, dict(spec)
    elif isinstance(spec, str) and ("\n" in spec or spec.lstrip().startswith(("jaxport:", "{"))):
        file, value = TEXT, load(spec, TEXT, SPEC_DOCUMENT)[0]
    elif isinstance(spec, (str, os.PathLike)):
        file = str(spec)
        value = load(SPEC_DOCUMENT.read(Path(spec)), file, SPEC_DOCUMENT)[0]
    else:
        raise UsageError(f"a spec for a JAX serialization is a file, YAML text or a dict, not a "
                         f"{type(spec).__name__}: the file gives the signature, the spec only bounds and names.")
    if not isinstance(value, dict):
        raise SpecError(f"{file}: a spec is a YAML mapping (jaxport: 1, dims: ..., ...).")
    value = _plain(value)
    extra = [k for k in value if k not in SPEC_KEYS]
    if extra:
        raise SpecError(f"{file}: a spec for a JAX serialization gives no {', '.join(extra)}: the file gives the "
                        f"signature. Keep dims (bounds), constraints, outputs (names), name and metadata.")
    return value


def import_serialization(module: str | Path, spec: Any, output: str | Path | None,
                         request: ImportRequest) -> ExportResult:
    """Import a JAX serialization file into an artifact (see the module docstring) with the options of ``request``
    (``calling_convention`` aside, which the caller sets as JAX's); returns an ``ExportResult``."""
    display = str(module)
    written_for = request.written_for()
    data, rec = read_serialization(module)
    mesh_of(rec, display)  # a sharded serialization whose shardings a spec cannot state is refused first
    stem = re.sub(r"\W", "_", Path(module).name.split(".")[0]) or "main"
    fname = stem if stem.isidentifier() else f"_{stem}"
    try:
        check_payload(data, display, fname)
    except FormatError:
        written, readable = stablehlo_version(rec.module), readable_stablehlo()
        if written is None or written <= readable:
            raise
        import jax

        by = f" by jax {rec.jax_version}" if rec.jax_version else ""
        raise FormatError(f"{display}: its program is written as StableHLO {dotted(written)}{by}, newer than the "
                          f"{dotted(readable)} this jax {jax.__version__} reads, and uses what that version lacks. "
                          f"Import it under the JAX that wrote it with --for-jax {jax.__version__} (jaxport import "
                          f"{Path(module).name} --for-jax {jax.__version__}) and call that artifact here.") from None
    warnings: list[str] = []
    try:
        from jax import export

        export.deserialize(bytearray(data))
    except Exception as e:  # noqa: BLE001 - only JAX's refusal of an old serialization is worth a note
        if is_expired_refusal(e):
            warnings.append(f"{display} was written by {writer_of(rec)}, older than this JAX's window (JAX's own "
                            f"reader refuses it); jaxport read it itself and re-serialized it with this JAX.")
    local = local_record(rec)
    if local.in_tree != rec.in_tree or local.out_tree != rec.out_tree:
        warnings.append(f"{display}: custom pytree nodes of the signature are imported as tuples.")
    local, replaced = _recomposed(local)
    _refuse_legacy_kernels(local, display)
    if replaced:
        counts = {t: replaced.count(t) for t in sorted(set(replaced))}
        warnings.append(f"{display}: the custom calls {', '.join(f'{t} ({n}x)' for t, n in counts.items())}, which "
                        f"its StableHLO wrote for CHLO operations, are the CHLO operations again.")
    try:
        exported = exported_from_serialized(local)
    except ValueError as e:
        raise FormatError(f"{display}: cannot be imported: {e}.") from None

    given = _given_spec(spec)
    spec_dict = signature_spec(rec, display, given)
    plats = request.chosen_platforms(list(rec.platforms)) or []
    missing = [p for p in plats if p not in rec.platforms]
    if missing:
        raise UsageError(f"--platform {missing[0]}: {display} holds a program for {', '.join(rec.platforms)} only.")
    spec_dict["platforms"] = plats
    spec_obj: ShapeSpec = as_shape_spec(spec_dict)
    fspec = next(iter(spec_obj.functions.values()))
    name = request.name
    fname = request.function or (name if name is not None and name.isidentifier() else None) or spec_obj.name or fname
    root = rec.in_tree.children
    program = flat_call(exported, len(root[0].children), list(root[1].names))
    entry = Entrypoint(program, f"{relative_path(Path(module))}:main", fname, Path.cwd())
    allowed = request.allowed(spec_obj)
    low = lower.lower(entry, fspec, spec_obj, name=fname, platforms=plats, allow_custom_calls=allowed,
                      strip_locations=request.strip_locations)
    check_custom_calls(display, low.scan, set(allowed), devices=int(low.exported.nr_devices))
    if written_for is not None:
        low = dataclasses.replace(low, exported=for_target(low.exported, written_for, display, fname))
    payload_name = f"functions/{fname}.jaxexport"
    order = rec.vjp_order()
    payload = gradients.serialize(low.exported, order, entry.spec, fname, root=Path.cwd(),
                                  strip=request.strip_locations)
    meta = artifact_metadata(spec_obj.metadata, name, request.version, fname)
    functions = {fname: build_function_entry(low, spec_obj, entry.spec, payload_name, allowed, vjp_order=order)}
    _smoke_run(payload, low.exported, functions[fname], display)
    producer = None if written_for is None else replace(versions(), for_jax=written_for.jax)
    read = tuple(os.fspath(p) for p in (module, spec) if isinstance(p, (str, os.PathLike)))  # never replaced
    contents = Contents(meta, functions, {payload_name: payload}, low.tensors, producer=producer, read=read)
    return write_artifact(output, contents, write_manifest=request.write_manifest, warnings=warnings)


def _smoke_run(payload: bytes, exported: Any, f: Function, display: str) -> None:
    """Compile and run the new program once, in a child, on zeros at the smallest sizes its bounds allow, when it
    calls kernels (custom calls beyond shape assertions) and this machine is one of its platforms: a file whose
    kernels this jaxlib provides under the same name in another calling form (jax 0.5's LAPACK kernels: "Wrong number
    of arguments", or a crash) is refused at import, not at every call."""
    from jax import export

    kernels = [c.target for c in f.custom_calls if c.target != "shape_assertion"]
    if not kernels or export.default_export_platform() not in exported.platforms or exported.nr_devices != 1:
        return
    try:
        env = resolve_dims(f, {})
    except InputError:
        return
    failed = check_runs(payload, [(concrete_shape(i, env), i.dtype) for i in f.inputs])
    if failed is not None:
        dims = ", ".join(f"{v}={n}" for v, n in env.items()) or "its static shapes"
        raise ExportError(f"{display}: this JAX cannot run its program (tried on zeros at {dims}): {failed}. A "
                          f"kernel it calls (a custom call) may exist here in another form: run it under the JAX that "
                          f"wrote it, or export the function again with a current JAX.")


def module_callable(path: str | Path) -> Callable[..., Any]:
    """A serialization file's function, callable with its own pytrees (``verify``'s live side of an artifact
    imported from one), read as ``import_serialization`` reads it."""
    data, rec = read_serialization(path)
    check_payload(data, str(path), "main")
    exported = exported_from_serialized(_recomposed(local_record(rec))[0])
    root = rec.in_tree.children
    return flat_call(exported, len(root[0].children), list(root[1].names))
