"""A foreign StableHLO module as MLIR: reading it, ``main``'s signature, wrapping ``main``, refining, serializing.

A module is MLIR text, plain MLIR bytecode or a StableHLO portable artifact, told apart by content. ``main`` is made
to follow JAX's calling convention by :func:`wrap_main`; :func:`refine` specializes it to static shapes (shape
refinement only folds shapes: nothing of the module runs); :func:`serialize` writes it as the portable artifact a
``jax.export.Exported`` holds.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import dtypes
from .._fsio import read_file
from ..errors import CrashError, EntrypointError, ExportError, FormatError
from ..isolation.isolate import check_module_bytes
from ..jaxprivate.mlir import deserialize_portable_artifact, make_ir_context, serialize_portable_artifact
from ..program.module_scan import (
    PARSER_NESTING,
    ProgramLimitError,
    check_operation_count,
    check_program_text,
    checked_text,
    stablehlo_version,
)

#: The first bytes of MLIR bytecode, plain or a StableHLO portable artifact.
BYTECODE_MAGIC = b"ML\xefR"
#: The private name the module's own ``main`` takes when jaxport wraps it.
INNER_MAIN = "_jaxport_imported_main"
#: What ``jax.global_constant`` says of JAX's platform-index argument.
PLATFORM_INDEX = "_platform_index"


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type of ``main``: ``None`` for a dynamic axis; ``dtype`` None when jaxport has none."""

    shape: tuple[int | None, ...]
    dtype: str | None
    element: str  # f32
    text: str  # tensor<?x3xf32>


@dataclass(frozen=True)
class MainSignature:
    """``main``'s array arguments and results, after the platform index and a tuple result are set aside."""

    args: list[TensorType]
    results: list[TensorType]
    platform_index: bool  # the first argument is JAX's platform index
    tuple_result: bool  # main returns one tuple of the results

    def text(self) -> str:
        ins = ", ".join(t.text for t in self.args)
        outs = ", ".join(t.text for t in self.results)
        return f"main({ins}) -> ({outs})"

# --- reading the module ------------------------------------------------------------------------------------------


def first_error(e: BaseException, display: str) -> str:
    """The first diagnostic of an MLIR or XLA error, on one line, with MLIR's ``"-"`` buffer name replaced."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    found = next((ln for ln in lines if "error:" in ln), lines[0] if lines else type(e).__name__)
    found = re.sub(r'^.*?error:\s*', "", found)
    found = found.replace('"-":', f"{display}:")
    return found[:400].rstrip(".")


#: The largest module file ``import`` reads (the parsed module takes several times this in memory).
MAX_MODULE_BYTES = 2 << 30


def read_module(path: str | Path) -> tuple[Any, Any, str | None]:
    """Parse a module file: ``(context, module, StableHLO version of a portable artifact or None)``.

    MLIR text, plain MLIR bytecode and StableHLO portable artifacts (VHLO bytecode) are told apart by content, not
    by the file's suffix.
    """
    from jax.extend.mlir import ir

    display = str(path)
    data = read_file(path, FormatError, MAX_MODULE_BYTES,  # an unreadable file is exit 7, as an artifact's
                     lambda n: f"{display}: the module is {n} bytes; at most {MAX_MODULE_BYTES} are read.",
                     missing="module file", directory="a StableHLO module", reading="the module")
    how = ("Give MLIR text (.mlir), MLIR bytecode, or a StableHLO portable artifact (.mlirbc) whose functions use the "
           "func, stablehlo and chlo dialects, or a JAX serialization (.jaxexport: Exported.serialize()'s bytes).")
    _check_limits(data, display)
    ctx = make_ir_context()
    version = None
    with ctx, ir.Location.unknown():
        try:
            if data.startswith(BYTECODE_MAGIC):
                version = stablehlo_version(data)
                readers: list[Callable[[bytes], Any]] = [deserialize_portable_artifact, ir.Module.parse]
                if not version:  # plain bytecode, unless a producer named its portable artifact otherwise
                    readers.reverse()
                module = _first_that_reads(readers, data)
            else:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise FormatError(f"{display}: not a StableHLO module: neither MLIR bytecode nor UTF-8 text "
                                      f"(byte {e.start} is {data[e.start]:#04x}). {how}") from None
                if not text.strip():
                    raise FormatError(f"{display}: the module file is empty. {how}")
                module = _name_locations(ir.Module.parse(text), Path(path).name)
        except FormatError:
            raise
        except Exception as e:  # noqa: BLE001 - MLIR's parser and the VHLO reader raise several kinds
            raise FormatError(f"{display}: cannot read a StableHLO module: {first_error(e, display)}. "
                              f"{how}") from None
        _check_operations(module, display)
        _check_printed(module, display)
    return ctx, module, version


def _check_limits(data: bytes, display: str) -> None:
    """Before MLIR's native readers see a module: text is scanned in Python (``module_scan.check_program_text``)
    for what MLIR's text parser is safe with (``PARSER_NESTING`` levels, no recursion); bytecode, which only a
    native reader can decode, is read in a child process first (``isolate.check_module_bytes``). A module over a
    limit is an export error (JAX could not lower or compile it safely), a reader that crashes the child a crash."""
    try:
        if data.startswith(BYTECODE_MAGIC):
            check_module_bytes(data)
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return  # refused by read_module, before any parser sees it
            check_program_text(text, PARSER_NESTING)
    except ProgramLimitError as e:
        raise limit_error(display, e) from None
    except CrashError as e:
        raise CrashError(f"{display}: {e}") from None


def limit_error(display: str, e: ProgramLimitError, stored: bool = False) -> ExportError:
    """The error of a module over a program limit (``stored``: once wrapped as the artifact stores it)."""
    how = ", as the artifact would store it (main wrapped to follow JAX's calling convention)" if stored else ""
    return ExportError(f"{display}: {e}{how} (specs/IMPORT.md, \"Limits\"). Simplify the module (fewer nested "
                       f"regions or calls, smaller attributes) before importing it.")


def _check_printed(module: Any, display: str) -> None:
    """The program limits, held for the module as MLIR prints it (``module_scan.checked_text``: every name by its
    value, whatever escapes or form the file spelled it in), as every reader of the artifact holds them."""
    try:
        checked_text(module)
    except ProgramLimitError as e:
        raise limit_error(display, e) from None


def _check_operations(module: Any, display: str) -> None:
    """Refuse a module of more operations than ``module_scan.MAX_OPERATIONS`` (counted without recursion)."""
    from jax.extend.mlir import ir

    operations = [0]

    def count(op: Any) -> Any:
        operations[0] += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(count)
    try:
        check_operation_count(operations[0])
    except ProgramLimitError as e:
        raise ExportError(f"{display}: {e} (specs/IMPORT.md, \"Limits\"). Split the module, or import a smaller "
                          f"one.") from None


def _first_that_reads(readers: list[Callable[[bytes], Any]], data: bytes) -> Any:
    """The module the first reader that succeeds returns; raises the first reader's error if none does."""
    errors: list[Exception] = []
    for reader in readers:
        try:
            return reader(data)
        except Exception as e:  # noqa: BLE001 - MLIR's readers raise several kinds
            errors.append(e)
    raise errors[0]


def _name_locations(module: Any, name: str) -> Any:
    """The module with the locations of its text (which MLIR gives the buffer name ``"-"``) in file ``name``, the
    module file's base name: a source location names no directory, as in an exported artifact."""
    from jax.extend.mlir import ir

    text = module.operation.get_asm(enable_debug_info=True)
    if 'loc("-":' not in text:
        return module
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    return ir.Module.parse(text.replace('loc("-":', f'loc("{quoted}":'))


def _tensor(t: Any) -> TensorType | None:
    from jax.extend.mlir import ir

    if not isinstance(t, ir.RankedTensorType):
        return None
    rt = ir.RankedTensorType(t)
    shape = tuple(None if rt.is_dynamic_dim(i) else int(rt.shape[i]) for i in range(rt.rank))
    element = str(rt.element_type)
    d = dtypes.BY_MLIR.get(element)
    return TensorType(shape, d.name if d is not None else None, element, str(t))


def _dict_attrs(func_op: Any, key: str, n: int) -> list[dict[str, Any]]:
    from jax.extend.mlir import ir

    if key not in func_op.attributes:
        return [{} for _ in range(n)]
    out = []
    for a in ir.ArrayAttr(func_op.attributes[key]):
        d = ir.DictAttr(a)
        out.append({d[i].name: d[i].attr for i in range(len(d))})
    return out


def _string(attr: Any) -> str | None:
    from jax.extend.mlir import ir

    if not isinstance(attr, ir.StringAttr):
        return None
    # A foreign module's strings (function names included) need not be UTF-8; reading .value then raises.
    return bytes(ir.StringAttr(attr).value_bytes).decode("utf-8", "backslashreplace")


def find_main(module: Any, display: str) -> Any:
    """The module's public ``func.func @main``, as a ``func.FuncOp`` (its ``type`` the ``ir.FunctionType``, its
    ``arg_attrs`` the arguments' attributes)."""
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import func  # noqa: F401 - registers func.FuncOp, which the table returns

    table = ir.SymbolTable(module.operation)
    if "main" not in table:
        # Read as any attribute (SymbolTable.get_symbol_name would take a foreign module's non-string one as text).
        names = [_string(op.attributes["sym_name"]) for op in module.body.operations
                 if "sym_name" in op.attributes]
        listed = f"; it defines {', '.join(repr(n) for n in names[:10])}" if names else ""
        raise EntrypointError(f"{display}: the module has no function 'main'{listed}. jaxport imports a module's "
                              f"public 'main' function: rename the entry function to main.")
    main = table["main"]
    if main.operation.name != "func.func":
        raise EntrypointError(f"{display}: 'main' is a {main.operation.name}, not a func.func.")
    if not main.regions[0].blocks:
        raise EntrypointError(f"{display}: 'main' is only declared; the module must define its body.")
    return main


def main_signature(module: Any, display: str) -> MainSignature:
    """``main``'s array arguments and results; refuses what the JAX calling convention cannot express."""
    from jax.extend.mlir import ir

    main = find_main(module, display)
    ftype = main.type
    ins, outs = list(ftype.inputs), list(ftype.results)
    arg_attrs = _dict_attrs(main, "arg_attrs", len(ins))
    result_attrs = _dict_attrs(main, "res_attrs", len(outs))
    platform_index = False
    args: list[TensorType] = []
    for i, (t, attrs) in enumerate(zip(ins, arg_attrs)):
        constant = _string(attrs["jax.global_constant"]) if "jax.global_constant" in attrs else None
        if str(t) == "!stablehlo.token" or "jax.token" in attrs:
            raise EntrypointError(f"{display}: main's argument {i} is a token ({t}): the module has side effects "
                                  f"(ordered effects), which jaxport does not import. Produce it without effects.")
        if constant == PLATFORM_INDEX and i == 0:
            platform_index = True
            continue
        if constant is not None:
            raise EntrypointError(
                f"{display}: main's argument {i} ({t}) is the value of dimension variable {constant!r} "
                f"(jax.global_constant), which the caller would have to pass: this is a JAX lowering with symbolic "
                f"shapes, not an export. Export it with jax.export (whose main computes its dimension variables "
                f"from the arrays), or lower it with concrete shapes.")
        tensor = _tensor(t)
        if tensor is None:
            raise EntrypointError(f"{display}: main's argument {i} has type {t}; jaxport imports functions whose "
                                  f"arguments are ranked tensors.")
        args.append(tensor)
    tuple_result = False
    if len(outs) == 1 and isinstance(outs[0], ir.TupleType):
        tup = ir.TupleType(outs[0])
        outs = [tup.get_type(i) for i in range(tup.num_types)]
        result_attrs = [{} for _ in outs]
        tuple_result = True
    results: list[TensorType] = []
    for k, (t, attrs) in enumerate(zip(outs, result_attrs)):
        if str(t) == "!stablehlo.token" or "jax.token" in attrs:
            raise EntrypointError(f"{display}: main's result {k} is a token ({t}): the module has side effects "
                                  f"(ordered effects), which jaxport does not import. Produce it without effects.")
        tensor = _tensor(t)
        if tensor is None:
            raise EntrypointError(f"{display}: main's result {k} has type {t}; jaxport imports functions that "
                                  f"return ranked tensors (or one tuple of them).")
        results.append(tensor)
    for where, tensors in (("argument", args), ("result", results)):
        for k, tensor in enumerate(tensors):
            if tensor.dtype is None:
                raise EntrypointError(f"{display}: main's {where} {k} ({tensor.text}) has element type "
                                      f"{tensor.element}, which jaxport does not support. Supported: "
                                      f"{', '.join(dtypes.BY_MLIR)}.")
    return MainSignature(args, results, platform_index, tuple_result)


def partitions(module: Any) -> int:
    """The number of devices the module is partitioned (and replicated) for."""
    from jax.extend.mlir import ir

    attrs = module.operation.attributes
    n = 1
    for key in ("mhlo.num_partitions", "mhlo.num_replicas"):
        if key in attrs and isinstance(attrs[key], ir.IntegerAttr):
            n *= max(1, ir.IntegerAttr(attrs[key]).value)
    return n

# --- rewriting main ------------------------------------------------------------------------------------------------


def _ir_type(shape: tuple[int | None, ...], like: Any) -> Any:
    """A ranked tensor type of ``shape`` (None: dynamic) with the element type of ``like``."""
    from jax.extend.mlir import ir

    element = ir.RankedTensorType(like).element_type
    dims = [ir.ShapedType.get_dynamic_size() if d is None else d for d in shape]
    return ir.RankedTensorType.get(dims, element)


def wrap_main(module: Any, arg_shapes: list[tuple[int | None, ...]], *, add_platform_index: bool) -> None:
    """Give ``module`` a new public ``main`` that takes arrays of ``arg_shapes`` and calls the old one.

    The old ``main`` becomes the private ``INNER_MAIN``. The new one converts each argument to the type the old one
    takes (a ``stablehlo.convert`` between a static and a dynamic shape, which shape refinement folds away),
    returns the elements of a tuple result as separate results, keeps a platform-index argument, and with
    ``add_platform_index`` takes one it ignores (``jax.global_constant = "_platform_index"``), as JAX calls a
    program exported for several platforms.
    """
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import func, stablehlo

    with module.context, ir.Location.unknown():
        old = find_main(module, "<module>")
        sig = main_signature(module, "<module>")
        ftype = old.type
        old_ins = list(ftype.inputs)
        table = ir.SymbolTable(module.operation)
        inner, k = INNER_MAIN, 0
        while inner in table:
            k += 1
            inner = f"{INNER_MAIN}_{k}"
        ir.SymbolTable.set_symbol_name(old, inner)
        old.sym_visibility = ir.StringAttr.get("private")
        array_types = old_ins[1:] if sig.platform_index else old_ins
        new_args = [_ir_type(s, t) for s, t in zip(arg_shapes, array_types)]
        index_type = old_ins[0] if sig.platform_index else ir.RankedTensorType.get([], ir.IntegerType.get_signless(32))
        takes_index = sig.platform_index or add_platform_index
        new_ins = ([index_type] if takes_index else []) + new_args
        if sig.tuple_result:
            tup = ir.TupleType(ftype.results[0])
            new_outs = [tup.get_type(i) for i in range(tup.num_types)]
        else:
            new_outs = list(ftype.results)
        with ir.InsertionPoint(module.body):
            wrapper = func.FuncOp("main", (new_ins, new_outs))
            attrs = [ir.DictAttr.get({}) for _ in new_ins]
            if takes_index:
                attrs[0] = ir.DictAttr.get({"jax.global_constant": ir.StringAttr.get(PLATFORM_INDEX)})
            wrapper.arg_attrs = ir.ArrayAttr.get(attrs)
            block = wrapper.add_entry_block()  # type: ignore[attr-defined]
            with ir.InsertionPoint(block):
                values = list(block.arguments)
                call_args = [values[0]] if sig.platform_index else []
                for value, want in zip(values[1:] if takes_index else values, array_types):
                    call_args.append(value if value.type == want else stablehlo.ConvertOp(want, value).result)
                call = func.CallOp(list(ftype.results), ir.FlatSymbolRefAttr.get(inner), call_args)
                results = list(call.results)
                if sig.tuple_result:
                    results = [stablehlo.GetTupleElementOp(results[0], i).result for i in range(len(new_outs))]
                func.ReturnOp(results)
        module.operation.verify()


def bytecode(module: Any) -> bytes:
    """Plain MLIR bytecode of a module (what shape refinement reads)."""
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def refine(module_bytes: bytes, arg_shapes: list[tuple[int, ...]], ctx: Any) -> Any:
    """The module specialized to static argument shapes, shapes refined throughout (raises on failure)."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir

    with ctx, ir.Location.unknown():
        module = ir.Module.parse(module_bytes)
        wrap_main(module, list(arg_shapes), add_platform_index=False)
        refined = jmlir.refine_polymorphic_shapes(bytecode(module))
        return ir.Module.parse(refined)

# --- serialization ------------------------------------------------------------------------------------------------


def serialize(module: Any, display: str, warnings: list[str]) -> bytes:
    """The module as a portable artifact for the StableHLO version ``jax.export`` targets (about a month old, so
    that slightly older consumers read it), or for the newest version when the module needs newer features."""
    from jax.extend.mlir.dialects import stablehlo

    target = stablehlo.get_version_from_compatibility_requirement(stablehlo.StablehloCompatibilityRequirement.WEEK_4)
    try:
        return serialize_portable_artifact(module, target)
    except Exception as first:  # noqa: BLE001 - XLA reports every failure as one error type
        current = stablehlo.get_current_version()
        try:
            data = serialize_portable_artifact(module, current)
        except Exception:  # noqa: BLE001
            raise ExportError(f"{display}: cannot write the module as a StableHLO portable artifact: "
                              f"{first_error(first, display)}.") from None
        warnings.append(f"{display}: the module needs StableHLO {current} (it cannot be written for {target}, the "
                        f"version jax.export targets); consumers with an older StableHLO cannot read it.")
        return data


def mark_platform_index(module: Any) -> None:
    """Mark main's first argument as JAX's platform index (older JAX did not)."""
    from jax.extend.mlir import ir

    main = find_main(module, "<module>")
    attrs = _dict_attrs(main, "arg_attrs", len(main.type.inputs))
    attrs[0] = {**attrs[0], "jax.global_constant": ir.StringAttr.get(PLATFORM_INDEX)}
    main.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in attrs])
