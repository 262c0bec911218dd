"""Rebinding: an artifact's bound weights replaced by new values, the program kept byte for byte.

``rebind`` reads the new value of each named bound argument from any source a spec's ``bind:`` accepts (``.npz``,
``.safetensors``, ``.npy``, ``model.py:ATTR``) or from an in-memory pytree, names its leaves as an export does
(``params/dense/kernel``), and refuses the first difference in the bound tree's tensor names, shapes, dtypes or
(for in-memory arrays laid out over several devices) shardings: the program takes the tensors as flat arguments of
exactly those types, so anything else needs a new export. The program members are copied as they are; the weights
member is packed again by ``artifact.tensors.pack`` and the manifest keeps every field but the weights' digests, the
members' digests, the recorded source of each rebound argument (in the call tree and, for a top-level argument, in
``source.binds``, both as ``export --bind NAME=SOURCE`` records them, relative to the export root) and, when asked,
``metadata.version``. So rebinding an artifact with weights W gives the bytes of a fresh export of the same spec
with ``--bind NAME=W`` (same JAX), and ``verify`` runs the live function with W.

With ``require_signature``, the artifact is rebound only if it carries a signature by a trusted signer, verified
on the bytes of the descriptor every member is then read from (``signing.check.open_signed``): the new artifact
holds the signed programs, or none is written. It is itself not signed (``signing.carry_notes``).

Non-array leaves of a bound value (Python numbers and strings inside a module) were baked into the program at
export and are not recorded in the artifact: rebind cannot compare them, and a change of them needs a re-export.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .. import dtypes
from .._fsio import open_regular, read_at_most
from ..arrayfiles import subbyte
from ..artifact import calltree, container, tensors
from ..artifact.container import open_artifact
from ..artifact.model import CallNode, Manifest, Signature, StoredTensor, Weights, replace
from ..artifact.output import artifact_output
from ..artifact.private_copy import private_member
from ..artifact.signing.bundle import drop_stale
from ..artifact.signing.check import open_signed
from ..errors import InputError, OutputError, SpecError, UsageError
from ..jaxprivate.exported import read_exported
from ..program.module_scan import stablehlo_version
from ..sharding import text as spec_text
from ..spec import MAX_SPEC_BYTES
from .entry.paths import BIND_FILE_SUFFIXES, IN_MEMORY, RootPaths, is_file_target
from .lowering import gradients
from .weights.bind import flatten_bound, load_bind_source
from .writing.manifest import versions
from .writing.target import Target, for_target, target

#: Names shown in a message before it says ``...``.
_SHOWN = 8


@dataclass
class Rebound:
    """One bound argument that ``rebind`` replaced."""

    name: str
    #: The source as given (a path or ``model.py:ATTR``), or ``IN_MEMORY``.
    source: str
    #: The source as the manifest now records it (relative to the root).
    recorded: str
    #: Its tensors, and those whose values changed.
    tensors: list[str]
    changed: list[str]


@dataclass
class RebindResult:
    """What ``rebind`` wrote: the artifact, its manifest, and each argument rebound."""

    path: Path
    manifest: dict[str, Any]
    size: int
    manifest_path: Path | None
    rebound: list[Rebound]
    #: Members copied byte for byte (the programs).
    kept_members: list[str]
    warnings: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # not the whole manifest: what was written, and from what
        rebound = ", ".join(f"{r.name} <- {r.source} ({len(r.changed)} of {len(r.tensors)} tensors changed)"
                            for r in self.rebound)
        return f"<jaxport.RebindResult {str(self.path)!r} ({self.size} bytes): {rebound}>"


@dataclass
class _BoundArgument:
    """A bound argument of the artifact: its recorded source and its tensors (in the manifest's order)."""

    name: str
    recorded: str
    tensors: list[str]


def bound_arguments(manifest: Manifest) -> dict[str, _BoundArgument]:
    """The artifact's bound arguments by name (the ``/``-joined call-tree path, ``params`` or ``state/params``),
    over all its functions, each with the tensors stored under its name."""
    out: dict[str, _BoundArgument] = {}
    for f in manifest.functions.values():
        for site in calltree.walk(f.signature):
            if site.kind == "bound" and site.name not in out:
                names = [n for n in manifest.tensors if n == site.name or n.startswith(site.name + "/")]
                out[site.name] = _BoundArgument(site.name, str(site.value), names)
    return out


def rebind(artifact: str | Path, bind: Mapping[str, Any], output: str | Path, *, root: str | Path | None = None,
           version: str | None = None, write_manifest: bool = True, for_jax: str | None = None,
           require_signature: str | Path | Iterable[str | Path] | None = None,
           signature: str | Path | None = None) -> RebindResult:
    """Write ``output``: ``artifact`` with the weights of each bound argument in ``bind`` replaced, its programs
    byte-identical.

    ``bind`` maps a bound argument's name (as ``inspect`` lists it: ``params``) to its new value: a source a spec's
    ``bind:`` accepts (a ``.npz``, ``.safetensors`` or ``.npy`` file, or ``model.py:ATTR``, relative to the current
    directory) or an in-memory pytree of arrays (numpy or JAX; a flax or equinox structure). The new tensors must
    have the names, shapes and dtypes of the old (and, for JAX arrays laid out over several devices, their
    shardings); the first difference is refused with an ``InputError`` naming it. An unknown name, or an artifact
    without bound weights, is a ``UsageError``. The manifest records each source as ``export --bind`` does,
    relative to the export root, so that ``verify`` finds the new weights: ``root`` if given, else the first of the
    current directory, the artifact's directory and each new file's directory that holds the spec the artifact
    records (see ``_root``). ``version`` replaces ``metadata.version``. With ``write_manifest``, the manifest is also
    written beside the artifact as ``<output>.manifest.json``. ``output`` (a file, or a directory to put the
    artifact's file name in) is never the input artifact: rebind writes a new file, atomically. ``for_jax`` also
    writes the programs for that older JAX (``writing.target``): the same programs, their StableHLO re-serialized as the
    version it reads, so they are then not byte-identical; the manifest records the target (``producer.for_jax``).
    ``require_signature`` (trusted public keys' or CA certificates' PEM paths): rebind only an artifact signed by one
    of them (the bundle ``ARTIFACT.sig``, or ``signature``), verified on the bytes it is read from
    (``SignatureError`` otherwise, before anything else is read of it).
    """
    if not bind:
        raise UsageError("rebind: no weights to bind: give at least one NAME=SOURCE (e.g. params=finetuned.npz).")
    artifact = Path(artifact)
    if root is not None and not Path(root).is_dir():
        raise UsageError(f"root {root}: not a directory; give the directory the artifact's recorded paths are "
                         f"relative to.")
    if signature is not None and not require_signature:
        raise UsageError("signature names the bundle to check, but no key is trusted: give the trusted public key "
                         "with --require-signature PUBLIC.pem (require_signature= in Python).")
    opened = open_signed(artifact, require_signature, signature)[0] if require_signature else open_artifact(artifact)
    with opened as art:
        outputs = artifact_output(output, artifact.name, manifest=write_manifest, source=artifact, command="rebind")
        out = outputs.path
        arguments = bound_arguments(art.model)
        weights = art.model.weights
        if weights is None or not weights.tensors or not any(a.tensors for a in arguments.values()):
            raise UsageError(f"{artifact}: the artifact has no bound weights; rebind replaces weights bound at export "
                             f"(a spec's 'bind:', or export --bind NAME=SOURCE). Re-export to bind weights.")
        for name in bind:
            if name not in arguments:
                raise UsageError(_unknown_name(artifact, name, arguments))
        old_index = weights.tensors
        hashed, _ = private_member(art, weights.member)  # the bytes kept are the bytes hashed (``private_copy``)
        arrays = tensors.tensor_views(hashed, old_index, str(artifact))
        sharded = _recorded_partition_specs(art.model)
        given: list[tuple[_BoundArgument, str]] = []
        for name, value in bind.items():
            new, source = _new_tensors(name, value, arguments[name], old_index, sharded)
            arrays.update(new)
            given.append((arguments[name], source))
        files = [f for f in (_file_of(source) for _, source in given) if f is not None]
        root_dir, warnings = _root(root, art.model, artifact, files)
        paths = RootPaths(root_dir)
        rebound = [(a, source, _record(paths, source)) for a, source in given]
        warnings += _recording_warnings(paths, rebound, root_dir)
        packed = tensors.pack([tensors.Tensor(n, arrays[n]) for n in old_index])
        manifest = _new_manifest(art.model, packed, rebound, version)
        members = {n: packed if n == weights.member else art.read(n) for n in art.model.members}
        if for_jax is not None:
            manifest = _for_jax(manifest, members, target(for_jax), str(artifact))
        kept = [n for n in members if n != weights.member and (for_jax is None or n not in _payloads(manifest))]
        inputs: list[str | Path] = [artifact, *files]
        outputs.check(inputs)
        raw = container.write_artifact(out, manifest, members)
    stale = drop_stale(out)  # a signature of the file this one replaced: removed, and said
    warnings += [stale] if stale is not None else []
    outputs.write_sidecar(raw, inputs)
    results = [Rebound(a.name, source, recorded, list(a.tensors),
                       [n for n in a.tensors if packed.index[n].sha256 != old_index[n].sha256])
               for a, source, recorded in rebound]
    return RebindResult(out, container.with_members(manifest, members).to_json(), out.stat().st_size, outputs.sidecar,
                        results, kept, warnings)


def _payloads(manifest: Manifest) -> set[str]:
    return {f.payload for f in manifest.functions.values()}


def _for_jax(manifest: Manifest, members: dict[str, Any], t: Target, where: str) -> Manifest:
    """``manifest`` with each function's payload in ``members`` written for ``t`` (and its ``stablehlo_version``),
    the producer recording the target."""
    functions = {}
    for fname, f in manifest.functions.items():
        exported, _ = read_exported(members[f.payload])
        new = for_target(exported, t, where, fname)
        members[f.payload] = gradients.serialize(new, f.vjp_order, where, fname)
        functions[fname] = replace(f, stablehlo_version=stablehlo_version(new.mlir_module_serialized))
    return replace(manifest, functions=functions, producer=replace(versions(), for_jax=t.jax))


def _unknown_name(artifact: Path, name: str, arguments: Mapping[str, _BoundArgument]) -> str:
    listed = "; ".join(f"{a.name} ({len(a.tensors)} tensor{'' if len(a.tensors) == 1 else 's'}, bound from "
                       f"{a.recorded})" for a in arguments.values())
    close = difflib.get_close_matches(name, list(arguments), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"{artifact}: no bound argument {name!r}{hint}; the artifact's bound arguments: {listed}. Give one of "
            f"them as NAME in NAME=SOURCE.")


# --- the new tensors ---------------------------------------------------------------------------------------------


def _is_attribute(source: str) -> bool:
    """``model.py:ATTR`` or ``package.module:ATTR`` (a source that is not a data file)."""
    return not source.lower().endswith(BIND_FILE_SUFFIXES) and ":" in source


def _is_module_style(source: str) -> bool:
    """``package.module:ATTR``: imported from Python's path, not a file."""
    return _is_attribute(source) and not is_file_target(source.rpartition(":")[0])


def _new_tensors(name: str, value: Any, argument: _BoundArgument, old_index: Mapping[str, StoredTensor],
                 sharded: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The arrays of ``name``'s new value by tensor name, checked against the artifact's, and the source as given
    (``IN_MEMORY`` for a pytree)."""
    in_memory = not isinstance(value, (str, os.PathLike))
    source = IN_MEMORY if in_memory else os.fspath(value)
    shown = "the bound value" if in_memory else source
    where = f"{name}={source}"
    if not in_memory:
        value = _typed_void(_load(source, where), name, old_index)
    flat = _flatten(value, name, where)
    if set(flat) != set(argument.tensors):
        unwrapped = _unwrap(value, name)
        if unwrapped is not None:  # keys written by 'extract --weights': the argument's name leads every key
            again = _flatten(unwrapped, name, where)
            if set(again) == set(argument.tensors):
                value, flat = unwrapped, again
    _check_tree(name, argument, flat, old_index, shown)
    if in_memory:
        _check_shardings(value, name, sharded, shown)
    return flat, source


def _load(source: str, where: str) -> Any:
    """The value a source names, relative to the current directory; its problems are input errors."""
    target = source.rpartition(":")[0] if _is_attribute(source) else source
    if not _is_module_style(source) and not Path(target).exists():
        raise InputError(f"{where}: {target} not found (paths are relative to the current directory).")
    try:
        return load_bind_source(source, Path.cwd(), where)
    except SpecError as e:  # the spec's error for a bad bound file; here it is the user's input
        raise InputError(str(e)) from None


def _typed_void(value: Any, name: str, old_index: Mapping[str, StoredTensor], path: str = "") -> Any:
    """A file's arrays with each raw void one (how numpy saves ml_dtypes' types: ``extract --weights`` writes int4
    tensors so to ``.npz``) read as the dtype the artifact stores under its name, when that dtype is one numpy
    saves as void bytes of that width; anything else as it is (refused by the checks that follow)."""
    import numpy as np

    if isinstance(value, Mapping):
        return {k: _typed_void(v, name, old_index, f"{path}/{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype.kind == "V" and not value.dtype.fields and \
            dtypes.from_numpy(value.dtype) is None:
        for full in (f"{name}/{path}" if path else name, path):
            old = old_index.get(full)
            if old is not None and old.dtype in dtypes.raw_void(value.dtype.itemsize):
                typed = value.view(dtypes.to_numpy(old.dtype))
                return subbyte.canonical(typed) if dtypes.BY_NAME[old.dtype].packed else typed
    return value


def _flatten(value: Any, name: str, where: str) -> dict[str, Any]:
    try:
        _, leaves = flatten_bound(value, name, where)
    except SpecError as e:
        raise InputError(str(e)) from None
    return {t.name: t.array for t in leaves}


def _unwrap(value: Any, name: str) -> Any:
    """``value[a][b]`` for the argument ``a/b`` when each level holds only that key, else None."""
    for part in name.split("/"):
        if not isinstance(value, Mapping) or list(value) != [part]:
            return None
        value = value[part]
    return value


def _shape(shape: Any) -> str:
    return str(tuple(int(d) for d in shape))


def _listed(names: list[str]) -> str:
    return ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "") if names else "no tensors"


_KEEPS = "rebind keeps the program, so"


def _check_tree(name: str, argument: _BoundArgument, flat: Mapping[str, Any], old_index: Mapping[str, StoredTensor],
                shown: str) -> None:
    """Refuse the first tensor (in name order) whose presence, shape or dtype differs from the artifact's."""
    for n in sorted(set(flat) | set(argument.tensors)):
        if n not in flat:
            raise InputError(f"{n}: in the artifact, missing from {shown} (which holds {_listed(sorted(flat))}); "
                             f"{_KEEPS} the bound tree's names must match; re-export to change them.")
        if n not in argument.tensors:
            raise InputError(f"{n}: in {shown}, not in the artifact (its '{name}' holds {_listed(argument.tensors)}); "
                             f"{_KEEPS} the bound tree's names must match; remove it, or re-export to change them.")
        old, new = old_index[n], flat[n]
        if list(old.shape) != list(new.shape):
            raise InputError(f"{n}: shape {_shape(old.shape)} in the artifact, {_shape(new.shape)} in {shown}; "
                             f"{_KEEPS} shapes must match; re-export to change them.")
        dtype = dtypes.from_numpy(new.dtype)
        if dtype is None or old.dtype != dtype.name:
            raise InputError(f"{n}: dtype {old.dtype} in the artifact, {new.dtype} in {shown}; "
                             f"{_KEEPS} dtypes must match; convert it (e.g. astype(np.{old.dtype})), or "
                             f"re-export to change them.")


def _recorded_partition_specs(manifest: Manifest) -> dict[str, Any]:
    """The recorded PartitionSpec of each bound tensor of a sharded function (``weights_partition_specs``)."""
    out: dict[str, Any] = {}
    for f in manifest.functions.values():
        if f.mesh is not None:
            for n in f.weights:
                out.setdefault(n, (f.weights_partition_specs or {}).get(n) or [])
    return out


def _normal(spec: Any) -> list[Any]:
    """A PartitionSpec as a comparable list: one-name groups as the name, trailing ``None`` entries dropped."""
    entries = [e[0] if isinstance(e, (list, tuple)) and len(e) == 1 else
               list(e) if isinstance(e, (list, tuple)) else e for e in (spec or [])]
    while entries and entries[-1] is None:
        entries.pop()
    return entries


def _check_shardings(value: Any, name: str, recorded: Mapping[str, Any], shown: str) -> None:
    """Refuse an in-memory JAX array laid out over several devices with a PartitionSpec other than the artifact's
    (which the program was lowered with). Arrays on one device, and numpy arrays, carry no sharding to compare."""
    from jax import tree_util
    from jax.sharding import NamedSharding

    flat, _ = tree_util.tree_flatten_with_path(value)
    for path, leaf in flat:
        sharding = getattr(leaf, "sharding", None)
        if not isinstance(sharding, NamedSharding) or len(sharding.device_set) < 2:
            continue
        n = "/".join([name, *(calltree.key_name(k) for k in path)]) if path else name
        have = [list(e) if isinstance(e, tuple) else e for e in sharding.spec]
        if n in recorded:
            if _normal(recorded[n]) != _normal(have):
                raise InputError(f"{n}: sharding {spec_text(recorded[n])} in the artifact, {spec_text(have)} in "
                                 f"{shown}; {_KEEPS} shardings must match; re-export to change them.")
        elif _normal(have):
            raise InputError(f"{n}: sharding {spec_text(have)} in {shown}, none in the artifact (its program runs on "
                             f"one device); {_KEEPS} shardings must match; re-export with a mesh to shard it.")


# --- the new manifest --------------------------------------------------------------------------------------------


def _file_of(source: str) -> str | None:
    """The file a source reads (``model.py`` of ``model.py:ATTR``); None for a module attribute or a pytree."""
    if source == IN_MEMORY or _is_module_style(source):
        return None
    return source.rpartition(":")[0] if _is_attribute(source) else source


def _root(root: str | Path | None, manifest: Manifest, artifact: Path, files: list[str]
          ) -> tuple[Path, list[str]]:
    """The directory new sources are recorded relative to: ``root`` if given; else the first of the current
    directory, the artifact's directory and each new file's directory that holds the spec the artifact records
    (with its recorded sha256), which is the root the export recorded its paths against; else the current
    directory, with a warning when there is a recorded spec to be consistent with."""
    if root is not None:
        return Path(root), []
    spec, digest = manifest.source.spec, manifest.source.spec_sha256
    if spec is None or not files or not _plain_relative(spec):
        return Path.cwd(), []
    candidates = [Path.cwd(), artifact.parent, *(Path(f).parent for f in files)]
    for directory in candidates:
        if _holds_spec(directory / spec, digest):
            return directory, []
    return Path.cwd(), [f"new sources recorded relative to the current directory (the artifact's spec, {spec}, is "
                        f"not here); --root DIR records them relative to the export's root instead."]


def _plain_relative(text: str) -> bool:
    """A recorded path jaxport looks at: relative, ``/``-separated, without ``..``, control characters or NUL."""
    pure = PurePosixPath(text)
    return (0 < len(text) <= 4096 and not pure.is_absolute() and ".." not in pure.parts and "\\" not in text
            and text.isprintable())


def _holds_spec(path: Path, digest: Any) -> bool:
    """Whether ``path`` is a regular file (of at most a spec's size) with the sha256 ``digest`` (when recorded)."""
    try:
        fd = open_regular(path, OutputError)
        with os.fdopen(fd, "rb") as f:
            data = read_at_most(f, MAX_SPEC_BYTES + 1)
    except (OutputError, OSError):
        return False
    return len(data) <= MAX_SPEC_BYTES and (not isinstance(digest, str) or hashlib.sha256(data).hexdigest() == digest)


def _record(paths: RootPaths, source: str) -> str:
    """The source as the manifest records it, as ``export --bind`` records one (``export.entry.paths``)."""
    if source == IN_MEMORY:
        return source
    return paths.source(source, Path.cwd(), f"the new source {source}")


def _recording_warnings(paths: RootPaths, rebound: list[tuple[_BoundArgument, str, str]], root: Path) -> list[str]:
    """What ``verify`` will need for sources it cannot follow: a value from memory, a file outside the root."""
    out = []
    outside = {recorded for _, recorded, _ in paths.outside}
    for argument, source, recorded in rebound:
        if source == IN_MEMORY:
            out.append(f"'{argument.name}' was bound from an in-memory value; the artifact records {IN_MEMORY!r} as "
                       f"its source, so verify needs --bind {argument.name}=SOURCE to reproduce it.")
        elif recorded.rpartition(":")[0] in outside or recorded in outside:
            out.append(f"'{argument.name}' is bound from {source}, outside the root {root}, so the artifact records "
                       f"it as {recorded}, which verify will not follow (it needs --bind {argument.name}=SOURCE); "
                       f"rebind with --root DIR, a directory holding the artifact's spec and the new weights.")
        elif "/" in argument.name:
            out.append(f"'{argument.name}' is bound inside an argument, where the spec's 'bind:' names "
                       f"{argument.recorded} and the artifact now {recorded}: verify reports that difference unless "
                       f"it is given a spec that binds {recorded} (--shapes).")
    return out


def _new_manifest(old: Manifest, packed: tensors.PackedWeights, rebound: list[tuple[_BoundArgument, str, str]],
                  version: str | None) -> Manifest:
    """``old`` with the weights index repacked, the rebound arguments' recorded sources and, if given,
    ``metadata.version`` replaced (its records serialize as a fresh export's manifest does)."""
    assert old.weights is not None
    recorded = {a.name: r for a, _, r in rebound}
    # A top-level argument is recorded as 'export --bind NAME=SOURCE' records it, so that verify applies it to the
    # recorded spec; a bound value nested in a container has no such form.
    top = {n: r for n, r in recorded.items() if "/" not in n}
    source = replace(old.source, binds={**(old.source.binds or {}), **top}) if top else old.source
    functions = {n: replace(f, signature=_with_sources(f.signature, recorded)) for n, f in old.functions.items()}
    metadata = old.metadata
    if version is not None:
        order = metadata.key_order if "version" in metadata.key_order else (*metadata.key_order, "version")
        metadata = replace(metadata, version=str(version), key_order=order)
    return replace(old, weights=Weights(old.weights.member, dict(packed.index)), source=source, functions=functions,
                   metadata=metadata)


def _with_sources(sig: Signature, recorded: Mapping[str, str]) -> Signature:
    """The call tree with the bound nodes named in ``recorded`` (by ``/``-joined path) bound to their new source."""

    def node(n: CallNode, name: str) -> CallNode:
        if n.kind == "bound" and name in recorded:
            return replace(n, value=recorded[name])
        if n.kind == "dict":
            return replace(n, value={k: node(c, f"{name}/{k}") for k, c in n.value.items()})
        if n.kind == "list":
            return replace(n, value=tuple(node(c, f"{name}/{i}") for i, c in enumerate(n.value)))
        return n

    return Signature(tuple(node(a, a.name or f"arg{i}") for i, a in enumerate(sig.args)),
                     {k: node(c, k) for k, c in sig.kwargs.items()})
