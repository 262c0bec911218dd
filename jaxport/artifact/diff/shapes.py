"""The shapes a function accepts, compared between two artifacts: its dimension variables' bounds and constraints.

A dimension variable renamed consistently (solved from the same input axis under another name) is recognized and
the old function is compared under the new names. Then every bound that got tighter and every constraint that is
new (added, or replacing one over the same variables) is a claim about the new accepted set, and ``implication``
decides whether the old accepted set (old bounds and old constraints) implies it:

- implied: compatible, no shape accepted before is rejected (``bound_implied``, ``constraint_implied``,
  ``constraint_relaxed``);
- refuted: breaking, with a counterexample checked by exact evaluation (``bound_tightened``, ``constraint_added``,
  ``constraint_tightened``);
- undecided: its own severity (``bound_undecided``, ``constraint_undecided``), with the reason.

Bounds that only widened and constraints removed accept more shapes: compatible. The old accepted set is contained
in the new one exactly when every claim is implied, so nothing that rejects an old shape goes unreported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ... import dimexpr
from .. import model
from ..bounds import Bounds
from .changes import BREAKING, COMPATIBLE, UNDECIDED, Collector
from .implication import IMPLIED, REFUTED, System, Verdict, implies
from .implication import UNDECIDED as NOT_DECIDED


def renaming(old: model.Function, new: model.Function) -> dict[str, str]:
    """Old dimension variable -> new name, for variables solved from the same input axis under another name."""
    old_dims, new_dims = old.dims, new.dims
    out: dict[str, str] = {}
    for v, d in old_dims.items():
        if v in new_dims:
            continue
        src = d.derived_from
        for w, e in new_dims.items():
            if w in old_dims or w in out.values():
                continue
            other = e.derived_from
            if src is not None and other is not None and (src.input, src.axis) == (other.input, other.axis):
                out[v] = w
                break
    return out


def _rename_expr(e: dimexpr.Expr, names: Mapping[str, str]) -> dimexpr.Expr:
    if e.op == "var":
        return dimexpr.Expr("var", (), names.get(str(e.value), e.value))
    if not e.args:
        return e
    return dimexpr.Expr(e.op, tuple(_rename_expr(a, names) for a in e.args), e.value)


def rename_dim(d: Any, names: Mapping[str, str]) -> Any:
    """An old dimension under the new variable names, normalized (rendered as JAX prints it)."""
    if isinstance(d, int):
        return d
    return str(_rename_expr(dimexpr.parse(d), names))


def norm_dim(d: Any) -> Any:
    """A dimension normalized (rendered as JAX prints it)."""
    return d if isinstance(d, int) else str(dimexpr.parse(d))


@dataclass(frozen=True)
class _Constraint:
    """A manifest constraint: its text as written, parsed (under the new variable names) and normalized."""

    text: str
    parsed: dimexpr.Constraint
    norm: str
    variables: frozenset[str]


def _constraints(f: model.Function, names: Mapping[str, str]) -> list[_Constraint]:
    # Renamed trees are compared as trees and rendered, never parsed again: a longer name could push the
    # rendering past the parser's length cap.
    out = []
    for text in f.constraints:
        c = dimexpr.parse_constraint(text)
        if _defines(c, f):
            continue
        lhs, rhs = _rename_expr(c.lhs, names), _rename_expr(c.rhs, names)
        parsed = dimexpr.Constraint(lhs, c.op, rhs, text)
        out.append(_Constraint(text, parsed, f"{lhs} {c.op} {rhs}", frozenset(parsed.variables())))
    return out


def _defines(c: dimexpr.Constraint, f: model.Function) -> bool:
    """Whether ``c`` only defines a variable that no input axis has: ``a == c`` with ``a`` in no shape, which JAX
    applies by replacing ``a`` with ``c`` everywhere. It accepts every shape (``a`` takes the value ``c`` has), so
    the accepted sets are compared without it; ``a == c`` and ``c == a`` accept the same shapes."""
    if c.op != "==":
        return False
    for side, other in ((c.lhs, c.rhs), (c.rhs, c.lhs)):
        names = dimexpr.variables(side)
        if len(names) == 1 and str(side) in names and str(side) not in f.dims and \
                str(side) not in dimexpr.variables(other):
            return True
    return False


def _checked(v: Verdict) -> str:
    return "checked by enumerating the bounds" if v.how == "enumerated" else "proved over the bounds"


def _example(v: Verdict) -> str:
    return ", ".join(f"{k}={x}" for k, x in (v.example or {}).items())


#: How an undecided change ends its message.
_UNDECIDED = "undecided: could not prove that every shape accepted before is still accepted"


def _bound_claims(v: str, was: Bounds, now: Bounds) -> list[dimexpr.Constraint]:
    """The sides of ``now`` that are tighter than ``was``, as constraints on ``v``."""
    var = dimexpr.Expr("var", value=v)
    out = []
    if now.lo > was.lo:
        out.append(dimexpr.Constraint(var, ">=", dimexpr.Expr("int", value=now.lo), f"{v} >= {now.lo}"))
    if now.hi is not None and (was.hi is None or now.hi < was.hi):
        out.append(dimexpr.Constraint(var, "<=", dimexpr.Expr("int", value=now.hi), f"{v} <= {now.hi}"))
    return out


def _all(system: System, claims: list[dimexpr.Constraint], budget: dimexpr.Budget) -> Verdict:
    """Whether ``system`` implies every one of ``claims``: the first refutation, else the first undecided."""
    verdicts = [implies(system, claim, budget) for claim in claims]
    for status in (REFUTED, NOT_DECIDED):
        for v in verdicts:
            if v.status == status:
                return v
    return Verdict(IMPLIED, how="enumerated" if any(v.how == "enumerated" for v in verdicts) else "proved")


def compare_accepted(c: Collector, fname: str, old: model.Function, new: model.Function,
                     names: Mapping[str, str], budget: dimexpr.Budget) -> None:
    """Report the bounds and constraints that changed (see the module docstring); ``names`` renames old
    variables."""
    old_bounds = {names.get(v, v): b for v, b in old.bounds.items()}
    new_bounds = new.bounds
    old_all = _constraints(old, names)
    system = System(old_bounds, [x.parsed for x in old_all])
    for v in old_bounds:
        if v not in new_bounds:
            continue
        was, now = old_bounds[v], new_bounds[v]
        if was == now:
            continue
        path, change = f"dims[{v!r}]", f"dimension {v!r}: {was.text(v)} -> {now.text(v)}"
        claims = _bound_claims(v, was, now)
        if not claims:
            c.add(COMPATIBLE, "bound_relaxed", fname, path, f"{change} (more shapes accepted)", was.to_manifest(),
                  now.to_manifest())
            continue
        verdict = _all(system, claims, budget)
        if verdict.status == IMPLIED:
            c.add(COMPATIBLE, "bound_implied", fname, path, f"{change}: every shape accepted before is still "
                  f"accepted (the old constraints imply the new bounds; {_checked(verdict)})", was.to_manifest(),
                  now.to_manifest())
        elif verdict.status == REFUTED:
            c.add(BREAKING, "bound_tightened", fname, path, f"{change} (fewer shapes accepted: {_example(verdict)} "
                  f"was accepted and is now rejected)", was.to_manifest(), now.to_manifest())
        else:
            c.add(UNDECIDED, "bound_undecided", fname, path, f"{change}: {_UNDECIDED} ({verdict.reason})",
                  was.to_manifest(), now.to_manifest())

    old_set = {x.norm: x for x in old_all}
    new_set = {x.norm: x for x in _constraints(new, {})}
    removed = [k for k in old_set if k not in new_set]
    added = [k for k in new_set if k not in old_set]
    pairs: list[tuple[str, str]] = []
    for r in list(removed):
        match = next((a for a in added if new_set[a].variables == old_set[r].variables), None)
        if match is not None:
            pairs.append((r, match))
            removed.remove(r)
            added.remove(match)
    for r in removed:
        c.add(COMPATIBLE, "constraint_removed", fname, "constraints", f"constraint {old_set[r].text!r} removed (more "
              f"shapes accepted)", old_set[r].text, None)
    for a in added:
        after = new_set[a].text
        verdict = implies(system, new_set[a].parsed, budget)
        if verdict.status == IMPLIED:
            c.add(COMPATIBLE, "constraint_implied", fname, "constraints", f"constraint {after!r} added: every shape "
                  f"accepted before is still accepted (the old bounds and constraints imply it; "
                  f"{_checked(verdict)})", None, after)
        elif verdict.status == REFUTED:
            c.add(BREAKING, "constraint_added", fname, "constraints", f"constraint {after!r} added (fewer shapes "
                  f"accepted: {_example(verdict)} was accepted and is now rejected)", None, after)
        else:
            c.add(UNDECIDED, "constraint_undecided", fname, "constraints", f"constraint {after!r} added: "
                  f"{_UNDECIDED} ({verdict.reason})", None, after)
    for r, a in pairs:
        before, after = old_set[r].text, new_set[a].text
        verdict = implies(system, new_set[a].parsed, budget)
        if verdict.status == IMPLIED:
            c.add(COMPATIBLE, "constraint_relaxed", fname, "constraints", f"constraint {before!r} -> {after!r}: "
                  f"every shape accepted before is still accepted ({_checked(verdict)})", before, after)
        elif verdict.status == REFUTED:
            c.add(BREAKING, "constraint_tightened", fname, "constraints", f"constraint {before!r} -> {after!r}: "
                  f"fewer shapes accepted ({_example(verdict)} was accepted and is now rejected)", before, after)
        else:
            c.add(UNDECIDED, "constraint_undecided", fname, "constraints", f"constraint {before!r} -> {after!r}: "
                  f"{_UNDECIDED} ({verdict.reason})", before, after)
