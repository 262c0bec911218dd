"""Comparing two artifacts: every difference, classified as breaking or compatible for the artifact's callers.

A change is *breaking* when a caller of the old artifact may fail with, or misread, the new one: an input removed,
renamed or added, a dtype or rank changed, a constant dimension changed, fewer shapes accepted, an output removed
or changed, a platform or function removed, a new custom call that JAX does not guarantee stable. It is
*compatible* when every such caller keeps working: more shapes accepted, a platform, function or output added,
metadata changed, weights changed with the same shapes, the program changed behind the same signature.

Bounds are compared exactly. Constraints are compared as sets of texts: one added tightens (breaking), one removed
relaxes (compatible), and one replaced by another over the same variables is "changed (may be breaking)", breaking
unless ``implication`` decides it: proved to hold over the old bounds (by intervals), decided exactly for one
variable and linear constraints, or decided by enumerating every assignment within the old bounds (when they are
finite, at most ``implication.MAX_ENUMERATION``, and the whole diff stays within :data:`MAX_EVALUATION_STEPS`).
Nothing searches without a bound. A dimension variable renamed consistently (same input axis) is recognized and
compared under its new name.

Programs are compared by the sha256 of their StableHLO text without source locations (imports JAX, and only when
the payloads' bytes differ). The rules are documented in ``specs/CLI.md``; the change kinds are stable names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import dimexpr
from ..module_scan import module_text
from .bounds import Bounds
from .calltree import leaves
from .container import open_artifact
from .implication import accepts_everything_old_did
from .payload import module_bytes
from .summary import array_type

BREAKING = "breaking"
COMPATIBLE = "compatible"
#: ``fail_on`` levels: a report fails at "breaking" when a change is breaking, at "any" when anything differs.
FAIL_ON = ("breaking", "any", "never")
#: Most evaluation steps (operations evaluated) that enumerating changed constraints may take, for a whole diff;
#: past it, a changed constraint that was not decided otherwise is "changed (may be breaking)".
MAX_EVALUATION_STEPS = 2_000_000


@dataclass(frozen=True)
class Change:
    """One difference. ``kind`` is a stable name (see specs/CLI.md); ``path`` says where, in manifest terms."""

    severity: str
    kind: str
    function: str | None
    path: str
    message: str
    old: Any = None
    new: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "kind": self.kind, "function": self.function, "path": self.path,
                "message": self.message, "old": self.old, "new": self.new}


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
    def compatible(self) -> list[Change]:
        return [c for c in self.changes if c.severity == COMPATIBLE]

    def fails(self, fail_on: str) -> bool:
        if fail_on == "breaking":
            return bool(self.breaking)
        if fail_on == "any":
            return bool(self.changes)
        return False

    def summary(self) -> str:
        if self.identical:
            return f"{self.new} is identical to {self.old}."
        return (f"{self.new} differs from {self.old}: {len(self.breaking)} breaking, {len(self.compatible)} "
                f"compatible change{'s' if len(self.compatible) != 1 else ''}.")

    def as_dict(self, fail_on: str = "never") -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "identical": self.identical,
                "breaking": len(self.breaking), "compatible": len(self.compatible),
                "fail_on": fail_on, "failed": self.fails(fail_on),
                "changes": [c.as_dict() for c in self.changes],
                "programs": {k: p.as_dict() for k, p in self.programs.items()}}


class _Collector:
    def __init__(self) -> None:
        self.changes: list[Change] = []

    def add(self, severity: str, kind: str, function: str | None, path: str, message: str, old: Any = None,
            new: Any = None) -> None:
        self.changes.append(Change(severity, kind, function, path, message, _jsonable(old), _jsonable(new)))


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


# --- dimension variables ---------------------------------------------------------------------------------------


def _renaming(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, str]:
    """Old dimension variable -> new name, for variables solved from the same input axis under another name."""
    old_dims, new_dims = old.get("dims") or {}, new.get("dims") or {}
    out: dict[str, str] = {}
    for v, d in old_dims.items():
        if v in new_dims:
            continue
        src = (d or {}).get("derived_from") or {}
        for w, e in new_dims.items():
            if w in old_dims or w in out.values():
                continue
            other = (e or {}).get("derived_from") or {}
            if src and src.get("input") == other.get("input") and src.get("axis") == other.get("axis"):
                out[v] = w
                break
    return out


def _rename_expr(e: dimexpr.Expr, names: Mapping[str, str]) -> dimexpr.Expr:
    if e.op == "var":
        return dimexpr.Expr("var", (), names.get(str(e.value), e.value))
    if not e.args:
        return e
    return dimexpr.Expr(e.op, tuple(_rename_expr(a, names) for a in e.args), e.value)


def _rename_dim(d: Any, names: Mapping[str, str]) -> Any:
    """An old dimension under the new variable names, normalized (rendered as JAX prints it)."""
    if isinstance(d, int):
        return d
    return str(_rename_expr(dimexpr.parse(d), names))


def _norm_dim(d: Any) -> Any:
    return d if isinstance(d, int) else str(dimexpr.parse(d))


@dataclass(frozen=True)
class _Constraint:
    """A manifest constraint: its text as written, parsed (under the new variable names) and normalized."""

    text: str
    parsed: dimexpr.Constraint
    norm: str
    variables: frozenset[str]


def _constraints(f: Mapping[str, Any], names: Mapping[str, str]) -> list[_Constraint]:
    # Renamed trees are compared as trees and rendered, never parsed again: a longer name could push the
    # rendering past the parser's length cap.
    out = []
    for text in f.get("constraints") or []:
        c = dimexpr.parse_constraint(text)
        lhs, rhs = _rename_expr(c.lhs, names), _rename_expr(c.rhs, names)
        parsed = dimexpr.Constraint(lhs, c.op, rhs, text)
        out.append(_Constraint(text, parsed, f"{lhs} {c.op} {rhs}", frozenset(parsed.variables())))
    return out


def _compare_dims(c: _Collector, fname: str, old: Mapping[str, Any], new: Mapping[str, Any],
                  names: Mapping[str, str]) -> None:
    old_dims = {names.get(v, v): d for v, d in (old.get("dims") or {}).items()}
    new_dims = new.get("dims") or {}
    for v in old_dims:
        if v not in new_dims:
            continue
        was, now = Bounds.of(old_dims[v]), Bounds.of(new_dims[v])
        if was == now:
            continue
        tighter = now.lo > was.lo or (now.hi is not None and (was.hi is None or now.hi < was.hi))
        looser = now.lo < was.lo or (was.hi is not None and (now.hi is None or now.hi > was.hi))
        path = f"dims[{v!r}]"
        if tighter:
            c.add(BREAKING, "bound_tightened", fname, path, f"dimension {v!r}: {was.text(v)} -> {now.text(v)} (fewer "
                  f"shapes accepted)", was.to_manifest(), now.to_manifest())
        elif looser:
            c.add(COMPATIBLE, "bound_relaxed", fname, path, f"dimension {v!r}: {was.text(v)} -> {now.text(v)} (more "
                  f"shapes accepted)", was.to_manifest(), now.to_manifest())


def _compare_constraints(c: _Collector, fname: str, old: Mapping[str, Any], new: Mapping[str, Any],
                         names: Mapping[str, str], budget: dimexpr.Budget) -> None:
    old_all = _constraints(old, names)
    old_set = {x.norm: x for x in old_all}
    new_set = {x.norm: x for x in _constraints(new, {})}
    removed = [k for k in old_set if k not in new_set]
    added = [k for k in new_set if k not in old_set]
    pairs: list[tuple[str, str]] = []
    for r in list(removed):
        rv = old_set[r].variables
        match = next((a for a in added if new_set[a].variables == rv), None)
        if match is not None:
            pairs.append((r, match))
            removed.remove(r)
            added.remove(match)
    for r in removed:
        c.add(COMPATIBLE, "constraint_removed", fname, "constraints", f"constraint {old_set[r].text!r} removed (more "
              f"shapes accepted)", old_set[r].text, None)
    for a in added:
        c.add(BREAKING, "constraint_added", fname, "constraints", f"constraint {new_set[a].text!r} added (fewer "
              f"shapes accepted)", None, new_set[a].text)
    others = [x.parsed for x in old_all]
    for r, a in pairs:
        old_dims = {names.get(v, v): d for v, d in (old.get("dims") or {}).items()}
        verdict, example, how = accepts_everything_old_did(old_dims, old_set[r].parsed, new_set[a].parsed, others,
                                                           budget)
        before, after = old_set[r].text, new_set[a].text
        if verdict is True:
            checked = "checked by enumerating the bounds" if how == "enumerated" else "proved over the bounds"
            c.add(COMPATIBLE, "constraint_relaxed", fname, "constraints", f"constraint {before!r} -> {after!r}: "
                  f"every shape accepted before is still accepted ({checked})", before, after)
        elif verdict is False and example is not None:
            shown = ", ".join(f"{k}={v}" for k, v in example.items())
            c.add(BREAKING, "constraint_tightened", fname, "constraints", f"constraint {before!r} -> {after!r}: "
                  f"fewer shapes accepted ({shown} was accepted and is now rejected)", before, after)
        else:
            c.add(BREAKING, "constraint_changed", fname, "constraints", f"constraint {before!r} -> {after!r}: "
                  f"changed (may be breaking)", before, after)


# --- arrays -----------------------------------------------------------------------------------------------------


def _compare_shape(c: _Collector, fname: str, what: str, name: str, old: Mapping[str, Any], new: Mapping[str, Any],
                   names: Mapping[str, str], kind_prefix: str) -> None:
    path = f"{kind_prefix}s[{name!r}]"
    if old["dtype"] != new["dtype"]:
        c.add(BREAKING, f"{kind_prefix}_dtype_changed", fname, f"{path}.dtype",
              f"{what} {name!r}: dtype {old['dtype']} -> {new['dtype']}", old["dtype"], new["dtype"])
    old_shape = [_rename_dim(d, names) for d in old["shape"]]
    new_shape = list(new["shape"])
    if len(old_shape) != len(new_shape):
        c.add(BREAKING, f"{kind_prefix}_rank_changed", fname, f"{path}.shape",
              f"{what} {name!r}: rank {len(old_shape)} -> {len(new_shape)} ({array_type(dict(old))} -> "
              f"{array_type(dict(new))})", old["shape"], new["shape"])
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
        elif _norm_dim(a) != _norm_dim(b):
            c.add(BREAKING, f"{kind_prefix}_dimension_changed", fname, f"{path}.shape[{axis}]",
                  f"{what} {name!r}: shape[{axis}] {a} -> {b} (dimension expression changed)", a, b)


def _compare_inputs(c: _Collector, fname: str, old: Mapping[str, Any], new: Mapping[str, Any],
                    names: Mapping[str, str]) -> None:
    old_in = {i["name"]: i for i in old["inputs"]}
    new_in = {i["name"]: i for i in new["inputs"]}
    removed = [n for n in old_in if n not in new_in]
    added = [n for n in new_in if n not in old_in]
    renamed: dict[str, str] = {}
    for r in removed:
        match = next((a for a in added if a not in renamed.values()
                      and new_in[a].get("spec_path") is not None
                      and new_in[a].get("spec_path") == old_in[r].get("spec_path")), None)
        if match is not None:
            renamed[r] = match
    for r in removed:
        if r in renamed:
            c.add(BREAKING, "input_renamed", fname, f"inputs[{r!r}]", f"input {r!r} renamed to {renamed[r]!r} "
                  f"({old_in[r].get('spec_path')})", r, renamed[r])
        else:
            c.add(BREAKING, "input_removed", fname, f"inputs[{r!r}]", f"input {r!r} removed", r, None)
    for a in added:
        if a not in renamed.values():
            where = f" ({new_in[a]['spec_path']})" if new_in[a].get("spec_path") else ""
            c.add(BREAKING, "input_added", fname, f"inputs[{a!r}]", f"new input {a!r}{where}: callers of the old "
                  f"artifact do not pass it", None, a)
    for n in old_in:
        target = renamed.get(n, n)
        if target in new_in:
            _compare_shape(c, fname, "input", target, old_in[n], new_in[target], names, "input")
    common_old = [renamed.get(n, n) for n in old_in if renamed.get(n, n) in new_in]
    common_new = [n for n in new_in if n in common_old]
    if common_old != common_new:
        c.add(BREAKING, "inputs_reordered", fname, "inputs", f"inputs reordered: {', '.join(common_old)} -> "
              f"{', '.join(common_new)} (callers passing them by position break)", common_old, common_new)


def _tree_shape(node: Any) -> Any:
    """The output tree's structure without leaf numbers, for comparing containers."""
    if not isinstance(node, dict):
        return None
    if "output" in node:
        return "output"
    if "dict" in node and isinstance(node["dict"], dict):
        return ("dict", tuple(sorted((k, _tree_shape(v)) for k, v in node["dict"].items())))
    for kind in ("list", "tuple"):
        if kind in node and isinstance(node[kind], list):
            return (kind, tuple(_tree_shape(v) for v in node[kind]))
    if "node" in node:
        return ("node", node["node"])
    return ("none",) if "none" in node else None


def _compare_outputs(c: _Collector, fname: str, old: Mapping[str, Any], new: Mapping[str, Any],
                     names: Mapping[str, str]) -> None:
    old_out = {o["name"]: o for o in old["outputs"]}
    new_out = {o["name"]: o for o in new["outputs"]}
    for n in old_out:
        if n not in new_out:
            c.add(BREAKING, "output_removed", fname, f"outputs[{n!r}]", f"output {n!r} removed", n, None)
        else:
            _compare_shape(c, fname, "output", n, old_out[n], new_out[n], names, "output")
    for n in new_out:
        if n not in old_out:
            c.add(COMPATIBLE, "output_added", fname, f"outputs[{n!r}]", f"new output {n!r}", None, n)
    if list(old_out) == list(new_out) and _tree_shape(old.get("output_tree")) != _tree_shape(new.get("output_tree")):
        c.add(BREAKING, "output_structure_changed", fname, "output_tree", "the returned pytree's containers changed "
              "(same outputs, different nesting)", old.get("output_tree"), new.get("output_tree"))


# --- the call tree -----------------------------------------------------------------------------------------------


def _compare_signature(c: _Collector, fname: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    old_static, new_static = leaves(old.get("signature"), "static"), leaves(new.get("signature"), "static")
    for path in old_static:
        if path in new_static and old_static[path] != new_static[path]:
            c.add(BREAKING, "static_changed", fname, path, f"static argument {path}: {old_static[path]!r} -> "
                  f"{new_static[path]!r} (baked into the program; callers that pass it break)", old_static[path],
                  new_static[path])
    old_bound, new_bound = leaves(old.get("signature"), "bound"), leaves(new.get("signature"), "bound")
    for path in old_bound:
        if path in new_bound and old_bound[path] != new_bound[path]:
            c.add(COMPATIBLE, "bound_source_changed", fname, path, f"weights of {path} bound from "
                  f"{old_bound[path]} -> {new_bound[path]}", old_bound[path], new_bound[path])


# --- functions and the artifact ----------------------------------------------------------------------------------


def _compare_function(c: _Collector, fname: str, old: Mapping[str, Any], new: Mapping[str, Any],
                      budget: dimexpr.Budget) -> None:
    names = _renaming(old, new)
    for v, w in names.items():
        c.add(COMPATIBLE, "dimension_renamed", fname, f"dims[{v!r}]", f"dimension variable {v!r} renamed to {w!r} "
              f"(same input axis)", v, w)
    _compare_inputs(c, fname, old, new, names)
    _compare_dims(c, fname, old, new, names)
    _compare_constraints(c, fname, old, new, names, budget)
    _compare_outputs(c, fname, old, new, names)
    _compare_signature(c, fname, old, new)

    old_p, new_p = list(old.get("platforms") or []), list(new.get("platforms") or [])
    for p in old_p:
        if p not in new_p:
            c.add(BREAKING, "platform_removed", fname, "platforms", f"platform {p} removed", p, None)
    for p in new_p:
        if p not in old_p:
            c.add(COMPATIBLE, "platform_added", fname, "platforms", f"platform {p} added", None, p)

    old_cc = {x.get("target"): x for x in old.get("custom_calls") or []}
    for x in new.get("custom_calls") or []:
        t = x.get("target")
        if t in old_cc:
            continue
        if x.get("stability") == "guaranteed":
            c.add(COMPATIBLE, "custom_call_added", fname, "custom_calls", f"new custom call {t} (guaranteed stable "
                  f"by JAX)", None, t)
        else:
            c.add(BREAKING, "custom_call_added", fname, "custom_calls", f"new custom call {t}, which JAX does not "
                  f"guarantee stable: consumers need a jaxlib (or kernel) that provides it", None, t)
    new_targets = {x.get("target") for x in new.get("custom_calls") or []}
    for t in old_cc:
        if t not in new_targets:
            c.add(COMPATIBLE, "custom_call_removed", fname, "custom_calls", f"custom call {t} no longer used", t, None)

    occ, ncc = old.get("calling_convention_version"), new.get("calling_convention_version")
    if isinstance(occ, int) and isinstance(ncc, int) and occ != ncc:
        if ncc > occ:
            c.add(BREAKING, "calling_convention_raised", fname, "calling_convention_version",
                  f"calling convention {occ} -> {ncc}: consumers whose JAX only runs {occ} cannot load it", occ, ncc)
        else:
            c.add(COMPATIBLE, "calling_convention_lowered", fname, "calling_convention_version",
                  f"calling convention {occ} -> {ncc}", occ, ncc)
    if old.get("nr_devices", 1) != new.get("nr_devices", 1):
        c.add(BREAKING, "devices_changed", fname, "nr_devices", f"devices {old.get('nr_devices', 1)} -> "
              f"{new.get('nr_devices', 1)}", old.get("nr_devices", 1), new.get("nr_devices", 1))
    if (old.get("effects") or {}) != (new.get("effects") or {}):
        c.add(BREAKING, "effects_changed", fname, "effects", "the program's effects changed (how it must be called)",
              old.get("effects"), new.get("effects"))
    if old.get("stablehlo_version") != new.get("stablehlo_version"):
        c.add(COMPATIBLE, "stablehlo_version_changed", fname, "stablehlo_version",
              f"StableHLO version {old.get('stablehlo_version')} -> {new.get('stablehlo_version')}",
              old.get("stablehlo_version"), new.get("stablehlo_version"))
    if old.get("entrypoint") != new.get("entrypoint"):
        c.add(COMPATIBLE, "entrypoint_changed", fname, "entrypoint", f"entry point {old.get('entrypoint')} -> "
              f"{new.get('entrypoint')}", old.get("entrypoint"), new.get("entrypoint"))


def _compare_top(c: _Collector, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    ov, nv = str(old.get("format_version")), str(new.get("format_version"))
    if ov != nv:
        major = ov.split(".")[0] != nv.split(".")[0]
        c.add(BREAKING if major else COMPATIBLE, "format_changed", None, "format_version",
              f"artifact format {ov} -> {nv}" + (" (a new major version: older readers refuse it)" if major else ""),
              ov, nv)
    op, np_ = old.get("producer") or {}, new.get("producer") or {}
    for k in sorted(set(op) | set(np_)):
        if op.get(k) != np_.get(k):
            c.add(COMPATIBLE, "producer_changed", None, f"producer.{k}", f"producer.{k} {op.get(k)!r} -> "
                  f"{np_.get(k)!r}", op.get(k), np_.get(k))
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    for k in ("name", "version", "description"):
        if om.get(k) != nm.get(k):
            c.add(COMPATIBLE, "metadata_changed", None, f"metadata.{k}", f"metadata.{k} {om.get(k)!r} -> "
                  f"{nm.get(k)!r}", om.get(k), nm.get(k))
    ol, nl = om.get("labels") or {}, nm.get("labels") or {}
    for k in sorted(set(ol) | set(nl)):
        if ol.get(k) != nl.get(k):
            c.add(COMPATIBLE, "metadata_changed", None, f"metadata.labels[{k!r}]", f"label {k}: {ol.get(k)!r} -> "
                  f"{nl.get(k)!r}", ol.get(k), nl.get(k))
    os_, ns = (old.get("source") or {}).get("spec"), (new.get("source") or {}).get("spec")
    if os_ != ns:
        c.add(COMPATIBLE, "source_changed", None, "source.spec", f"source spec {os_} -> {ns}", os_, ns)

    ot = ((old.get("weights") or {}).get("tensors") or {}) if isinstance(old.get("weights"), dict) else {}
    nt = ((new.get("weights") or {}).get("tensors") or {}) if isinstance(new.get("weights"), dict) else {}
    for k in ot:
        if k not in nt:
            c.add(BREAKING, "weights_layout_changed", None, f"weights.tensors[{k!r}]", f"bound tensor {k!r} removed",
                  k, None)
        elif ot[k].get("dtype") != nt[k].get("dtype") or list(ot[k].get("shape") or []) != list(nt[k].get("shape")
                                                                                               or []):
            c.add(BREAKING, "weights_layout_changed", None, f"weights.tensors[{k!r}]", f"bound tensor {k!r}: "
                  f"{array_type(dict(ot[k]))} -> {array_type(dict(nt[k]))}", array_type(dict(ot[k])),
                  array_type(dict(nt[k])))
        elif ot[k].get("sha256") != nt[k].get("sha256"):
            c.add(COMPATIBLE, "weights_changed", None, f"weights.tensors[{k!r}]", f"bound tensor {k!r}: new values, "
                  f"same shape and dtype", ot[k].get("sha256"), nt[k].get("sha256"))
    for k in nt:
        if k not in ot:
            c.add(BREAKING, "weights_layout_changed", None, f"weights.tensors[{k!r}]", f"new bound tensor {k!r} "
                  f"({array_type(nt[k])})", None, k)


def program_digest(payload: bytes, where: str, fname: str) -> str:
    """sha256 of a payload's StableHLO module printed without source locations (imports JAX)."""
    text = module_text(module_bytes(payload, where, fname), debug_info=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compare_manifests(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every difference between two manifests (validated ones, as ``open_artifact`` returns them), classified; the
    programs themselves are not compared (see :func:`diff`). No JAX."""
    c = _Collector()
    _compare_top(c, old, new)
    for fname in old["functions"]:
        if fname not in new["functions"]:
            c.add(BREAKING, "function_removed", fname, f"functions[{fname!r}]", f"function {fname!r} removed",
                  fname, None)
    for fname in new["functions"]:
        if fname not in old["functions"]:
            c.add(COMPATIBLE, "function_added", fname, f"functions[{fname!r}]", f"function {fname!r} added",
                  None, fname)
    budget = dimexpr.Budget(MAX_EVALUATION_STEPS, "comparing the constraints")
    for fname in old["functions"]:
        if fname in new["functions"]:
            _compare_function(c, fname, old["functions"][fname], new["functions"][fname], budget)
    return c.changes


def diff(old: str | Path, new: str | Path, *, programs: bool = True) -> DiffReport:
    """Compare two artifacts (see the module docstring). ``programs=False`` skips the StableHLO comparison (and
    JAX) when the payloads' bytes differ, reporting those programs as "not compared"."""
    report = DiffReport(str(old), str(new))
    c = _Collector()
    with open_artifact(old) as a, open_artifact(new) as b:
        om, nm = a.manifest, b.manifest
        c.changes = compare_manifests(om, nm)
        for fname in om["functions"]:
            if fname not in nm["functions"]:
                continue
            of, nf = om["functions"][fname], nm["functions"][fname]
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


def _compare_programs(a: Any, b: Any, of: Mapping[str, Any], nf: Mapping[str, Any], fname: str,
                      programs: bool) -> ProgramComparison:
    old_payload = a.manifest["members"][of["payload"]]["sha256"]
    new_payload = b.manifest["members"][nf["payload"]]["sha256"]
    if old_payload == new_payload:
        # Same bytes: check them anyway, so that a member which does not match its digest is refused.
        a.verify(of["payload"])
        b.verify(nf["payload"])
        return ProgramComparison("identical", old_payload, new_payload)
    if not programs:
        return ProgramComparison("not compared", old_payload, new_payload)
    old_digest = program_digest(a.read(of["payload"]), str(a.path), fname)
    new_digest = program_digest(b.read(nf["payload"]), str(b.path), fname)
    return ProgramComparison("identical" if old_digest == new_digest else "changed", old_payload, new_payload,
                             old_digest, new_digest)
