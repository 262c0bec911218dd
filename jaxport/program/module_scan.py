"""Reading a lowered StableHLO module: custom calls, large constants, shape assertions, locations.

The module is walked with the MLIR Python bindings that JAX ships (``jax.extend.mlir``'s, imported without the rest
of ``jax.extend``: ``jaxprivate.mlir.mlir_ir``), never printed whole, so a
module with hundreds of megabytes of constants is scanned without building its text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..jaxprivate.mlir import (
    deserialize_portable_artifact,
    mlir_ir,
    serialize_portable_artifact,
    serialize_with_sdy,
    stablehlo_dialect,
)
from .rules import DEVICE_ATTRIBUTES, REPLICA_GROUP_PADDING, refused_op

_DTYPE_BITS = re.compile(r"^(?:[fiu]|bf|ui|si)(\d+)$")
_LOC_FILE = re.compile(r'"([^"]+)":(\d+):(\d+)')


@dataclass(frozen=True)
class CustomCall:
    target: str
    location: str


@dataclass(frozen=True)
class Constant:
    type: str
    nbytes: int
    location: str


@dataclass(frozen=True)
class Collective:
    """An operation that names devices: its ``replica_groups`` or ``source_target_pairs`` (``attribute``), by the
    smallest and largest device id in it (ignoring the ``-1`` that pads replica groups of unequal sizes)."""

    name: str
    attribute: str
    smallest: int
    largest: int
    location: str


@dataclass
class ModuleScan:
    custom_calls: list[CustomCall] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    shape_assertions: list[str] = field(default_factory=list)
    operations: int = 0  # every operation of the module, nested ones included
    #: Operations that talk to the host or a peer while the program runs (``rules``): (name, location).
    host_communication: list[tuple[str, str]] = field(default_factory=list)
    #: The devices the module says it runs on (``mhlo.num_partitions`` times ``mhlo.num_replicas``; 1 without them).
    devices: int = 1
    #: Operations that name devices (``rules.DEVICE_ATTRIBUTES``), with the device ids they name.
    collectives: list[Collective] = field(default_factory=list)

    def custom_call_counts(self) -> Counter:
        return Counter(c.target for c in self.custom_calls)

    def constant_bytes(self) -> int:
        return sum(c.nbytes for c in self.constants)


def short_location(loc: str) -> str:
    """``file.py:12:3`` from an MLIR location (its innermost file position), or ``unknown location``."""
    found = _LOC_FILE.findall(loc)
    if not found:
        return "unknown location"
    f, line, col = found[0]
    return f"{f}:{line}:{col}"


def _element_bits(element: str) -> int:
    if element == "i1":
        return 8
    if element.startswith("complex<"):
        return 2 * _element_bits(element[len("complex<"):-1])
    if element.startswith("f8") or element.startswith("f4") or element.startswith("f6"):
        return 8
    m = _DTYPE_BITS.match(element)
    return int(m.group(1)) if m else 32


def _tensor_nbytes(type_str: str) -> int:
    m = re.match(r"^tensor<(.*)>$", type_str)
    if not m:
        return 0
    parts = m.group(1).split("x")
    count = 1
    for p in parts[:-1]:
        if not p.isdigit():
            return 0
        count *= int(p)
    return count * _element_bits(parts[-1]) // 8


def _device_ids(ir: object, attr: object, padding: bool) -> tuple[int, int] | None:
    """The smallest and largest device id of a dense integer attribute (``padding``: without replica groups' -1),
    or None when it names none; an attribute of another form (a mesh's axes) is left to XLA's verifier."""
    try:
        dense = ir.DenseIntElementsAttr(attr)  # type: ignore[attr-defined]
    except ValueError:
        return None
    ids = [int(dense[i]) for i in range(len(dense))]
    if padding:
        ids = [i for i in ids if i != REPLICA_GROUP_PADDING]
    return (min(ids), max(ids)) if ids else None


def declared_devices(ir: object, module: object) -> int:
    """The devices a parsed module says it runs on: ``mhlo.num_partitions`` times ``mhlo.num_replicas`` (each at
    least 1; 1 when absent or not an integer)."""
    attrs = module.operation.attributes  # type: ignore[attr-defined]
    n = 1
    for key in ("mhlo.num_partitions", "mhlo.num_replicas"):
        if key in attrs and isinstance(attrs[key], ir.IntegerAttr):  # type: ignore[attr-defined]
            n *= max(1, ir.IntegerAttr(attrs[key]).value)  # type: ignore[attr-defined]
    return n


def scan_module(mlir_module_serialized: bytes) -> ModuleScan:
    """Walk a serialized (portable artifact) StableHLO module."""
    ir, stablehlo = mlir_ir(), stablehlo_dialect()

    scan = ModuleScan()
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = deserialize_portable_artifact(mlir_module_serialized)
        scan.devices = declared_devices(ir, module)

        def string_attr(op, name: str) -> str:
            """String attribute ``name`` of ``op`` (raises ValueError on an attribute of another kind)."""
            return ir.StringAttr(op.attributes[name]).value

        def visit(op):
            scan.operations += 1
            name = op.name
            # Any dialect's custom call (an op that names a call target) counts: the check must not depend on
            # which dialect a hostile module spells it in.
            if name == "stablehlo.custom_call" or name.endswith(".custom_call") or "call_target_name" in op.attributes:
                target = string_attr(op, "call_target_name")
                if target == "shape_assertion":
                    if "error_message" in op.attributes:
                        scan.shape_assertions.append(string_attr(op, "error_message"))
                scan.custom_calls.append(CustomCall(target, str(op.location)))
            elif refused_op(name):
                scan.host_communication.append((name, short_location(str(op.location))))
            elif name == "stablehlo.constant":
                t = str(op.results[0].type)
                scan.constants.append(Constant(t, _tensor_nbytes(t), str(op.location)))
            # Any operation of any dialect that names devices counts, as for custom calls.
            for attribute in DEVICE_ATTRIBUTES:
                if attribute in op.attributes:
                    ids = _device_ids(ir, op.attributes[attribute], padding=attribute == "replica_groups")
                    if ids is not None:
                        scan.collectives.append(Collective(name, attribute, ids[0], ids[1],
                                                           short_location(str(op.location))))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return scan


#: A tensor type's element type: ``tensor<4x?xbf16>`` -> ``bf16``, ``tensor<complex<f32>>`` -> ``complex<f32>``.
_ELEMENT = re.compile(r"tensor<(?:[0-9?]+x)*(complex<[A-Za-z0-9]+>|[A-Za-z0-9]+)")


def element_types(mlir_module_serialized: bytes) -> set[str]:
    """The MLIR element types of every value the module computes (each operation's results, each block's
    arguments): what it computes in, intermediates included (``bf16`` in a program that takes and returns ``f32``).
    Walks the module; prints no constant."""
    ir, stablehlo = mlir_ir(), stablehlo_dialect()

    found: set[str] = set()
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = deserialize_portable_artifact(mlir_module_serialized)

        def visit(op):
            types = [r.type for r in op.results]
            for region in op.regions:
                for block in region.blocks:
                    types += [a.type for a in block.arguments]
            for t in types:
                m = _ELEMENT.match(str(t))
                if m:
                    found.add(m.group(1))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return found


def module_text(mlir_module_serialized: bytes, debug_info: bool = False) -> str:
    """The StableHLO text of a serialized module."""
    ir, stablehlo = mlir_ir(), stablehlo_dialect()

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = deserialize_portable_artifact(mlir_module_serialized)
        return module.operation.get_asm(enable_debug_info=debug_info)


def stablehlo_version(mlir_module_serialized: bytes) -> str | None:
    """The StableHLO version a portable artifact was written for (from its bytecode producer string)."""
    m = re.match(rb"ML\xefR.?StableHLO_v(\d+\.\d+\.\d+)", bytes(mlir_module_serialized[:64]), re.S)
    return m.group(1).decode() if m else None


def strip_locations(mlir_module_serialized: bytes) -> bytes:
    """The same module with every source location replaced by ``unknown``, for the same StableHLO version."""
    ir, stablehlo = mlir_ir(), stablehlo_dialect()

    version = stablehlo_version(mlir_module_serialized)
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = deserialize_portable_artifact(mlir_module_serialized)
        text = module.operation.get_asm(enable_debug_info=False)
        bare = ir.Module.parse(text)
        return serialize_portable_artifact(bare, version or stablehlo.get_current_version(), serialize_with_sdy())


# --- program limits: what native readers, printers and compilers may be given ------------------------------------

#: How deep a program may nest (specs/FORMAT.md "Program limits"): regions in regions, attributes and types in one
#: another, counted through every alias (``#loc3 = loc(callsite(#loc1 at #loc2))``) and every function call (a
#: call adds the depth of its callee at the call site). MLIR's parser and printer and XLA's compiler recurse once
#: per level on their thread's stack: on an 8 MiB stack XLA's CPU compiler crashed at about 250 nested
#: ``stablehlo.case`` regions (about 500 levels) and at a chain of 300 calls, MLIR's printer at 30 000 nested
#: dictionaries and its text parser at 4000 nested regions or 7000 nested arrays. Programs JAX writes nest a few
#: dozen levels.
MAX_NESTING = 128
#: The levels one function call counts for: XLA's compiler recursed about four times deeper per call of a chain of
#: calls than per nested region (it crashed at a chain of 200 calls).
CALL_LEVELS = 4
#: How many operations a program may hold, nested ones included (compile time grows with it).
MAX_OPERATIONS = 2_000_000
#: How deep a module's text may nest before MLIR's text parser reads it (``import``): what the parser is safe with,
#: well below the 4000 nested regions that crashed it. The program limits then hold for the module as MLIR prints it
#: (``checked_text``), as for every reader, whatever spelling (generic or custom form, comments) the text used.
PARSER_NESTING = 4 * MAX_NESTING

_TOKENS = re.compile(r'//[^\n]*|"(?:[^"\\]|\\.)*"|->|[\[\]{}()<>]|[#!][\w.$-]+|@(?:[\w.$-]+|"(?:[^"\\]|\\.)*")|'
                     r'\bfunc\.func\b|sym_name\s*=\s*"(?:[^"\\]|\\.)*"')
#: An escape in an MLIR string literal: a quote, a backslash, n, t or two hex digits (MLIR's lexer knows no other).
_ESCAPE = re.compile(r'\\(?:([0-9a-fA-F]{2})|(.))', re.S)
_ESCAPED = {'"': b'"', "\\": b"\\", "n": b"\n", "t": b"\t"}
_OPENERS = frozenset("([{<")
_CLOSERS = frozenset(")]}>")


class ProgramLimitError(ValueError):
    """A program over a documented limit (``MAX_NESTING``, ``MAX_OPERATIONS``); the message says which."""


@dataclass
class _Node:
    """An alias definition or a function of a program's text: how deep its own text nests, and where it refers to
    other nodes (the nesting depth at the reference, relative to the node's start)."""

    start: int  # the nesting depth where the node begins
    line: int
    end: int = -1  # where an alias definition's line ends (-1: a function, which ends with its brackets)
    own: int = 0
    refs: list[tuple[int, str]] = field(default_factory=list)


def symbol_name(spelling: str) -> str:
    """A symbol's name by its value, as MLIR compares symbols: ``main`` for ``main``, ``"main"`` and ``"m\\61in"``
    (quotes removed, escapes decoded; bytes that are not UTF-8 kept as surrogates, so that two names are equal
    exactly when their bytes are)."""
    if not spelling.startswith('"'):
        return spelling
    body = spelling[1:-1] if len(spelling) > 1 and spelling.endswith('"') else spelling[1:]
    if "\\" not in body:
        return body
    raw = bytearray()
    last = 0
    for m in _ESCAPE.finditer(body):
        raw += body[last:m.start()].encode("utf-8", "surrogateescape")
        raw += bytes([int(m.group(1), 16)]) if m.group(1) else _ESCAPED.get(m.group(2), m.group().encode())
        last = m.end()
    raw += body[last:].encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "surrogateescape")


def check_program_text(text: str, limit: int = MAX_NESTING) -> None:
    """Raise :class:`ProgramLimitError` if MLIR text nests deeper than ``limit`` (``MAX_NESTING``).

    A bounded, pure-Python scan (one pass over the tokens, then a walk of the alias and call graph): it runs before
    any native reader sees the text, so the nesting it measures never recurses native code. Brackets of every kind
    count, outside string literals and comments; an alias referred to counts with its own depth, a function called
    with its own depth plus ``CALL_LEVELS``; a function that calls itself (directly or not) is refused, as XLA cannot
    compile recursion. Functions are told apart by name as MLIR does (:func:`symbol_name`).
    """
    nodes: dict[str, _Node] = {}
    top = _Node(0, 1)
    current: _Node = top
    current_name = ""
    depth = 0
    pending_func: int | None = None  # depth of a ``func.func`` whose name comes next
    last_end = 0
    line = 1
    for m in _TOKENS.finditer(text):
        tok = m.group()
        c = tok[0]
        if tok.startswith("//"):
            continue  # a comment
        if current.end >= 0 and m.start() > current.end:
            current, current_name = top, ""
        if c in _OPENERS and len(tok) == 1:
            depth += 1
            if depth > limit:
                line += text.count("\n", last_end, m.start())
                raise ProgramLimitError(f"the program nests more than {limit} levels deep at line {line} "
                                        f"(regions, attributes or types within one another); {_reads(limit)}")
            current.own = max(current.own, depth - current.start)
        elif c in _CLOSERS and len(tok) == 1:
            depth = max(depth - 1, 0)
            if current is not top and depth < current.start:
                current, current_name = top, ""
        elif c in "#!" and depth == 0 and text[m.end():m.end() + 3].lstrip(" ").startswith("="):
            line += text.count("\n", last_end, m.start())
            last_end = m.start()
            current, current_name = nodes.setdefault(tok, _Node(0, line)), tok
            end = text.find("\n", m.end())
            current.end = len(text) if end < 0 else end
        elif c in "#!":
            current.refs.append((depth - current.start, tok))
        elif tok == "func.func" or tok == '"func.func"':
            pending_func = depth
        elif c == "@" or tok.startswith("sym_name"):
            name = "@" + symbol_name(tok[1:] if c == "@" else tok.split("=", 1)[1].strip())
            if pending_func is not None:
                line += text.count("\n", last_end, m.start())
                last_end = m.start()
                current, current_name = nodes.setdefault(name, _Node(pending_func, line)), name
                pending_func = None
            elif name != current_name or name.startswith("@"):  # a function naming itself calls itself
                current.refs.append((depth - current.start + CALL_LEVELS - 1, name))
    _check_graph(nodes, top, limit)


def _check_graph(nodes: dict[str, _Node], top: _Node, limit: int) -> None:
    """The deepest nesting through references (iteratively: the graph may be as deep as the text is long)."""
    effective: dict[str, int] = {}
    on_path: set[str] = set()
    for root in nodes:
        if root in effective:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        on_path.add(root)
        while stack:
            name, i = stack[-1]
            refs = nodes[name].refs
            while i < len(refs) and (refs[i][1] not in nodes or refs[i][1] in effective):
                i += 1
            if i < len(refs):
                target = refs[i][1]
                if target in on_path:
                    kind = "function" if target.startswith("@") else "alias"
                    raise ProgramLimitError(f"the program's {kind} {target[:80]} refers to itself (line "
                                            f"{nodes[target].line}); jaxport reads programs without recursion")
                stack[-1] = (name, i)
                stack.append((target, 0))
                on_path.add(target)
                continue
            stack.pop()
            on_path.discard(name)
            node = nodes[name]
            deepest = max([node.own] + [d + effective[t] for d, t in node.refs if t in effective])
            effective[name] = deepest
            if node.start + deepest > limit:
                kind = "function" if name.startswith("@") else "alias"
                raise ProgramLimitError(f"the program nests more than {limit} levels deep through its {kind} "
                                        f"{name[:80]} (line {node.line}: calls, aliases, regions, attributes or types "
                                        f"within one another); {_reads(limit)}")
    for d, t in top.refs:
        if t in effective and d + effective[t] > limit:
            raise ProgramLimitError(f"the program nests more than {limit} levels deep through {t[:80]}; "
                                    f"{_reads(limit)}")


def _reads(limit: int) -> str:
    """What a nesting refusal says jaxport reads (``limit``: the one the scan held the text to)."""
    if limit == MAX_NESTING:
        return f"jaxport reads programs nested at most {MAX_NESTING} deep"
    return f"jaxport parses text nested at most {limit} deep, and reads programs nested at most {MAX_NESTING} deep"


def check_operation_count(operations: int) -> None:
    """Raise :class:`ProgramLimitError` if a program holds more than ``MAX_OPERATIONS`` operations."""
    if operations > MAX_OPERATIONS:
        raise ProgramLimitError(f"the program holds {operations} operations; jaxport reads programs of at most "
                                f"{MAX_OPERATIONS}")


def checked_text(module: object) -> str:
    """The text of a parsed module (debug information included, constants of more than 16 elements elided), after
    :func:`check_program_text`: printing it exercises MLIR's printer, the scan bounds what comes after."""
    text = module.operation.get_asm(enable_debug_info=True, large_elements_limit=16)  # type: ignore[attr-defined]
    check_program_text(text)
    return text


def check_program(mlir_module_serialized: bytes, scan: ModuleScan) -> None:
    """The program limits of a serialized program (``scan``, its :func:`scan_module`), checked as a reader checks
    an artifact's program at load (``isolation.isolate``): its operations counted, its text as MLIR prints it
    (every name by its value) scanned by :func:`check_program_text`. ``import`` runs it on the program it stores,
    so that what it writes every reader reads. Raises :class:`ProgramLimitError`."""
    ir, stablehlo = mlir_ir(), stablehlo_dialect()

    check_operation_count(scan.operations)
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        checked_text(deserialize_portable_artifact(mlir_module_serialized))
