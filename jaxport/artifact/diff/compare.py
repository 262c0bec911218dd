"""Comparing two artifacts: every difference, classified as breaking, undecided or compatible for the artifact's
callers.

A change is *breaking* when a caller of the old artifact may fail with, or misread, the new one: an input removed,
renamed or added, a dtype, rank or weak type changed, a constant dimension changed, fewer shapes or values accepted
(bounds, constraints, a declared ``range``), an output removed or changed, a platform or function removed, a new
custom call that JAX does not guarantee stable. It is *compatible* when every such caller keeps working: more shapes
accepted, a platform, function or output added, metadata changed, weights changed with the same names, shapes and
dtypes (one "data change"), the program changed behind the same signature, and a bound tensor added, removed or
reshaped (callers pass the same inputs; such a change breaks only those who rebind the weights, ``breaks ==
"rebinders"``, which ``fails("rebind")`` counts). It is *undecided* when jaxport can prove neither (a bound or
constraint change it cannot decide): ``fails("breaking")`` counts it as breaking, for safety.

Bounds and constraints are compared by the shapes they accept (``shapes``, decided by ``implication`` within
:data:`MAX_EVALUATION_STEPS` for the whole diff; nothing searches without a bound). Functions are matched by name,
or as ``renames`` pairs them (``diff --rename OLD=NEW``).

Programs are compared by the sha256 of their StableHLO text without source locations (imports JAX, and only when
the payloads' bytes differ). The rules are documented in ``specs/CLI.md``; the change kinds are stable names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import dimexpr
from ...errors import UsageError
from ...program.module_scan import module_text
from .. import model
from ..calltree import leaves
from ..container import Artifact, open_artifact
from ..manifest import validate
from ..summary import array_type, range_text
from ..window import compat
from ..window.payload import module_bytes
from .changes import BREAKING, COMPATIBLE, REBINDERS, UNDECIDED, Change, Collector
from .shapes import compare_accepted, norm_dim, rename_dim, renaming

__all__ = ["BREAKING", "COMPATIBLE", "FAIL_ON", "MAX_EVALUATION_STEPS", "UNDECIDED", "Change", "DiffReport",
           "ProgramComparison", "compare_manifests", "diff", "function_pairs", "program_digest"]

#: ``fail_on`` levels: a report fails at "breaking" when a change is breaking or undecided (its callers may break), at
#: "rebind" also when one breaks rebinding its weights, at "any" when anything differs.
FAIL_ON = ("breaking", "rebind", "any", "never")
#: Most steps (operations evaluated, rows derived) that deciding changed bounds and constraints may take, for a whole
#: diff; past it, what was not decided is "undecided".
MAX_EVALUATION_STEPS = 2_000_000


@dataclass(frozen=True)
class ProgramComparison:
    """A function's programs: "identical", "changed" or "not compared"; the payload members' sha256, and the
    sha256 of each StableHLO text without locations when it was computed (the payloads' bytes differ)."""

    status: str
    old_payload_sha256: str | None
    new_payload_sha256: str | None
    old_program_sha256: str | None = None
    new_program_sha256: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "old_payload_sha256": self.old_payload_sha256,
                "new_payload_sha256": self.new_payload_sha256, "old_program_sha256": self.old_program_sha256,
                "new_program_sha256": self.new_program_sha256}


@dataclass
class DiffReport:
    old: str
    new: str
    changes: list[Change] = field(default_factory=list)
    programs: dict[str, ProgramComparison] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return not self.changes

    @property
    def breaking(self) -> list[Change]:
        return [c for c in self.changes if c.severity == BREAKING]

    @property
    def undecided(self) -> list[Change]:
        """Changes jaxport could prove neither breaking nor compatible."""
        return [c for c in self.changes if c.severity == UNDECIDED]

    @property
    def compatible(self) -> list[Change]:
        return [c for c in self.changes if c.severity == COMPATIBLE]

    @property
    def rebinding(self) -> list[Change]:
        """Compatible changes that break rebinding the weights (``jaxport rebind``): a bound tensor's layout."""
        return [c for c in self.changes if c.breaks == REBINDERS]

    def fails(self, fail_on: str) -> bool:
        """Whether the report fails at ``fail_on``: "breaking" counts undecided changes as breaking, "rebind" adds
        the changes that break rebinding."""
        if fail_on in ("breaking", "rebind"):
            return bool(self.breaking or self.undecided or (fail_on == "rebind" and self.rebinding))
        if fail_on == "any":
            return bool(self.changes)
        return False

    def summary(self) -> str:
        if self.identical:
            return f"{self.new} is identical to {self.old}."
        undecided = f"{len(self.undecided)} undecided, " if self.undecided else ""
        n = len(self.rebinding)
        rebind = f", {n} of which break{'s' if n == 1 else ''} rebinding (a bound tensor's layout)" if n else ""
        return (f"{self.new} differs from {self.old}: {len(self.breaking)} breaking, {undecided}"
                f"{len(self.compatible)} compatible change{'s' if len(self.compatible) != 1 else ''}{rebind}.")

    def as_dict(self, fail_on: str = "never") -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "identical": self.identical,
                "breaking": len(self.breaking), "undecided": len(self.undecided), "compatible": len(self.compatible),
                "fail_on": fail_on, "failed": self.fails(fail_on),
                "changes": [c.as_dict() for c in self.changes],
                "programs": {k: p.as_dict() for k, p in self.programs.items()}}


# --- arrays -----------------------------------------------------------------------------------------------------


def _compare_shape(c: Collector, fname: str, what: str, name: str, old: model.Input | model.Output,
                   new: model.Input | model.Output, names: Mapping[str, str], kind_prefix: str) -> None:
    path = f"{kind_prefix}s[{name!r}]"
    if old.dtype != new.dtype:
        c.add(BREAKING, f"{kind_prefix}_dtype_changed", fname, f"{path}.dtype",
              f"{what} {name!r}: dtype {old.dtype} -> {new.dtype}", old.dtype, new.dtype)
    old_shape = [rename_dim(d, names) for d in old.shape]
    new_shape = list(new.shape)
    if len(old_shape) != len(new_shape):
        c.add(BREAKING, f"{kind_prefix}_rank_changed", fname, f"{path}.shape",
              f"{what} {name!r}: rank {len(old_shape)} -> {len(new_shape)} ({array_type(old)} -> "
              f"{array_type(new)})", list(old.shape), list(new.shape))
        return
    for axis, (a, b) in enumerate(zip(old_shape, new_shape)):
        if isinstance(a, int) and isinstance(b, int):
            if a != b:
                c.add(BREAKING, f"{kind_prefix}_dimension_changed", fname, f"{path}.shape[{axis}]",
                      f"{what} {name!r}: shape[{axis}] {a} -> {b} (constant dimension changed)", a, b)
        elif isinstance(a, int):
            severity = COMPATIBLE if kind_prefix == "input" else BREAKING
            c.add(severity, f"{kind_prefix}_dimension_generalized", fname, f"{path}.shape[{axis}]",
                  f"{what} {name!r}: shape[{axis}] {a} -> {b} (now symbolic)", a, b)
        elif isinstance(b, int):
            c.add(BREAKING, f"{kind_prefix}_dimension_changed", fname, f"{path}.shape[{axis}]",
                  f"{what} {name!r}: shape[{axis}] {a} -> {b} (now fixed)", a, b)
        elif norm_dim(a) != norm_dim(b):
            c.add(BREAKING, f"{kind_prefix}_dimension_changed", fname, f"{path}.shape[{axis}]",
                  f"{what} {name!r}: shape[{axis}] {a} -> {b} (dimension expression changed)", a, b)


def _compare_inputs(c: Collector, fname: str, old: model.Function, new: model.Function,
                    names: Mapping[str, str]) -> None:
    old_in = {i.name: i for i in old.inputs}
    new_in = {i.name: i for i in new.inputs}
    removed = [n for n in old_in if n not in new_in]
    added = [n for n in new_in if n not in old_in]
    renamed: dict[str, str] = {}
    for r in removed:
        match = next((a for a in added if a not in renamed.values()
                      and new_in[a].spec_path is not None and new_in[a].spec_path == old_in[r].spec_path), None)
        if match is not None:
            renamed[r] = match
    for r in removed:
        if r in renamed:
            c.add(BREAKING, "input_renamed", fname, f"inputs[{r!r}]", f"input {r!r} renamed to {renamed[r]!r} "
                  f"({old_in[r].spec_path})", r, renamed[r])
        else:
            c.add(BREAKING, "input_removed", fname, f"inputs[{r!r}]", f"input {r!r} removed", r, None)
    for a in added:
        if a not in renamed.values():
            where = f" ({new_in[a].spec_path})" if new_in[a].spec_path else ""
            c.add(BREAKING, "input_added", fname, f"inputs[{a!r}]", f"new input {a!r}{where}: callers of the old "
                  f"artifact do not pass it", None, a)
    for n in old_in:
        target = renamed.get(n, n)
        if target in new_in:
            _compare_shape(c, fname, "input", target, old_in[n], new_in[target], names, "input")
            _compare_weak(c, fname, target, old_in[n], new_in[target])
            _compare_range(c, fname, target, old_in[n], new_in[target], names)
    common_old = [renamed.get(n, n) for n in old_in if renamed.get(n, n) in new_in]
    common_new = [n for n in new_in if n in common_old]
    if common_old != common_new:
        c.add(BREAKING, "inputs_reordered", fname, "inputs", f"inputs reordered: {', '.join(common_old)} -> "
              f"{', '.join(common_new)} (callers passing them by position break)", common_old, common_new)


def _compare_weak(c: Collector, fname: str, name: str, old: model.Input, new: model.Input) -> None:
    """A weakly typed input (a Python number at export) takes any integer or float array whose values it keeps; a
    strict one only its own dtype (or ``--cast``)."""
    if old.weak == new.weak:
        return
    path = f"inputs[{name!r}].weak"
    if old.weak:
        c.add(BREAKING, "input_weak_type_changed", fname, path, f"input {name!r}: no longer weakly typed "
              f"({array_type(old)} -> {array_type(new)}): a caller passing another integer or float dtype whose "
              f"values it kept (np.savez's int64 for a Python int) is refused", True, False)
    else:
        c.add(COMPATIBLE, "input_weak_type_changed", fname, path, f"input {name!r}: now weakly typed "
              f"({array_type(old)} -> {array_type(new)}): it also takes other integer and float dtypes whose values "
              f"it keeps", False, True)


def _compare_range(c: Collector, fname: str, name: str, old: model.Input, new: model.Input,
                   names: Mapping[str, str]) -> None:
    """A declared ``range`` is a contract a caller may be held to (``--check-ranges``, ``check_ranges=True``): one
    that holds fewer values (or is new) is breaking, one that holds more (or is gone) compatible, one whose bounds are
    different dimension expressions undecided. A range taken from a ``like:`` example shapes random inputs only: its
    change is compatible (``verify`` and ``call --random`` draw other values)."""
    def declared(a: model.Input) -> tuple[Any, Any] | None:
        if a.range is None or a.range_example:
            return None
        return tuple(rename_dim(b, names) if isinstance(b, str) and a is old else
                     norm_dim(b) if isinstance(b, str) else b for b in a.range)  # type: ignore[return-value]

    was, now = declared(old), declared(new)
    path = f"inputs[{name!r}].range"
    shown_old, shown_new = range_text(old) or "none", range_text(new) or "none"
    if was == now:
        if (old.range, old.range_example) != (new.range, new.range_example):
            c.add(COMPATIBLE, "input_range_changed", fname, path, f"input {name!r}: the values random inputs are "
                  f"drawn from {shown_old} -> {shown_new} (verify and call --random draw others; no call is held to "
                  f"it)", old.range, new.range)
        return
    if now is None:
        c.add(COMPATIBLE, "input_range_relaxed", fname, path, f"input {name!r}: declared range {shown_old} removed: "
              f"no value is held to it", old.range, new.range)
        return
    if was is None:
        c.add(BREAKING, "input_range_tightened", fname, path, f"input {name!r}: a declared range {shown_new} is new: "
              f"a caller that checks ranges (--check-ranges) is refused a value outside it", old.range, new.range)
        return
    if any(isinstance(b, str) for b in (*was, *now)):
        c.add(UNDECIDED, "input_range_undecided", fname, path, f"input {name!r}: declared range {shown_old} -> "
              f"{shown_new}: bounds that are dimension expressions are not compared", old.range, new.range)
        return
    (lo, hi), (new_lo, new_hi) = was, now
    if new_lo <= lo and hi <= new_hi:
        c.add(COMPATIBLE, "input_range_relaxed", fname, path, f"input {name!r}: declared range {shown_old} -> "
              f"{shown_new}: every value it held is still held", old.range, new.range)
        return
    lost = lo if lo < new_lo or new_hi <= lo else new_hi  # held before (half-open ranges), not now
    c.add(BREAKING, "input_range_tightened", fname, path, f"input {name!r}: declared range {shown_old} -> "
          f"{shown_new}: {lost} was in it and no longer is (a caller that checks ranges, --check-ranges, is refused "
          f"it)", old.range, new.range)


def _tree_shape(node: model.OutputNode | None) -> Any:
    """The output tree's structure without leaf numbers, for comparing containers."""
    if node is None:
        return None
    if node.kind == "output":
        return "output"
    if node.kind == "dict":
        return ("dict", tuple(sorted((k, _tree_shape(v)) for k, v in node.value.items())))
    if node.kind in ("list", "tuple"):
        return (node.kind, tuple(_tree_shape(v) for v in node.value))
    if node.kind == "node":
        return ("node", node.type_name)
    return ("none",)


def _grown_sequences(old: model.OutputNode | None, new: model.OutputNode | None,
                     path: str) -> list[tuple[str, int, int]]:
    """The returned tuples and lists (by where they are) that hold more items in ``new`` than in ``old``: a caller
    unpacking one by position breaks, where a dict or a named node gaining an entry breaks no caller."""
    if old is None or new is None or old.kind != new.kind:
        return []
    if old.kind == "dict":
        return [g for k in old.value if k in new.value
                for g in _grown_sequences(old.value[k], new.value[k], f"{path}[{k!r}]")]
    if old.kind not in ("list", "tuple"):
        return []
    grown = [(f"{path} {old.kind}", len(old.value), len(new.value))] if len(new.value) > len(old.value) else []
    return grown + [g for i, (o, n) in enumerate(zip(old.value, new.value))
                    for g in _grown_sequences(o, n, f"{path}[{i}]")]


def _tree_json(node: model.OutputNode | None) -> Any:
    return None if node is None else node.to_json()


def _compare_outputs(c: Collector, fname: str, old: model.Function, new: model.Function,
                     names: Mapping[str, str]) -> None:
    old_out = {o.name: o for o in old.outputs}
    new_out = {o.name: o for o in new.outputs}
    for n in old_out:
        if n not in new_out:
            c.add(BREAKING, "output_removed", fname, f"outputs[{n!r}]", f"output {n!r} removed", n, None)
        else:
            _compare_shape(c, fname, "output", n, old_out[n], new_out[n], names, "output")
    for n in new_out:
        if n not in old_out:
            c.add(COMPATIBLE, "output_added", fname, f"outputs[{n!r}]", f"new output {n!r}", None, n)
    for path, before, after in _grown_sequences(old.output_tree, new.output_tree, "returned"):
        c.add(BREAKING, "output_structure_changed", fname, "output_tree", f"the {path} grew from {before} to "
              f"{after} items: a caller unpacking it by position breaks", before, after)
    if list(old_out) == list(new_out) and _tree_shape(old.output_tree) != _tree_shape(new.output_tree):
        c.add(BREAKING, "output_structure_changed", fname, "output_tree", "the returned pytree's containers changed "
              "(same outputs, different nesting)", _tree_json(old.output_tree), _tree_json(new.output_tree))


# --- the call tree -----------------------------------------------------------------------------------------------


def _compare_signature(c: Collector, fname: str, old: model.Function, new: model.Function) -> None:
    old_static, new_static = leaves(old.signature, "static"), leaves(new.signature, "static")
    for path in old_static:
        if path in new_static and old_static[path] != new_static[path]:
            c.add(BREAKING, "static_changed", fname, path, f"static argument {path}: {old_static[path]!r} -> "
                  f"{new_static[path]!r} (baked into the program; callers that pass it break)", old_static[path],
                  new_static[path])
    old_bound, new_bound = leaves(old.signature, "bound"), leaves(new.signature, "bound")
    for path in old_bound:
        if path in new_bound and old_bound[path] != new_bound[path]:
            c.add(COMPATIBLE, "bound_source_changed", fname, path, f"weights of {path} bound from "
                  f"{old_bound[path]} -> {new_bound[path]}", old_bound[path], new_bound[path])


# --- functions and the artifact ----------------------------------------------------------------------------------


def _compare_function(c: Collector, fname: str, old: model.Function, new: model.Function,
                      budget: dimexpr.Budget) -> None:
    names = renaming(old, new)
    for v, w in names.items():
        c.add(COMPATIBLE, "dimension_renamed", fname, f"dims[{v!r}]", f"dimension variable {v!r} renamed to {w!r} "
              f"(same input axis)", v, w)
    _compare_inputs(c, fname, old, new, names)
    compare_accepted(c, fname, old, new, names, budget)
    _compare_outputs(c, fname, old, new, names)
    _compare_signature(c, fname, old, new)

    for p in old.platforms:
        if p not in new.platforms:
            c.add(BREAKING, "platform_removed", fname, "platforms", f"platform {p} removed", p, None)
    for p in new.platforms:
        if p not in old.platforms:
            c.add(COMPATIBLE, "platform_added", fname, "platforms", f"platform {p} added", None, p)

    old_cc = {x.target: x for x in old.custom_calls}
    for x in new.custom_calls:
        t = x.target
        if t in old_cc:
            continue
        if x.stability == "guaranteed":
            c.add(COMPATIBLE, "custom_call_added", fname, "custom_calls", f"new custom call {t} (guaranteed stable "
                  f"by JAX)", None, t)
        else:
            c.add(BREAKING, "custom_call_added", fname, "custom_calls", f"new custom call {t}, which JAX does not "
                  f"guarantee stable: consumers need a jaxlib (or kernel) that provides it", None, t)
    new_targets = {x.target for x in new.custom_calls}
    for t in old_cc:
        if t not in new_targets:
            c.add(COMPATIBLE, "custom_call_removed", fname, "custom_calls", f"custom call {t} no longer used", t, None)

    occ, ncc = old.calling_convention_version, new.calling_convention_version
    if occ != ncc:
        if ncc > occ:
            c.add(BREAKING, "calling_convention_raised", fname, "calling_convention_version",
                  f"calling convention {occ} -> {ncc}: consumers whose JAX only runs {occ} cannot load it", occ, ncc)
        else:
            c.add(COMPATIBLE, "calling_convention_lowered", fname, "calling_convention_version",
                  f"calling convention {occ} -> {ncc}", occ, ncc)
    if old.nr_devices != new.nr_devices:
        c.add(BREAKING, "devices_changed", fname, "nr_devices", f"devices {old.nr_devices} -> {new.nr_devices}",
              old.nr_devices, new.nr_devices)
    if old.effects != new.effects:
        c.add(BREAKING, "effects_changed", fname, "effects", "the program's effects changed (how it must be called)",
              old.effects.to_json(), new.effects.to_json())
    if old.stablehlo_version != new.stablehlo_version:
        was, now = compat.oldest_reader(old.stablehlo_version), compat.oldest_reader(new.stablehlo_version)
        if was is not None and now is not None and compat.version_key(now) > compat.version_key(was):
            c.add(BREAKING, "stablehlo_version_raised", fname, "stablehlo_version",
                  f"StableHLO version {old.stablehlo_version} -> {new.stablehlo_version}: JAX reads it from {now} on, "
                  f"no longer from {was}, so consumers on an older JAX cannot load it (export it --for-jax {was} to "
                  f"keep them)", old.stablehlo_version, new.stablehlo_version)
        else:
            c.add(COMPATIBLE, "stablehlo_version_changed", fname, "stablehlo_version",
                  f"StableHLO version {old.stablehlo_version} -> {new.stablehlo_version}", old.stablehlo_version,
                  new.stablehlo_version)
    if old.entrypoint != new.entrypoint:
        c.add(COMPATIBLE, "entrypoint_changed", fname, "entrypoint", f"entry point {old.entrypoint} -> "
              f"{new.entrypoint}", old.entrypoint, new.entrypoint)


def _compare_top(c: Collector, old: model.Manifest, new: model.Manifest) -> None:
    ov, nv = old.format_version, new.format_version
    if ov != nv:
        major = ov.split(".")[0] != nv.split(".")[0]
        c.add(BREAKING if major else COMPATIBLE, "format_changed", None, "format_version",
              f"artifact format {ov} -> {nv}" + (" (a new major version: older readers refuse it)" if major else ""),
              ov, nv)
    op, np_ = old.producer.to_json(), new.producer.to_json()  # compared field by field, as JSON values
    for k in sorted(set(op) | set(np_)):
        if op.get(k) != np_.get(k):
            c.add(COMPATIBLE, "producer_changed", None, f"producer.{k}", f"producer.{k} {op.get(k)!r} -> "
                  f"{np_.get(k)!r}", op.get(k), np_.get(k))
    om, nm = old.metadata, new.metadata
    for k in ("name", "version", "description"):
        if getattr(om, k) != getattr(nm, k):
            c.add(COMPATIBLE, "metadata_changed", None, f"metadata.{k}", f"metadata.{k} {getattr(om, k)!r} -> "
                  f"{getattr(nm, k)!r}", getattr(om, k), getattr(nm, k))
    ol, nl = om.labels, nm.labels
    for k in sorted(set(ol) | set(nl)):
        if ol.get(k) != nl.get(k):
            c.add(COMPATIBLE, "metadata_changed", None, f"metadata.labels[{k!r}]", f"label {k}: {ol.get(k)!r} -> "
                  f"{nl.get(k)!r}", ol.get(k), nl.get(k))
    os_, ns = old.source.spec, new.source.spec
    if os_ != ns:
        c.add(COMPATIBLE, "source_changed", None, "source.spec", f"source spec {os_} -> {ns}", os_, ns)

    ot, nt = old.tensors, new.tensors
    changed_values: list[str] = []
    for k in ot:
        if k not in nt:
            c.add(COMPATIBLE, "weights_layout_changed", None, f"weights.tensors[{k!r}]", f"bound tensor {k!r} "
                  f"removed{_REBIND}", k, None, REBINDERS)
        elif ot[k].dtype != nt[k].dtype or ot[k].shape != nt[k].shape:
            c.add(COMPATIBLE, "weights_layout_changed", None, f"weights.tensors[{k!r}]", f"bound tensor {k!r}: "
                  f"{array_type(ot[k])} -> {array_type(nt[k])}{_REBIND}", array_type(ot[k]), array_type(nt[k]),
                  REBINDERS)
        elif ot[k].sha256 != nt[k].sha256:
            changed_values.append(k)
    for k in nt:
        if k not in ot:
            c.add(COMPATIBLE, "weights_layout_changed", None, f"weights.tensors[{k!r}]", f"new bound tensor {k!r} "
                  f"({array_type(nt[k])}){_REBIND}", None, k, REBINDERS)
    if changed_values:
        # One line for a data change, however many tensors it touches; the digests are in old/new.
        n = len(changed_values)
        c.add(COMPATIBLE, "weights_changed", None, "weights.tensors", f"weights: {n} of {len(ot)} bound tensor"
              f"{'s' if len(ot) != 1 else ''} {'have' if n != 1 else 'has'} new values, with the same names, shapes "
              f"and dtypes (a data change)", {k: ot[k].sha256 for k in changed_values},
              {k: nt[k].sha256 for k in changed_values})


#: What a bound tensor's layout change means, said once in its message.
_REBIND = " (callers pass the same inputs; it breaks rebinding: weights of the old layout no longer fit)"


def program_digest(payload: bytes, where: str, fname: str) -> str:
    """sha256 of a payload's StableHLO module printed without source locations (imports JAX)."""
    text = module_text(module_bytes(payload, where, fname), debug_info=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _names(m: model.Manifest | Iterable[str]) -> list[str]:
    return list(m.functions if isinstance(m, model.Manifest) else m)


def function_pairs(old: model.Manifest | Iterable[str], new: model.Manifest | Iterable[str],
                   renames: Mapping[str, str] | None = None,
                   where: tuple[str, str] = ("the old artifact", "the new artifact")) -> list[tuple[str, str]]:
    """``(old function, new function)`` pairs to compare (of two manifests, or two lists of function names): the
    same name, or as ``renames`` (old -> new) pairs them.

    A rename whose old name is not in ``old``, whose new name is not in ``new``, or that pairs a name twice is a
    UsageError (``where`` names the two artifacts in the message)."""
    old_names, new_names = _names(old), _names(new)
    renames = dict(renames or {})
    for o, n in renames.items():
        for name, side, label in ((o, old_names, where[0]), (n, new_names, where[1])):
            if name not in side:
                raise UsageError(f"--rename {o}={n}: {label} has no function {name!r} (its functions: "
                                 f"{', '.join(side)}).")
    targets = list(renames.values())
    for target in targets:
        if targets.count(target) > 1:
            olds = [o for o, t in renames.items() if t == target]
            raise UsageError(f"--rename: {', '.join(olds)} are all renamed to {target!r}; pair each function once.")
    pairs = []
    for o in old_names:
        match = renames[o] if o in renames else None if o in targets else o  # a renamed target is not matched by name
        if match is not None and match in new_names:
            pairs.append((o, match))
    return pairs


def compare_manifests(old: model.Manifest | Mapping[str, Any], new: model.Manifest | Mapping[str, Any],
                      renames: Mapping[str, str] | None = None) -> list[Change]:
    """Every difference between two manifests (``Artifact.model``, or a manifest's JSON, which is validated first),
    classified; the programs themselves are not compared (see :func:`diff`). ``renames`` (old name -> new name)
    compares a function with one of another name instead of reporting one removed and one added. No JAX."""
    old_m = old if isinstance(old, model.Manifest) else validate(old)
    new_m = new if isinstance(new, model.Manifest) else validate(new)
    return _compare_manifests(old_m, new_m, function_pairs(old_m, new_m, renames))


def _compare_manifests(old: model.Manifest, new: model.Manifest, pairs: list[tuple[str, str]]) -> list[Change]:
    c = Collector()
    _compare_top(c, old, new)
    paired_old, paired_new = {o for o, _ in pairs}, {n for _, n in pairs}
    for fname in old.functions:
        if fname not in paired_old:
            c.add(BREAKING, "function_removed", fname, f"functions[{fname!r}]", f"function {fname!r} removed",
                  fname, None)
    for fname in new.functions:
        if fname not in paired_new:
            if len(old.functions) == 1 < len(new.functions):  # callers named no function; now they must
                c.add(BREAKING, "function_added", fname, f"functions[{fname!r}]", f"function {fname!r} added to a "
                      f"one-function artifact: its callers named no function, and now must choose one (--function "
                      f"NAME, function= in Python)", None, fname)
            else:
                c.add(COMPATIBLE, "function_added", fname, f"functions[{fname!r}]", f"function {fname!r} added",
                      None, fname)
    single = len(old.functions) == 1 and len(new.functions) == 1
    for o, n in pairs:
        if o != n:
            if single:
                c.add(COMPATIBLE, "function_renamed", n, f"functions[{o!r}]", f"function {o!r} renamed to {n!r} "
                      f"(paired by --rename; callers of a one-function artifact do not name it)", o, n)
            else:
                c.add(BREAKING, "function_renamed", n, f"functions[{o!r}]", f"function {o!r} renamed to {n!r} "
                      f"(paired by --rename): callers that select it by name break", o, n)
    budget = dimexpr.Budget(MAX_EVALUATION_STEPS, "comparing the bounds and constraints")
    for o, n in pairs:
        _compare_function(c, n, old.functions[o], new.functions[n], budget)
    return c.changes


def diff(old: str | Path, new: str | Path, *, programs: bool = True,
         renames: Mapping[str, str] | None = None) -> DiffReport:
    """Compare two artifacts (see the module docstring). ``programs=False`` skips the StableHLO comparison (and
    JAX) when the payloads' bytes differ, reporting those programs as "not compared". ``renames`` maps a function
    of ``old`` to the function of ``new`` it is compared with (``diff --rename OLD=NEW``); programs and changes of
    a renamed pair are reported under the new name."""
    report = DiffReport(str(old), str(new))
    c = Collector()
    with open_artifact(old) as a, open_artifact(new) as b:
        om, nm = a.model, b.model
        pairs = function_pairs(om, nm, renames, (str(old), str(new)))
        c.changes = _compare_manifests(om, nm, pairs)
        for oname, fname in pairs:
            of, nf = om.functions[oname], nm.functions[fname]
            comparison = _compare_programs(a, b, of, nf, fname, programs)
            report.programs[fname] = comparison
            if comparison.status == "changed":
                c.add(COMPATIBLE, "program_changed", fname, "payload", "program changed (its StableHLO differs; "
                      "same signature unless listed)", comparison.old_program_sha256, comparison.new_program_sha256)
            elif comparison.status == "not compared":
                c.add(COMPATIBLE, "payload_changed", fname, "payload", "payload bytes differ (programs not compared)",
                      comparison.old_payload_sha256, comparison.new_payload_sha256)
    report.changes = c.changes
    return report


def _compare_programs(a: Artifact, b: Artifact, of: model.Function, nf: model.Function, fname: str,
                      programs: bool) -> ProgramComparison:
    old_payload = a.model.members[of.payload].sha256
    new_payload = b.model.members[nf.payload].sha256
    if old_payload == new_payload:
        # Same bytes: check them anyway, so that a member which does not match its digest is refused.
        a.verify(of.payload)
        b.verify(nf.payload)
        return ProgramComparison("identical", old_payload, new_payload)
    if not programs:
        return ProgramComparison("not compared", old_payload, new_payload)
    old_digest = program_digest(a.read(of.payload), str(a.path), fname)
    new_digest = program_digest(b.read(nf.payload), str(b.path), fname)
    return ProgramComparison("identical" if old_digest == new_digest else "changed", old_payload, new_payload,
                             old_digest, new_digest)
