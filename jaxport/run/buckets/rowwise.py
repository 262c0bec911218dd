"""Whether a program may be padded along a dimension variable: a proof that it works row by row, or a reason why not.

A deployed IREE module holds one function per shape bucket; a call whose size ``n`` of a variable ``v`` lies between
two buckets can run on the bucket of size ``B > n`` only if padding the inputs to ``B`` and slicing the outputs back
to ``n`` gives what the program gives at ``n``. That holds when every value the program computes is *row-wise in*
``v``: its elements at positions ``< n`` along each axis sized by ``v`` depend only on the inputs' elements at
positions ``< n``, and not on ``v``'s value itself. A reduction or contraction over such an axis, a slice or a
reverse of it, a gather from it, or a constant computed from ``v`` (``x / x.shape[0]``, ``x[-1]``) breaks it.

The proof works on the program specialized to static shapes (what IREE compiles), which has lost which axes are
sized by ``v``. So the program is specialized at two values of ``v`` (the other variables fixed) and the two modules
are walked in lockstep: an axis whose size is ``s1`` in one and ``s2`` in the other is sized by ``v``; an axis whose
size changes otherwise (``2*v``, a merge of ``v`` with another axis) is not allowed to carry data; any other
difference (a constant, an attribute, the operations themselves) means the program uses ``v``'s value. Each
operation then has a rule saying whether it keeps rows apart (``oprules``: elementwise operations, broadcasts and
transposes, reductions and contractions over other axes, batched matrix products, gathers indexed per row; loops
that carry rows unchanged, here); an operation without a rule is assumed not to (conservative: padding is refused,
never wrongly allowed). Padding fills with copies of the last real row (``edge``), so a padded row is a valid input row.

Splitting a batch into calls and merging several requests' rows into one call need more than padding does: rows
``< n`` keep their positions when a batch is padded at its end, but not when it is cut into chunks or appended to
another's rows, so every output row must depend on its own input row only, not on where it stands. The walk marks
each value that depends on a row's position (:class:`Positional`): a ``stablehlo.iota`` along an axis sized by the
variable (``jnp.arange(x.shape[0])``), a value with two axes sized by it (``x @ x.T``: an element pairs two rows),
and whatever is computed from either. The verdict's ``split`` allows both only when padding is allowed, no output
depends on such a value, and the variable sizes axis 0 of every input and output and no other axis of any.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import dimexpr
from ...artifact.model import Function, Input, Output
from ...jaxprivate.mlir import make_ir_context
from . import oprules
from .deadcode import drop_dead

#: A value's state: the axes sized by the variable (the value is row-wise), or why it is not.
State = frozenset[int] | str

#: Attributes whose values may differ between the two specializations, checked by the operation's rule instead.
_SIZED_ATTRIBUTES = {
    "stablehlo.constant": {"value"},
    "stablehlo.slice": {"start_indices", "limit_indices", "strides"},
    "stablehlo.dynamic_slice": {"slice_sizes"},
    "stablehlo.gather": {"slice_sizes"},
}


@dataclass
class Verdict:
    """Whether calls may pad a variable, and where: the input and output axes sized by it, by name; and whether a
    batch may be split into calls along it, or several requests merged into one call (``split``; why not:
    ``split_reason``, the padding's reason where padding is refused)."""

    variable: str
    allowed: bool
    reason: str = ""
    inputs: dict[str, list[int]] = field(default_factory=dict)
    outputs: dict[str, list[int]] = field(default_factory=dict)
    split: bool = False
    split_reason: str = ""

    def __post_init__(self) -> None:
        if not self.allowed and not self.split_reason:
            self.split, self.split_reason = False, self.reason

    def as_dict(self) -> dict[str, Any]:
        """The padding verdict (a run description's ``padding.variables``: IREE modules are padded, never split)."""
        if not self.allowed:
            return {"allowed": False, "reason": self.reason}
        return {"allowed": True, "fill": "edge", "inputs": self.inputs, "outputs": self.outputs}

    def split_dict(self) -> dict[str, Any]:
        """The splitting and merging verdict: ``{"allowed": true}``, or ``{"allowed": false, "reason": ...}``."""
        return {"allowed": True} if self.split else {"allowed": False, "reason": self.split_reason}


class Positional(frozenset[int]):
    """The axes sized by the variable of a value that depends on its rows' positions along them (``why``): row-wise
    for padding, which keeps positions, not for splitting or merging, which move rows. Equal to the plain axes."""

    why: str

    def __new__(cls, axes: frozenset[int], why: str) -> Positional:
        self = super().__new__(cls, axes)
        self.why = why
        return self


def position(state: State) -> str:
    """What a row-wise value's dependence on its rows' positions comes from, or "" (none, or not row-wise)."""
    return state.why if isinstance(state, Positional) else ""


class _Mismatch(Exception):
    """The two specializations are not the same program with other sizes."""


def exact_axes(entries: Sequence[Input | Output], variable: str, what: str) -> tuple[dict[str, list[int]], str]:
    """``{name: [axes]}`` of the axes declared exactly ``variable``, or a reason when an axis uses it in an
    expression (padding ``v`` would have to pad ``2*v`` by another amount)."""
    axes: dict[str, list[int]] = {}
    for entry in entries:
        for i, d in enumerate(entry.shape):
            if not isinstance(d, str):
                continue
            if d.strip() == variable:
                axes.setdefault(entry.name, []).append(i)
            elif variable in dimexpr.variables(dimexpr.parse(d)):
                return {}, f"{what} {entry.name!r} has axis {i} of size {d}, not {variable} itself"
    return axes, ""


def analyze(fn: Function, variable: str, n_weights: int, env: Mapping[str, int], other: int,
            specialize: Callable[[Mapping[str, int]], str | bytes]) -> Verdict:
    """The verdict for ``variable`` of manifest function ``fn``. ``specialize(env)`` gives the program specialized
    to an assignment of every variable (MLIR, text or bytecode: the bound tensors' ``n_weights`` arguments, inputs);
    ``env`` and ``env`` with ``variable = other`` are the two specializations compared."""
    used = [c for c in fn.constraints if variable in dimexpr.parse_constraint(c).variables()]
    if used:
        return Verdict(variable, False, f"the spec constrains {variable} ({used[0]}); a call padded to a bucket "
                                        f"could not be checked against it")
    inputs, why = exact_axes(fn.inputs, variable, "input")
    if why:
        return Verdict(variable, False, why)
    outputs, why = exact_axes(fn.outputs, variable, "output")
    if why:
        return Verdict(variable, False, why)
    s1, s2 = env[variable], other
    texts = specialize(env), specialize({**env, variable: other})
    with make_ir_context():
        from jax.extend.mlir import ir

        m1, m2 = (drop_dead(ir.Module.parse(t)) for t in texts)  # unused constants of the sizes left out
        walk = _Lockstep(m1, m2, s1, s2, variable)
        try:
            reason, moved = walk.main(n_weights, fn, inputs, outputs)
        except _Mismatch as e:
            moved = ""
            reason = f"the program's operations differ between {variable}={s1} and {variable}={s2} ({e})"
    if reason:
        return Verdict(variable, False, reason)
    moved = first_axis_only(fn, variable, inputs, outputs) or moved
    return Verdict(variable, True, "", inputs, {o.name: outputs.get(o.name, []) for o in fn.outputs},
                   split=not moved, split_reason=moved)


def first_axis_only(fn: Function, variable: str, inputs: Mapping[str, list[int]],
                    outputs: Mapping[str, list[int]]) -> str:
    """Why a batch may not be split or merged along ``variable`` for the shapes alone (``{name: [axes]}`` sized by
    it, :func:`exact_axes`), or "": it must size axis 0 of every input and output, and no other axis of any."""
    for what, entries, axes in (("input", fn.inputs, inputs), ("output", fn.outputs, outputs)):
        for entry in entries:
            got = list(axes.get(entry.name, []))
            shown = f"[{', '.join(map(str, entry.shape))}]"
            if 0 not in got:
                return f"{what} {entry.name!r} (shape {shown}) does not have {variable} as its axis 0"
            if got != [0]:
                return (f"{what} {entry.name!r} (shape {shown}) has {variable} as axis {got[1]} too: its rows are not "
                        f"one per row of the batch")
    return ""


def _functions(module: Any) -> dict[str, Any]:
    from jax.extend.mlir import ir

    return {ir.SymbolTable.get_symbol_name(op.operation).value: op.operation for op in module.body.operations
            if op.operation.name == "func.func"}

class _Lockstep:
    """Walks two specializations of one program together, giving each value of the first a :data:`State`."""

    def __init__(self, m1: Any, m2: Any, s1: int, s2: int, variable: str):
        self.f1, self.f2 = _functions(m1), _functions(m2)
        self.s1, self.s2, self.v = s1, s2, variable
        self.state: dict[Any, State] = {}
        self.memo: dict[tuple[str, tuple[State, ...], tuple[str, ...]], list[State]] = {}

    def main(self, n_weights: int, fn: Function, inputs: dict[str, list[int]],
             outputs: dict[str, list[int]]) -> tuple[str, str]:
        """Why the program is not row-wise in the variable, or ""; and when it is, why an output depends on its
        rows' positions (:class:`Positional`), or ""."""
        b1, b2 = self.bodies("main", "no main function")
        args: list[State] = []
        for i, (a1, a2) in enumerate(zip(b1.arguments, b2.arguments)):
            st = self.axes(a1, a2)
            if i >= n_weights and i - n_weights < len(fn.inputs):
                name = fn.inputs[i - n_weights].name
                if st != frozenset(inputs.get(name, [])):
                    return f"input {name!r}: its axes sized by {self.v} are not those its shape declares", ""
            elif st != frozenset():
                return f"argument {i} grows with {self.v}", ""
            args.append(st)
        results = self.call("main", args)
        for o, st in zip(fn.outputs, results):
            if isinstance(st, str):
                return f"output {o.name!r} depends on {st}", ""
            if st != frozenset(outputs.get(o.name, [])):
                return f"output {o.name!r}: its axes sized by {self.v} are not those its shape declares", ""
        moved = next((f"output {o.name!r} depends on {position(st)}" for o, st in zip(fn.outputs, results)
                      if position(st)), "")
        return "", moved

    def axes(self, x1: Any, x2: Any) -> State:
        """The axes of a value sized by the variable, from its types in the two specializations."""
        t1, t2 = oprules.shape(x1), oprules.shape(x2)
        if t1 is None or t2 is None:
            if str(x1.type) != str(x2.type):
                raise _Mismatch(f"types {x1.type} and {x2.type}")
            return frozenset()
        if len(t1) != len(t2):
            raise _Mismatch(f"types {x1.type} and {x2.type}")
        found = set()
        for i, (a, b) in enumerate(zip(t1, t2)):
            if a == b:
                continue
            if (a, b) != (self.s1, self.s2):
                return (f"a value whose axis {i} grows with {self.v} other than as {self.v} itself ({a} at "
                        f"{self.v}={self.s1}, {b} at {self.v}={self.s2}): rows merged or split")
            found.add(i)
        return frozenset(found)

    def bodies(self, name: str, missing: str) -> tuple[Any, Any]:
        """The entry blocks of function ``name`` in the two specializations (a mismatch ``missing`` when either has
        none)."""
        if name not in self.f1 or name not in self.f2:
            raise _Mismatch(missing)
        return self.f1[name].regions[0].blocks[0], self.f2[name].regions[0].blocks[0]

    def get(self, x: Any) -> State:
        try:
            return self.state[x]
        except KeyError:
            raise _Mismatch("a value defined outside the walk") from None

    def call(self, name: str, args: list[State]) -> list[State]:
        key = (name, tuple(args), tuple(map(position, args)))
        if key in self.memo:
            return self.memo[key]
        b1, b2 = self.bodies(name, f"no function {name}")
        for a1, a2, st in zip(b1.arguments, b2.arguments, args):
            own = self.axes(a1, a2)
            self.state[a1] = st if isinstance(st, str) or st == own else f"a call of {name} that moves rows"
        self.memo[key] = self.block(b1, b2)
        return self.memo[key]

    def region(self, r1: Any, r2: Any, args: list[State]) -> list[State]:
        blocks1, blocks2 = list(r1.blocks), list(r2.blocks)
        if len(blocks1) != 1 or len(blocks2) != 1:
            raise _Mismatch("a region of several blocks")
        for a1, st in zip(blocks1[0].arguments, args):
            self.state[a1] = st
        return self.block(blocks1[0], blocks2[0])

    def block(self, b1: Any, b2: Any) -> list[State]:
        ops1, ops2 = [o.operation for o in b1.operations], [o.operation for o in b2.operations]
        if len(ops1) != len(ops2):
            raise _Mismatch(f"{len(ops1)} and {len(ops2)} operations in a block")
        for o1, o2 in zip(ops1, ops2):
            if (o1.name != o2.name or len(o1.operands) != len(o2.operands) or len(o1.results) != len(o2.results)
                    or len(o1.regions) != len(o2.regions)):
                raise _Mismatch(f"{o1.name} against {o2.name}")
            if o1.name in ("func.return", "stablehlo.return"):
                return [self.get(x) for x in o1.operands]
            for r1, st in zip(o1.results, self.operation(o1, o2)):
                self.state[r1] = st
        return []

    def operation(self, o1: Any, o2: Any) -> list[State]:
        """The states of an operation's results: its rule's, marked :class:`Positional` where they depend on rows'
        positions (:meth:`positional`)."""
        ins = [self.get(x) for x in o1.operands]
        states = self.rule(o1, o2, ins)
        why = self.positional(o1, ins, states)
        return [Positional(s, why) if why and not isinstance(s, str) and not position(s) else s for s in states]

    def positional(self, o1: Any, ins: list[State], states: list[State]) -> str:
        """Why an operation's results depend on rows' positions, or "": an operand that does (a value its regions
        compute included), an iota along an axis sized by the variable, or a result with two such axes (an element
        that pairs two rows)."""
        why = next((position(s) for s in [*ins, *states] if position(s)), "") or self.inner(o1)
        if why:
            return why
        if o1.name == "stablehlo.iota" and states and not isinstance(states[0], str) and \
                oprules.int_attr(o1, "iota_dimension") in states[0]:
            return f"the rows' positions along {self.v} (stablehlo.iota: an arange over {self.v})"
        if any(not isinstance(s, str) and len(s) > 1 for s in states):
            return f"a value with two axes sized by {self.v}, whose elements pair rows ({o1.name})"
        return ""

    def inner(self, op: Any) -> str:
        """Why a value computed in an operation's regions depends on rows' positions, or ""."""
        for block in (b for r in op.regions for b in r.blocks):
            values = [*block.arguments, *(r for o in block.operations for r in o.operation.results)]
            why = next((position(self.state[x]) for x in values if x in self.state and position(self.state[x])),
                       "") or next((w for w in (self.inner(o.operation) for o in block.operations) if w), "")
            if why:
                return why
        return ""

    def rule(self, o1: Any, o2: Any, ins: list[State]) -> list[State]:
        """The states of an operation's results by its rule (see the module docstring)."""
        name = o1.name
        outs = [self.axes(r1, r2) for r1, r2 in zip(o1.results, o2.results)]
        skip = _SIZED_ATTRIBUTES.get(name, set())
        a1, a2 = oprules.attributes(o1), oprules.attributes(o2)
        for key in sorted(set(a1) | set(a2)):
            if key not in skip and (key not in a1 or key not in a2 or a1[key] != a2[key]):
                return [f"an operation whose {key} changes with {self.v}: it works across {self.v} or uses its "
                        f"value ({name})"] * len(outs)
        if name == "func.call":
            from jax.extend.mlir import ir

            got = self.call(oprules.attr(o1, "callee", ir.FlatSymbolRefAttr).value, ins)
            return [g if isinstance(g, str) or g == o else f"a call that moves rows ({name})" for g, o in
                    zip(got, outs)]
        if o1.regions:
            special = self.regions(o1, o2, ins, outs)
            if special is not None:
                return special
        bad = next((s for s in ins if isinstance(s, str)), None)
        if bad is not None:
            return [bad] * len(outs)
        bad = next((s for s in outs if isinstance(s, str)), None)
        if bad is not None:
            return [bad] * len(outs)
        axes_in = [s for s in ins if not isinstance(s, str)]
        axes_out = [s for s in outs if not isinstance(s, str)]
        why = oprules.rule(o1, o2, axes_in, axes_out, self.s1, self.s2)
        if why:
            return [f"{why.replace('{v}', self.v)} ({name})"] * len(outs)
        return list(outs)

    def regions(self, o1: Any, o2: Any, ins: list[State], outs: list[State]) -> list[State] | None:
        """Operations with regions: loops and branches walk theirs; others (reduction bodies, comparators) must
        compute from their scalar arguments only. None: the operation's own rule decides next."""
        name = o1.name
        if name == "stablehlo.while":
            (cond,) = self.region(o1.regions[0], o2.regions[0], ins) or [frozenset()]
            body = self.region(o1.regions[1], o2.regions[1], ins)
            if isinstance(cond, str):
                return [f"a loop whose condition depends on {cond}"] * len(outs)
            result: list[State] = []
            for st, yielded, own in zip(ins, body, outs):
                if isinstance(st, str):
                    result.append(st)
                elif isinstance(yielded, str):
                    result.append(yielded)
                else:
                    result.append(st if yielded == st == own else f"a loop that moves rows ({name})")
            return result
        if name in ("stablehlo.if", "stablehlo.case"):
            if isinstance(ins[0], str):
                return [f"a branch chosen by {ins[0]}"] * len(outs)
            branches = [self.region(r1, r2, []) for r1, r2 in zip(o1.regions, o2.regions)]
            result = []
            for i, own in enumerate(outs):
                seen = [b[i] for b in branches]
                worst = next((s for s in seen if isinstance(s, str)), None)
                result.append(worst if worst is not None else own if all(s == own for s in seen)
                              else f"branches that lay rows out differently ({name})")
            return result
        for r1, r2 in zip(o1.regions, o2.regions):
            blocks = list(r1.blocks)
            got = self.region(r1, r2, [frozenset()] * (len(blocks[0].arguments) if blocks else 0))
            bad = next((s for s in got if isinstance(s, str) or s), None)
            if bad is not None:
                return [bad if isinstance(bad, str) else f"a {name} body that reads other values"] * len(outs)
        return None
