"""Reading a lowered StableHLO module: custom calls, large constants, shape assertions, locations.

The module is walked with the MLIR Python bindings that JAX ships (``jax.extend.mlir``), never printed whole, so a
module with hundreds of megabytes of constants is scanned without building its text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ._jax_internals import serialize_with_sdy

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


@dataclass
class ModuleScan:
    custom_calls: list[CustomCall] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    shape_assertions: list[str] = field(default_factory=list)

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


def scan_module(mlir_module_serialized: bytes) -> ModuleScan:
    """Walk a serialized (portable artifact) StableHLO module."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    scan = ModuleScan()
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = jmlir.deserialize_portable_artifact(mlir_module_serialized)

        def visit(op):
            name = op.name
            if name == "stablehlo.custom_call":
                target = ir.StringAttr(op.attributes["call_target_name"]).value
                if target == "shape_assertion":
                    if "error_message" in op.attributes:
                        scan.shape_assertions.append(ir.StringAttr(op.attributes["error_message"]).value)
                scan.custom_calls.append(CustomCall(target, str(op.location)))
            elif name == "stablehlo.constant":
                t = str(op.results[0].type)
                scan.constants.append(Constant(t, _tensor_nbytes(t), str(op.location)))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return scan


def module_text(mlir_module_serialized: bytes, debug_info: bool = False) -> str:
    """The StableHLO text of a serialized module."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = jmlir.deserialize_portable_artifact(mlir_module_serialized)
        return module.operation.get_asm(enable_debug_info=debug_info)


def stablehlo_version(mlir_module_serialized: bytes) -> str | None:
    """The StableHLO version a portable artifact was written for (from its bytecode producer string)."""
    m = re.match(rb"ML\xefR.?StableHLO_v(\d+\.\d+\.\d+)", bytes(mlir_module_serialized[:64]), re.S)
    return m.group(1).decode() if m else None


def strip_locations(mlir_module_serialized: bytes) -> bytes:
    """The same module with every source location replaced by ``unknown``, for the same StableHLO version."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    version = stablehlo_version(mlir_module_serialized)
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        module = jmlir.deserialize_portable_artifact(mlir_module_serialized)
        text = module.operation.get_asm(enable_debug_info=False)
        bare = ir.Module.parse(text)
        return bytes(jmlir.serialize_portable_artifact(bare, version or stablehlo.get_current_version(),
                                                       serialize_with_sdy()))
