"""A program the localizer can look inside: one StableHLO module with static shapes, everything inlined into
``main``, read as a list of operations in program order, and rewritten to show what it computes.

A :class:`Program` is built from MLIR bytecode (:meth:`Session.program`): JAX's shape refinement
(``refine_polymorphic_shapes``) specializes it and inlines every ``func.call`` (a nested ``jax.jit``, the wrapped
``main`` of an exported program), so that every operation of ``main``'s body is one :class:`Op`, with its location
read as the user's source line (:mod:`.locations`). An operation with regions (a reduction's body, a conditional's
branches) is one operation; a ``stablehlo.while`` is one too, whose body and condition :meth:`Program.loop` makes
programs of their own, run one iteration at a time.

Rewriting never changes what an operation computes; it only adds results:

- :meth:`Program.tapped` returns ``main`` with some values as extra results (*taps*). The compiler sees real
  outputs, so no fusion can hide a tapped value; but a tapped value must be materialized, which can change how its
  neighbours are fused, and so their rounding, within a compiler's usual freedom.
- :meth:`Program.isolated` returns one operation alone, as the ``main`` of a module of its own, its operands (and
  any value its regions capture) as arguments.
- :meth:`Program.loop` returns the body of a ``while`` as a program from the carried values (and the values the body
  captures from ``main``) to the next carried values, and the condition as a program to its flag.

Every module is parsed afresh from bytes for each rewrite, in the one MLIR context of a :class:`Session`, so that a
rewrite never changes the program it came from, and constants of two programs compare by identity (MLIR uniques
attributes in a context). Imports JAX only when it runs.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ... import dtypes
from ...errors import VerificationError
from ...jaxprivate.mlir import make_ir_context
from ...run.buckets.specialize import SINGLE_DEVICE_NO_OPS
from . import locations
from .locations import Where

CONSTANT = "stablehlo.constant"
WHILE = "stablehlo.while"
#: Conditionals (``lax.cond``, ``lax.switch``): their operand chooses the region that runs.
CASE, IF = "stablehlo.case", "stablehlo.if"
#: Operations whose values are constants of the program, whatever its arguments: a constant, an ``iota``.
_SOURCES = (CONSTANT, "stablehlo.iota")
#: Operations never folded into a constant: they have effects, or draw random numbers.
_NOT_FOLDED = ("stablehlo.custom_call", "stablehlo.rng", "stablehlo.rng_bit_generator", "stablehlo.infeed",
               "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv", "stablehlo.create_token",
               "stablehlo.after_all", "stablehlo.optimization_barrier")
#: The name the extracted function takes while the original ``main`` is still there.
_EXTRACTED = "jaxport_localized"


@dataclass(frozen=True)
class TensorType:
    """A tensor's static shape and its element type (jaxport's canonical dtype name)."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        n = dtypes.BY_NAME[self.dtype].itemsize
        for d in self.shape:
            n *= d
        return n

    def text(self) -> str:
        """``f32[4, 784]``."""
        short = dtypes.BY_NAME[self.dtype].short
        return f"{short}[{', '.join(map(str, self.shape))}]"

    def struct(self) -> Any:
        import jax

        return jax.ShapeDtypeStruct(self.shape, dtypes.to_numpy(self.dtype))


@dataclass(frozen=True)
class ValueRef:
    """A value of ``main``'s body: argument ``index`` (``op`` None) or result ``index`` of operation ``op``."""

    op: int | None
    index: int

    def text(self) -> str:
        return f"argument {self.index}" if self.op is None else f"%{self.op}#{self.index}"


@dataclass(frozen=True)
class Op:
    """One operation of ``main``'s body, in program order (``index``)."""

    index: int
    name: str  # stablehlo.dot_general
    results: tuple[TensorType | None, ...]  # None: not a tensor (a token)
    operands: tuple[ValueRef, ...]
    where: Where
    #: A constant's value attribute (compared by identity: MLIR uniques attributes in a context); else None.
    constant: Any = None
    regions: int = 0  # how many regions it has (a conditional's branches, a loop's body and condition)
    #: The operation's attributes as text (``dimensions = array<i64: 1>``), a constant's value left out.
    attributes: str = ""
    #: Computed from constants alone (a constant, an ``iota``, a broadcast of a constant, ...): a value of the program,
    #: not a computation on its arguments; compared where an operation reads it, and copied into a module of one
    #: operation rather than passed to it.
    constant_like: bool = False

    @property
    def short(self) -> str:
        """``dot_general``: the operation's name without its dialect."""
        return self.name.split(".", 1)[-1]

    @property
    def signature(self) -> tuple[Any, ...]:
        """What two programs' operations share when one corresponds to the other: the operation, the types of its
        results and the JAX primitive it comes from (not the line: inserting a line moves every later one)."""
        return self.name, self.results, self.where.primitive

    def tensor_results(self) -> list[int]:
        return [k for k, t in enumerate(self.results) if t is not None]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.results if t is not None)


@dataclass
class Built:
    """A rewritten program ready for a runtime: the module (in the session's context), its argument and result
    types, and a digest of its bytes (what a runtime caches the compiled program by)."""

    module: Any
    inputs: list[TensorType]
    outputs: list[TensorType]
    digest: str


@dataclass
class Loop:
    """A ``while`` of a program as two programs of their own: ``body`` from the carried values, then the values of
    ``main`` it captures (``body_captured``, refs into the enclosing program), to the next carried values; ``cond``
    from the carried values, then its own captured values, to the loop's flag."""

    body: Program
    cond: Program
    body_captured: list[ValueRef]
    cond_captured: list[ValueRef]
    carried: int


class Session:
    """The one MLIR context of a localization: every program is read and rewritten in it."""

    def __init__(self) -> None:
        self.ctx = make_ir_context()

    def program(self, module: bytes, label: str, *, refine: bool = True) -> Program:
        """The program of MLIR bytecode (or text) with static argument shapes: refined and inlined (``refine``),
        Shardy's single-device no-ops dropped, and read."""
        from jax.extend import mlir as jmlir

        data = bytes(jmlir.refine_polymorphic_shapes(module)) if refine else module
        with self.ctx:
            from jax.extend.mlir import ir

            parsed = ir.Module.parse(data)
            _drop_single_device_noops(parsed)
            return Program(self, _bytecode(parsed), label)


def _bytecode(module: Any) -> bytes:
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def _drop_single_device_noops(module: Any) -> None:
    """Shardy's operations that do nothing on one device (a sharding constraint, a mesh), which IREE cannot read:
    a constraint is its operand (as ``buckets.specialize`` does for IREE)."""
    from jax.extend.mlir import ir

    found: list[Any] = []

    def visit(op: Any) -> Any:
        if op.name in SINGLE_DEVICE_NO_OPS:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        if op.name == "sdy.sharding_constraint":
            op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()


def _attributes_text(op: Any) -> str:
    """An operation's attributes as ``name = value`` text, sorted (a constant's value left out)."""
    parts = []
    try:
        attributes = op.attributes
        for k in range(len(attributes)):
            named = attributes[k]
            if op.name == CONSTANT and named.name == "value":
                continue
            text = str(named.attr)
            parts.append(f"{named.name} = {text if len(text) <= 200 else text[:200] + '...'}")
    except (TypeError, AttributeError):  # bindings that cannot list them: compared as equal
        return ""
    return ", ".join(sorted(parts))


def tensor_type(t: Any) -> TensorType | None:
    """The :class:`TensorType` of an MLIR type, or None when it is no ranked tensor of a known element type."""
    from jax.extend.mlir import ir

    try:
        rt = ir.RankedTensorType(t)
    except (ValueError, TypeError):
        return None
    d = dtypes.BY_MLIR.get(str(rt.element_type))
    if d is None or any(s < 0 for s in rt.shape):
        return None
    return TensorType(tuple(int(s) for s in rt.shape), d.name)


def _operation(x: Any) -> Any:
    return getattr(x, "operation", x)


def _main(module: Any) -> Any:
    for op in module.body.operations:
        op = _operation(op)
        if op.name == "func.func" and op.attributes["sym_name"].value == "main":
            return op
    raise VerificationError("the program has no main function to localize in.")


def _body_ops(func: Any) -> list[Any]:
    return [_operation(op) for op in func.regions[0].blocks[0].operations]


class Program:
    """A module whose ``main`` holds every operation (see the module docstring)."""

    def __init__(self, session: Session, source: bytes, label: str):
        self.session = session
        self.source = source
        self.label = label
        self._tapped: dict[tuple[ValueRef, ...], Built] = {}
        with session.ctx:
            module = self._parse()
            main = _main(module)
            block = main.regions[0].blocks[0]
            refs: dict[int, ValueRef] = {hash(a): ValueRef(None, k) for k, a in enumerate(block.arguments)}
            args = [tensor_type(a.type) for a in block.arguments]
            if any(a is None for a in args):
                raise VerificationError(f"{label}: an argument of the program is not a tensor of static shape; "
                                        f"the program cannot be localized.")
            self.args: list[TensorType] = [a for a in args if a is not None]
            self.ops: list[Op] = []
            body = _body_ops(main)
            for i, op in enumerate(body[:-1]):
                for k, r in enumerate(op.results):
                    refs[hash(r)] = ValueRef(i, k)
                constant = op.attributes["value"] if op.name == CONSTANT else None
                operands = tuple(refs.get(hash(v), ValueRef(None, -1)) for v in op.operands)
                folded = op.name in _SOURCES or (
                    bool(operands) and not op.regions and op.name not in _NOT_FOLDED and
                    all(r.op is not None and self.ops[r.op].constant_like for r in operands))
                self.ops.append(Op(i, op.name, tuple(tensor_type(r.type) for r in op.results), operands,
                                   locations.parse(str(op.location)), constant, len(op.regions),
                                   _attributes_text(op), folded))
            self.returns: list[ValueRef] = [refs[hash(v)] for v in body[-1].operands]
            self.results: list[TensorType | None] = [self.value_type(r) for r in self.returns]

    def _parse(self) -> Any:
        from jax.extend.mlir import ir

        return ir.Module.parse(self.source)

    def value_type(self, ref: ValueRef) -> TensorType | None:
        """The type of a value of ``main``'s body (None: not a tensor)."""
        if ref.op is None:
            return self.args[ref.index]
        return self.ops[ref.op].results[ref.index]

    def consumers(self) -> dict[int, list[int]]:
        """Operation index -> the operations that read one of its results, in program order."""
        out: dict[int, list[int]] = {}
        for op in self.ops:
            for ref in op.operands:
                if ref.op is not None and op.index not in out.setdefault(ref.op, []):
                    out[ref.op].append(op.index)
        return out

    def text(self) -> str:
        """The module as text without locations (for messages and a bug report)."""
        with self.session.ctx:
            return str(self._parse().operation.get_asm(enable_debug_info=False))

    # --- rewriting --------------------------------------------------------------------------------------------------

    def tapped(self, taps: Sequence[ValueRef]) -> Built:
        """``main`` returning its results and then the values ``taps`` (the last few kept: a loop's body is tapped
        alike at every iteration)."""
        key = tuple(taps)
        built = self._tapped.get(key)
        if built is None:
            built = self._tap(key)
            self._tapped[key] = built
            while len(self._tapped) > 4:
                del self._tapped[next(iter(self._tapped))]
        return built

    def _tap(self, taps: Sequence[ValueRef]) -> Built:
        from jax.extend.mlir import ir
        from jax.extend.mlir.dialects import func

        with self.session.ctx:
            module = self._parse()
            main = _main(module)
            block = main.regions[0].blocks[0]
            ops = _body_ops(main)
            ret = ops[-1]

            def value(ref: ValueRef) -> Any:
                return block.arguments[ref.index] if ref.op is None else ops[ref.op].results[ref.index]

            extra = [value(r) for r in taps]
            with ir.InsertionPoint(ret), ret.location:
                func.ReturnOp(list(ret.operands) + extra)
            ret.erase()
            ftype = ir.FunctionType(main.attributes["function_type"].value)
            results = list(ftype.results) + [v.type for v in extra]
            main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(ftype.inputs), results))
            if "res_attrs" in main.attributes:
                attrs = list(ir.ArrayAttr(main.attributes["res_attrs"])) + [ir.DictAttr.get({})] * len(extra)
                main.attributes["res_attrs"] = ir.ArrayAttr.get(attrs)
            return self._built(module)

    def _built(self, module: Any) -> Built:
        main = _main(module)
        block = main.regions[0].blocks[0]
        inputs = [tensor_type(a.type) for a in block.arguments]
        outputs = [tensor_type(v.type) for v in _body_ops(main)[-1].operands]
        if any(t is None for t in inputs + outputs):
            raise VerificationError(f"{self.label}: a rewritten program takes or returns a value that is not a tensor "
                                    f"of static shape.")
        data = _bytecode(module)
        return Built(module, [t for t in inputs if t is not None], [t for t in outputs if t is not None],
                     hashlib.sha256(data).hexdigest())

    def isolated(self, index: int) -> tuple[Built, list[ValueRef]]:
        """Operation ``index`` alone as ``main``, and the values of this program its arguments are (its operands,
        then the values of ``main`` its regions read)."""
        with self.session.ctx:
            module = self._parse()
            main = _main(module)
            ops = _body_ops(main)
            op = ops[index]
            refs = _refs(main, ops)
            args = [v for v in op.operands if not _folded(v, refs, self.ops)]
            captured = _extract(module, main, [op], args, list(op.results), refs, self.ops)
            return self._built(module), [refs[hash(v)] for v in args] + captured

    def loop(self, index: int) -> Loop:
        """The ``while`` at ``index`` as its body and condition programs (see :class:`Loop`)."""
        if self.ops[index].name != WHILE:
            raise VerificationError(f"{self.label}: operation {index} is {self.ops[index].name}, not a loop.")
        body, body_captured = self.region(index, 1, "loop body")
        cond, cond_captured = self.region(index, 0, "loop condition")
        return Loop(body, cond, body_captured, cond_captured, len(self.ops[index].results))

    def region(self, index: int, number: int, what: str) -> tuple[Program, list[ValueRef]]:
        """Region ``number`` of operation ``index`` (a loop's body or condition, a conditional's branch) as a program
        of its own: from the region's arguments, then the values of ``main`` it captures (returned, as refs), to what
        it yields."""
        with self.session.ctx:
            module = self._parse()
            main = _main(module)
            ops = _body_ops(main)
            block = ops[index].regions[number].blocks[0]
            inner = [_operation(o) for o in block.operations]
            captured = _extract(module, main, inner[:-1], list(block.arguments), list(inner[-1].operands),
                                _refs(main, ops), self.ops)
            return Program(self.session, _bytecode(module), f"{self.label}, {what}"), captured


def _refs(main: Any, ops: list[Any]) -> dict[int, ValueRef]:
    block = main.regions[0].blocks[0]
    refs = {hash(a): ValueRef(None, k) for k, a in enumerate(block.arguments)}
    for i, op in enumerate(ops[:-1]):
        for k, r in enumerate(op.results):
            refs[hash(r)] = ValueRef(i, k)
    return refs


def _walk(op: Any) -> Iterator[Any]:
    """``op`` and every operation nested in its regions."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = _operation(inner)
                yield inner
                yield from _walk(inner)


def _inside(value: Any, func: Any) -> bool:
    """Whether ``value`` is defined in ``func`` (an argument of a block of it, or a result of an operation in it)."""
    owner = value.owner
    op = _operation(owner.owner) if not hasattr(owner, "results") and hasattr(owner, "owner") else _operation(owner)
    while op is not None:
        if op == func:
            return True
        op = op.parent
    return False


def _folded(value: Any, refs: dict[int, ValueRef], ops: list[Op]) -> bool:
    """Whether a value of ``main``'s body is computed from constants alone (``Op.constant_like``)."""
    ref = refs.get(hash(value))
    return ref is not None and ref.op is not None and ops[ref.op].constant_like


def _extract(module: Any, main: Any, body: list[Any], args: list[Any], outs: list[Any],
             refs: dict[int, ValueRef], records: list[Op]) -> list[ValueRef]:
    """Replace ``main`` in ``module`` by a function of ``args`` (then of the values of ``main`` that ``body``
    captures; values computed from constants alone, ``records`` says which, copied instead) computing ``body``
    (operations cloned in order) and returning ``outs``. Returns the captured values, as refs into the old
    ``main``.

    Every operand of the clones is re-pointed before the old ``main`` is erased: a clone left reading a value of an
    erased operation would corrupt MLIR's use lists."""
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import func

    with ir.InsertionPoint(module.body), main.location:
        new = func.FuncOp(_EXTRACTED, ir.FunctionType.get([a.type for a in args], []))
        new.attributes["sym_visibility"] = ir.StringAttr.get("private")
    new_op = _operation(new)
    with main.location:
        block = new.add_entry_block()
    mapping: dict[int, Any] = {hash(a): block.arguments[k] for k, a in enumerate(args)}
    constants: dict[int, Any] = {}
    captured: list[ValueRef] = []
    captured_args: dict[int, Any] = {}

    prologue: list[Any] = []  # the copied constants, in program order, before everything else

    def outside(v: Any) -> Any:
        key = hash(v)
        owner = _operation(v.owner) if hasattr(v.owner, "results") or hasattr(v.owner, "operation") else None
        if owner is not None and _folded(v, refs, records):
            if key not in constants:
                operands = [outside(o) for o in owner.operands]
                anchor = _first(block) if not prologue else _after(prologue[-1])
                ip = ir.InsertionPoint(anchor) if anchor is not None else ir.InsertionPoint(block)
                clone = _operation(owner.clone(ip=ip))
                prologue.append(clone)
                for i, o in enumerate(operands):
                    clone.operands[i] = o
                for k, r in enumerate(owner.results):
                    constants[hash(r)] = clone.results[k]
            return constants[key]
        if key not in captured_args:
            ref = refs.get(key)
            if ref is None:
                raise VerificationError("an operation reads a value from outside the program's main body; it "
                                        "cannot be localized.")
            captured.append(ref)
            captured_args[key] = block.add_argument(v.type, main.location)
        return captured_args[key]

    for op in body:
        clone = _operation(op.clone(ip=ir.InsertionPoint(block)))
        for k, r in enumerate(op.results):
            mapping[hash(r)] = clone.results[k]
        for inner in [clone, *_walk(clone)]:
            for i, v in enumerate(list(inner.operands)):
                if hash(v) in mapping:
                    inner.operands[i] = mapping[hash(v)]
                elif not _inside(v, new_op):
                    inner.operands[i] = outside(v)
    results = [mapping[hash(v)] if hash(v) in mapping else outside(v) for v in outs]
    with ir.InsertionPoint(block), main.location:
        func.ReturnOp(results)
    new.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [a.type for a in block.arguments], [v.type for v in results]))
    name = main.attributes["sym_name"]
    main.erase()
    new.attributes["sym_name"] = name
    new.attributes["sym_visibility"] = ir.StringAttr.get("public")
    module.operation.verify()
    return captured


def _first(block: Any) -> Any:
    for op in block.operations:
        return op
    return None


def _after(op: Any) -> Any:
    """The operation after ``op`` in its block, or None at its end."""
    found = False
    for other in op.parent.regions[0].blocks[0].operations if op.parent is not None else []:
        other = _operation(other)
        if found:
            return other
        found = other == op
    return None
