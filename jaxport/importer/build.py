"""Importing StableHLO written by another producer: a module's ``main`` becomes a function of an artifact.

:func:`import_stablehlo` reads MLIR text, MLIR bytecode or a StableHLO portable artifact; checks ``main``'s
signature against a shape spec (argument names, dtypes, symbolic dimensions, bounds and constraints); makes ``main``
follow JAX's calling convention where it does not already, with a wrapper ``main`` that specializes dynamic
dimensions the spec fixes, flattens a tuple result, or takes the platform index of a multi-platform artifact;
derives each dynamic output dimension as a linear expression of the input dimension variables; checks custom calls
against the allowlist; and stores the module, re-serialized as a portable artifact, in a ``jax.export.Exported``:
the same payload ``jaxport export`` writes, so ``call``, ``inspect``, ``extract``, ``compile`` and the IREE runtime
treat both alike. The rules are documented in ``specs/IMPORT.md``.

Trust model: the module file is parsed by MLIR's own readers and never executed while importing (shape refinement
only folds shapes); calling the artifact runs its program, as for any artifact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import dimexpr, dtypes
from ..errors import EntrypointError, ExportError, InputError, SpecError, UsageError
from ..spec import ArrayLeaf, ConstraintSpec, DimVar, FunctionSpec, ShapeSpec, Where

#: MLIR element types and the dtypes jaxport gives them.
ELEMENT_TYPES: dict[str, str] = {
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64",
    "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64",
    "complex<f32>": "complex64", "complex<f64>": "complex128",
    "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2",
}
#: The first bytes of MLIR bytecode, plain or a StableHLO portable artifact.
BYTECODE_MAGIC = b"ML\xefR"
#: The private name the module's own ``main`` takes when jaxport wraps it.
INNER_MAIN = "_jaxport_imported_main"
#: What ``jax.global_constant`` says of JAX's platform-index argument.
PLATFORM_INDEX = "_platform_index"
#: Offsets tried, per dimension variable, when sampling the module's output shapes.
_PROBE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16)


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


@dataclass(frozen=True)
class _Input:
    """An input of the imported function: its name, where the spec gives it, and its array leaf."""

    name: str
    spec_path: str
    leaf: ArrayLeaf


# --- reading the module ------------------------------------------------------------------------------------------


def _first_error(e: BaseException, display: str) -> str:
    """The first diagnostic of an MLIR or XLA error, on one line, with MLIR's ``"-"`` buffer name replaced."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    found = next((ln for ln in lines if "error:" in ln), lines[0] if lines else type(e).__name__)
    found = re.sub(r'^.*?error:\s*', "", found)
    found = found.replace('"-":', f"{display}:")
    return found[:400].rstrip(".")


def read_module(path: str | Path) -> tuple[Any, Any, str | None]:
    """Parse a module file: ``(context, module, StableHLO version of a portable artifact or None)``.

    MLIR text, plain MLIR bytecode and StableHLO portable artifacts (VHLO bytecode) are told apart by content, not
    by the file's suffix.
    """
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir

    from .._jax_internals import make_ir_context
    from ..module_scan import stablehlo_version

    display = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise EntrypointError(f"{display}: module file not found.") from None
    except IsADirectoryError:
        raise EntrypointError(f"{display}: is a directory, not a StableHLO module.") from None
    except OSError as e:
        raise EntrypointError(f"{display}: cannot read the module: {e.strerror}.") from None
    how = ("Give MLIR text (.mlir), MLIR bytecode, or a StableHLO portable artifact (.mlirbc) whose functions use the "
           "func, stablehlo and chlo dialects.")
    ctx = make_ir_context()
    version = None
    with ctx, ir.Location.unknown():
        try:
            if data.startswith(BYTECODE_MAGIC):
                version = stablehlo_version(data)
                readers = [jmlir.deserialize_portable_artifact, ir.Module.parse]
                if not version:  # plain bytecode, unless a producer named its portable artifact otherwise
                    readers.reverse()
                module = _first_that_reads(readers, data)
            else:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise EntrypointError(f"{display}: not a StableHLO module: neither MLIR bytecode nor UTF-8 text "
                                          f"(byte {e.start} is {data[e.start]:#04x}). {how}") from None
                if not text.strip():
                    raise EntrypointError(f"{display}: the module file is empty. {how}")
                module = _name_locations(ir.Module.parse(text), Path(path).name)
        except EntrypointError:
            raise
        except Exception as e:  # noqa: BLE001 - MLIR's parser and the VHLO reader raise several kinds
            raise EntrypointError(f"{display}: cannot read a StableHLO module: {_first_error(e, display)}. "
                                  f"{how}") from None
    return ctx, module, version


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
    return TensorType(shape, ELEMENT_TYPES.get(element), element, str(t))


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

    return ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else None


def find_main(module: Any, display: str) -> Any:
    """The module's public ``func.func @main``."""
    from jax.extend.mlir import ir

    table = ir.SymbolTable(module.operation)
    if "main" not in table:
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
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
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
                                      f"{', '.join(ELEMENT_TYPES)}.")
    return MainSignature(args, results, platform_index, tuple_result)


def _partitions(module: Any) -> int:
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
        ftype = ir.FunctionType(ir.TypeAttr(old.attributes["function_type"]).value)
        old_ins = list(ftype.inputs)
        table = ir.SymbolTable(module.operation)
        inner, k = INNER_MAIN, 0
        while inner in table:
            k += 1
            inner = f"{INNER_MAIN}_{k}"
        ir.SymbolTable.set_symbol_name(old, inner)
        old.attributes["sym_visibility"] = ir.StringAttr.get("private")
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
            wrapper.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
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


def _bytecode(module: Any) -> bytes:
    """Plain MLIR bytecode of a module (what shape refinement reads)."""
    import io

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
        refined = jmlir.refine_polymorphic_shapes(_bytecode(module))
        return ir.Module.parse(refined)


# --- the spec ------------------------------------------------------------------------------------------------------


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _spec_inputs(spec: ShapeSpec) -> list[_Input]:
    """The spec's arguments as a flat list of array leaves: ``args`` (named ``arg0``, ...) then ``kwargs``."""
    if None not in spec.functions:
        raise SpecError(f"{spec.file}: 'functions' describes several Python functions; a module has one function, "
                        f"main. Give its arguments as top-level 'args' (and 'kwargs' to name them).")
    if getattr(spec, "mesh", None):
        raise SpecError(f"{spec.file}: 'mesh': an imported module runs on one device, unsharded. Remove 'mesh' and "
                        f"the shardings.")
    if getattr(spec, "vjp_order", 0):
        raise SpecError(f"{spec.file}: 'vjp_order': jaxport cannot differentiate a foreign module, so an imported "
                        f"function has no derivative to store. Remove 'vjp_order'.")
    fspec = spec.functions[None]
    found: list[_Input] = []
    named = [(f"arg{i}", f"args[{i}]", leaf) for i, leaf in enumerate(fspec.args)]
    for key in fspec.kwargs:
        if not _IDENTIFIER.match(key):
            raise SpecError(f"{fspec.where}: kwargs[{key!r}]: an imported argument's name must be an identifier "
                            f"(letters, digits, '_'): callers pass it by that name.")
        if key in {n for n, _, _ in named}:
            raise SpecError(f"{fspec.where}: kwargs[{key!r}] has the name of positional argument {key}; rename it.")
    named += [(k, f"kwargs[{k!r}]", leaf) for k, leaf in fspec.kwargs.items()]
    for name, path, leaf in named:
        if isinstance(leaf, ArrayLeaf):
            found.append(_Input(name, path, leaf))
            continue
        what = {"StaticLeaf": "a static value", "BindLeaf": "a bound value"}.get(
            type(leaf).__name__, "a list" if isinstance(leaf, list) else "a dict")
        where = getattr(leaf, "where", fspec.where)
        raise SpecError(f"{where}: {path} is {what}; a StableHLO module takes a flat list of arrays, so an imported "
                        f"argument is one array leaf such as 'f32[b, 3]' per argument of main.")
    return found


def _derived_inputs(sig: MainSignature, display: str) -> list[_Input]:
    """Inputs taken from ``main``'s argument types, for an import without argument specs (static shapes only)."""
    found = []
    for i, t in enumerate(sig.args):
        if any(d is None for d in t.shape):
            raise SpecError(f"{display}: main's argument {i} ({t.text}) has dynamic dimensions; give a spec "
                            f"(--shapes) whose 'args' name them, e.g. args: [\"{_example(t)}\"].")
        found.append(_Input(f"arg{i}", f"args[{i}]", ArrayLeaf(tuple(d for d in t.shape if d is not None),
                                                             str(t.dtype), Where(display, 0))))
    return found


def _example(t: TensorType) -> str:
    short = dtypes.BY_NAME[t.dtype].short if t.dtype in dtypes.BY_NAME else "f32"
    names = iter(("b", "n", "m", "k", "p", "q"))
    return f"{short}[{', '.join(str(d) if d is not None else next(names, 'd') for d in t.shape)}]"


def _leaf_text(leaf: ArrayLeaf) -> str:
    short = dtypes.BY_NAME[leaf.dtype].short
    return f"{short}[{leaf.shape_text()}]"


def _check_against_main(inputs: list[_Input], sig: MainSignature, spec_file: str, display: str,
                        has_platform_index: bool) -> list[tuple[int | None, ...]]:
    """Check the spec's leaves against main's arguments; returns the argument shapes main must take (None where
    the spec's dimension is symbolic), which differ from main's where the spec fixes a dynamic dimension."""
    if len(inputs) != len(sig.args):
        n, m = len(inputs), len(sig.args)
        hint = ""
        if len(sig.args) == len(inputs) + 1 and sig.args and sig.args[0].shape == () and \
                sig.args[0].dtype in ("int32", "int64") and not has_platform_index:
            hint = (" If main's first argument is the platform index of a module lowered for several platforms, list "
                    "those platforms, in the module's order, under 'platforms'.")
        raise SpecError(f"{spec_file}: the spec gives {n} argument{'s' if n != 1 else ''}, but main in {display} "
                        f"takes {m}: {sig.text()}. Give one array per argument of main, in order.{hint}")
    shapes: list[tuple[int | None, ...]] = []
    for i, (inp, t) in enumerate(zip(inputs, sig.args)):
        leaf = inp.leaf
        head = f"{leaf.where}: {inp.spec_path} is {_leaf_text(leaf)}, but main's argument {i} is {t.text}"
        if leaf.dtype != t.dtype:
            short = dtypes.BY_NAME[str(t.dtype)].short
            raise SpecError(f"{head}: the dtype differs. Write '{short}[...]' ({t.dtype}).")
        if len(leaf.shape) != len(t.shape):
            raise SpecError(f"{head}: rank {len(leaf.shape)} against {len(t.shape)}. Give {len(t.shape)} "
                            f"dimensions.")
        shape: list[int | None] = []
        for axis, (want, have) in enumerate(zip(leaf.shape, t.shape)):
            if have is not None and want != have:
                raise SpecError(f"{head}: axis {axis} has the static size {have} in the module. Write {have} "
                                f"there.")
            shape.append(want if isinstance(want, int) else None)
        shapes.append(tuple(shape))
    return shapes


def _spec_from_manifest(f: Mapping[str, Any], where: str) -> tuple[ShapeSpec, list[_Input]]:
    """A spec and inputs equivalent to a manifest function's signature (to re-import its module)."""
    w = Where(where, 0)
    dims = {v: DimVar(v, d.get("min"), d.get("max"), w) for v, d in (f.get("dims") or {}).items()}
    constraints = [ConstraintSpec(c, w) for c in f.get("constraints") or []]
    inputs = [_Input(i["name"], i.get("spec_path") or f"args[{k}]",
                     ArrayLeaf(tuple(i["shape"]), i["dtype"], w)) for k, i in enumerate(f["inputs"])]
    fspec = FunctionSpec(None, None, [], {}, w)
    return ShapeSpec(where, 1, dims, constraints, {None: fspec}), inputs


# --- output shapes -------------------------------------------------------------------------------------------------


def _pseudo_function(inputs: list[_Input], spec: ShapeSpec, constraints: list[str]) -> dict[str, Any]:
    """The manifest-like description ``contract.resolve_dims`` reads."""
    used = {v for i in inputs for d in i.leaf.shape if isinstance(d, str) for v in dimexpr.variables(dimexpr.parse(d))}
    dims = {v: {"min": d.min or 1, "max": d.max} for v, d in spec.dims.items() if v in used}
    return {"inputs": [{"name": i.name, "shape": list(i.leaf.shape), "dtype": i.leaf.dtype} for i in inputs],
            "dims": dims, "constraints": constraints}


def _clamp(value: int, d: Mapping[str, Any]) -> int:
    lo, hi = d.get("min") or 1, d.get("max")
    return max(lo, min(value, hi)) if hi is not None else max(lo, value)


def _render(coefficients: dict[str, int], constant: int) -> str:
    """``2*b + h - 1``: a linear expression as JAX's shape parser reads it."""
    terms = [(a, v) for v, a in coefficients.items() if a != 0]
    terms.sort(key=lambda t: t[0] < 0)  # a positive term first, so the text does not start with a minus
    text = ""
    for a, v in terms:
        mag = v if abs(a) == 1 else f"{abs(a)}*{v}"
        text = (f"-{mag}" if a < 0 else mag) if not text else f"{text} {'-' if a < 0 else '+'} {mag}"
    if constant:
        text = f"{text} {'-' if constant < 0 else '+'} {abs(constant)}" if text else str(constant)
    return text or "0"


def _fit(points: list[tuple[dict[str, int], int]], variables: list[str]) -> str | None:
    """An integer linear expression of the variables through every point, or None."""
    import numpy as np

    def check(coefficients: dict[str, int], constant: int) -> bool:
        return all(sum(a * env[v] for v, a in coefficients.items()) + constant == y for env, y in points)

    candidates: list[list[str]] = [[]] + [[v] for v in variables] + ([variables] if len(variables) > 1 else [])
    for subset in candidates:
        x = np.array([[1.0] + [float(env[v]) for v in subset] for env, _ in points])
        y = np.array([float(value) for _, value in points])
        solution = np.linalg.lstsq(x, y, rcond=None)[0]
        rounded = [int(round(c)) for c in solution]
        coefficients = dict(zip(subset, rounded[1:]))
        if check(coefficients, rounded[0]):
            return _render(coefficients, rounded[0])
    return None


def _output_dims(results: list[TensorType], inputs: list[_Input], spec: ShapeSpec, constraints: list[str],
                 probe: Callable[[dict[str, int]], list[tuple[int, ...]] | None],
                 display: str) -> list[list[int | str]]:
    """Each result's dimensions: static ones as they are, dynamic ones as linear expressions of the input dimension
    variables, fitted to the shapes shape refinement gives at sample sizes and checked at others."""
    from ..artifact.contract import resolve_dims

    shapes: list[list[int | str]] = [[d if d is not None else "?" for d in r.shape] for r in results]
    if all(d is not None for r in results for d in r.shape):
        return shapes
    fn = _pseudo_function(inputs, spec, constraints)
    variables = sorted({v for i in inputs for d in i.leaf.shape if isinstance(d, str)
                        for v in dimexpr.variables(dimexpr.parse(d))})
    meta = fn["dims"]

    def resolve(given: dict[str, int]) -> dict[str, int] | None:
        try:
            return resolve_dims(fn, given)
        except InputError:
            return None

    base = resolve({v: _clamp(5, meta.get(v, {})) for v in variables}) or resolve({}) or {}
    points: list[tuple[dict[str, int], list[tuple[int, ...]]]] = []
    out = probe(base) if base else None
    if out is not None:
        points.append((base, out))
    for v in variables if points else []:
        found = 0
        for step in _PROBE_STEPS:
            env = resolve({**base, v: base[v] + step}) or resolve({v: base[v] + step})
            if env is None or any(env == e for e, _ in points):
                continue
            out = probe(env)
            if out is not None:
                points.append((env, out))
                found += 1
                if found == 2:
                    break
    if points and len(variables) > 1:
        joint = resolve({v: points[0][0][v] + 3 for v in variables})
        out = probe(joint) if joint is not None and all(joint != e for e, _ in points) else None
        if joint is not None and out is not None:
            points.append((joint, out))
    if not points:
        raise ExportError(f"{display}: main's results have dynamic shapes, and shape refinement fails at every size "
                          f"tried for {', '.join(variables)}: the module does not accept the shapes the spec "
                          f"describes.")
    for k, r in enumerate(results):
        for axis, d in enumerate(r.shape):
            if d is not None:
                continue
            samples = [(env, out[k][axis]) for env, out in points]
            text = _fit(samples, variables)
            if text is None:
                seen = "; ".join(f"{', '.join(f'{v}={env[v]}' for v in variables)}: {n}" for env, n in samples[:4])
                raise ExportError(f"{display}: main's result {k} ({r.text}) has a dynamic size on axis {axis} that is "
                                  f"not a linear function of {', '.join(variables)} (sizes seen: {seen}). jaxport "
                                  f"records output shapes as expressions of the input dimensions: make that size "
                                  f"static, or specialize the input dimensions in the spec.")
            shapes[k][axis] = int(text) if text.lstrip("-").isdigit() else text
    return shapes


# --- serialization ------------------------------------------------------------------------------------------------


def _serialize(module: Any, display: str, warnings: list[str]) -> bytes:
    """The module as a portable artifact for the StableHLO version ``jax.export`` targets (about a month old, so
    that slightly older consumers read it), or for the newest version when the module needs newer features."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir.dialects import stablehlo

    target = stablehlo.get_version_from_compatibility_requirement(stablehlo.StablehloCompatibilityRequirement.WEEK_4)
    try:
        return bytes(jmlir.serialize_portable_artifact(module, target))
    except Exception as first:  # noqa: BLE001 - XLA reports every failure as one error type
        current = stablehlo.get_current_version()
        try:
            data = bytes(jmlir.serialize_portable_artifact(module, current))
        except Exception:  # noqa: BLE001
            raise ExportError(f"{display}: cannot write the module as a StableHLO portable artifact: "
                              f"{_first_error(first, display)}.") from None
        warnings.append(f"{display}: the module needs StableHLO {current} (it cannot be written for {target}, the "
                        f"version jax.export targets); consumers with an older StableHLO cannot read it.")
        return data


# --- importing -----------------------------------------------------------------------------------------------------


@dataclass
class Imported:
    """An imported module as a lowered function (the ``lower.Lowered`` that ``manifest.build_function_entry``
    describes), with the notes gathered on the way."""

    lowered: Any
    warnings: list[str]
    source_version: str | None


def _check_calling_convention(version: int | None) -> int:
    import jax
    from jax import export

    lo, hi = export.minimum_supported_calling_convention_version, export.maximum_supported_calling_convention_version
    if version is None:
        return int(jax.config.jax_export_calling_convention_version)  # type: ignore[attr-defined]
    if not lo <= version <= hi:
        raise UsageError(f"--calling-convention {version}: this JAX ({jax.__version__}) supports calling conventions "
                         f"{lo} to {hi}. State one of those; the module is wrapped to follow it.")
    return version


def build(module_path: str | Path, inputs: list[_Input] | None, spec: ShapeSpec, *, name: str, platforms: list[str],
          calling_convention: int, allow_custom_calls: list[str], strip_locations: bool = False) -> Imported:
    """Import one module as function ``name`` (see the module docstring); ``inputs`` None takes main's types."""
    import jax
    from jax import export, tree_util
    from jax.extend.mlir import ir

    from .._jax_internals import make_exported
    from ..checks import check_custom_calls
    from ..export import lower
    from ..module_scan import scan_module
    from ..module_scan import strip_locations as strip

    display = str(module_path)
    warnings: list[str] = []
    ctx, module, source_version = read_module(module_path)
    sig = main_signature(module, display)
    devices = _partitions(module)
    if devices > 1:
        raise EntrypointError(f"{display}: the module is partitioned for {devices} devices (mhlo.num_partitions, "
                              f"mhlo.num_replicas); jaxport imports single-device modules.")
    if inputs is None or (not inputs and sig.args):  # no spec, or a spec without arguments: main's own types
        inputs = _derived_inputs(sig, display)

    # The platform index: JAX passes one to a program exported for several platforms.
    has_index = sig.platform_index
    if not has_index and len(platforms) > 1 and len(sig.args) == len(inputs) + 1 and sig.args[0].shape == () \
            and sig.args[0].dtype in ("int32", "int64"):
        has_index = True  # older JAX wrote the platform index without the jax.global_constant attribute
        with ctx:
            _mark_platform_index(module)
        sig = main_signature(module, display)
    if has_index and len(platforms) < 2:
        raise SpecError(f"{spec.file}: main in {display} takes a platform index first (the module was lowered for "
                        f"several platforms); list those platforms, in the module's order, under 'platforms' (or "
                        f"repeat --platform).")
    arg_shapes = _check_against_main(inputs, sig, spec.file, display, has_index)

    symbolic = any(d is None for s in arg_shapes for d in s)
    uses_global_constants = symbolic or len(platforms) > 1
    if arg_shapes != [t.shape for t in sig.args] or sig.tuple_result or (len(platforms) > 1 and not has_index):
        wrap_main(module, arg_shapes, add_platform_index=len(platforms) > 1 and not has_index)
    dynamic_main = any(d is None for t in sig.args + sig.results for d in t.shape)
    if dynamic_main and not symbolic and len(platforms) == 1:
        # Every argument is static: refine now, so that the stored program has static shapes throughout.
        try:
            module = refine(_bytecode(module), [tuple(d for d in s if d is not None) for s in arg_shapes], ctx)
        except Exception as e:  # noqa: BLE001
            raise ExportError(f"{display}: shape refinement of main with the spec's static shapes failed: "
                              f"{_first_error(e, display)}.") from None
    with ctx:
        module.operation.attributes["jax.uses_shape_polymorphism"] = ir.BoolAttr.get(uses_global_constants)
    final = main_signature(module, display)
    serialized = _serialize(module, display, warnings)
    if strip_locations:
        serialized = strip(serialized)
    scan = scan_module(serialized)
    allowed = sorted(set(allow_custom_calls))
    check_custom_calls(display, scan, set(allowed))

    x64 = any(dtypes.is_64bit(t.dtype or "") for t in final.args + final.results)
    bounds, constraints = lower.function_constraints(inputs, spec)  # type: ignore[arg-type]
    plain = _bytecode(module)

    def probe(env: dict[str, int]) -> list[tuple[int, ...]] | None:
        shapes = [tuple(d if isinstance(d, int) else dimexpr.evaluate(dimexpr.parse(d), env) for d in i.leaf.shape)
                  for i in inputs]
        try:
            refined = refine(plain, shapes, ctx)
            return [tuple(d for d in t.shape if d is not None) for t in main_signature(refined, display).results]
        except Exception:  # noqa: BLE001 - a size the module refuses (a shape assertion, say): try another
            return None

    out_dims = _output_dims(final.results, inputs, spec, constraints, probe, display)

    with lower._config(jax_enable_x64=x64 or lower._x64_enabled()):
        try:
            scope = export.SymbolicScope(bounds + constraints)
        except Exception as e:  # noqa: BLE001 - JAX raises ValueError and its own shape-poly errors
            raise SpecError(f"{spec.file}: JAX rejects the constraints: {e}") from None

        def struct(dims: list[int | str], dtype: str, what: str) -> Any:
            text = ", ".join(str(d) for d in dims)
            try:
                shape = export.symbolic_shape(text, scope=scope) if dims else ()
            except Exception as e:  # noqa: BLE001
                raise SpecError(f"{what}: JAX rejects the shape [{text}]: {e}") from None
            return jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dtype))

        in_structs = [struct(list(i.leaf.shape), i.leaf.dtype, f"{i.leaf.where}: {i.spec_path}") for i in inputs]
        out_structs = [struct(d, str(t.dtype), f"{display}: result {k}")
                       for k, (d, t) in enumerate(zip(out_dims, final.results))]
        n_out = len(out_structs)
        out_tree = tree_util.tree_structure(0 if n_out == 1 else tuple(range(n_out)))
        exported = make_exported(
            fun_name=name, in_tree=tree_util.tree_structure((tuple(range(len(inputs))), {})), in_avals=in_structs,
            out_tree=out_tree, out_avals=out_structs, platforms=platforms, mlir_module_serialized=serialized,
            calling_convention_version=calling_convention, uses_global_constants=uses_global_constants,
            disabled_safety_checks=[export.DisabledSafetyCheck.custom_call(t) for t in allowed])
        _smoke_test(exported, inputs, spec, constraints, display, platforms)

    names = ["output"] if n_out == 1 else [str(k) for k in range(n_out)]
    output_tree: dict[str, Any] = {"output": 0} if n_out == 1 else {"tuple": [{"output": k} for k in range(n_out)]}
    signature = {"args": [{"input": k, "name": i.name} for k, i in enumerate(inputs) if i.spec_path.startswith("args")],
                 "kwargs": {i.name: {"input": k} for k, i in enumerate(inputs) if i.spec_path.startswith("kwargs")}}
    lowered = lower.Lowered(exported, name, [lower.InputLeaf(i.name, i.spec_path, i.leaf) for i in inputs],
                            signature, names, output_tree, x64, scan, input_positions=list(range(len(inputs))))
    return Imported(lowered, warnings, source_version)


def _mark_platform_index(module: Any) -> None:
    """Mark main's first argument as JAX's platform index (older JAX did not)."""
    from jax.extend.mlir import ir

    main = find_main(module, "<module>")
    n = len(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).inputs)
    attrs = _dict_attrs(main, "arg_attrs", n)
    attrs[0] = {**attrs[0], "jax.global_constant": ir.StringAttr.get(PLATFORM_INDEX)}
    main.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in attrs])


def _smoke_test(exported: Any, inputs: list[_Input], spec: ShapeSpec, constraints: list[str], display: str,
                platforms: list[str]) -> None:
    """Lower a call of the (serialized and read back) program at valid sizes, as ``jaxport call`` will: a module
    JAX cannot call fails here rather than at its first call. Nothing is compiled."""
    import jax
    from jax import export

    from ..artifact.contract import concrete_shape, resolve_dims

    local = export.default_export_platform()
    if local not in platforms:
        return
    fn = _pseudo_function(inputs, spec, constraints)
    try:
        env = resolve_dims(fn, {})
    except InputError:
        return
    structs = [jax.ShapeDtypeStruct(concrete_shape({"shape": list(i.leaf.shape)}, env), dtypes.to_numpy(i.leaf.dtype))
               for i in inputs]
    try:
        back = export.deserialize(exported.serialize())
        jax.jit(back.call).lower(*structs)
    except Exception as e:  # noqa: BLE001 - JAX and MLIR report a bad module in many ways
        raise ExportError(f"{display}: JAX cannot call the imported module: {_first_error(e, display)}.") from None


def function_name(module_path: str | Path) -> str:
    """The default function name: the module file's name without its suffix, as an identifier."""
    stem = Path(module_path).name.split(".")[0]
    stem = re.sub(r"\W", "_", stem) or "main"
    return stem if re.match(r"^[A-Za-z_]", stem) else f"_{stem}"


def import_stablehlo(
    module: str | Path,
    spec: ShapeSpec | str | Path | None = None,
    *,
    output: str | Path | None = None,
    calling_convention: int | None = None,
    platforms: list[str] | None = None,
    allow_custom_calls: list[str] | tuple[str, ...] = (),
    name: str | None = None,
    version: str | None = None,
    function: str | None = None,
    strip_locations: bool = False,
    write_manifest: bool = True,
) -> Any:
    """Import a StableHLO module written by another producer into an artifact; returns an ``ExportResult``.

    ``module`` is MLIR text, MLIR bytecode or a StableHLO portable artifact whose ``main`` is the function.
    ``spec`` (a spec file or a parsed ``ShapeSpec``) names and shapes main's arguments: ``args`` (named ``arg0``,
    ...) then ``kwargs`` (named by their keys), one array leaf per argument of main, with ``dims``,
    ``constraints``, ``platforms`` (default cpu), ``allow_custom_calls`` and ``metadata``; without a spec, or with
    no arguments in it, main's own (static) argument types are taken. ``calling_convention`` is the version
    recorded (default: the one this JAX's ``jax.export`` writes). The other options are those of ``export``;
    ``function`` names the function in the artifact (default: the module file's name).
    """
    from ..artifact import container, manifest
    from ..export import manifest as manifest_writer
    from ..export import pipeline
    from ..spec import check_artifact_name, check_platform, load_spec

    if spec is None:
        spec_obj = ShapeSpec("<no spec>", 1, {}, [], {None: FunctionSpec(None, None, [], {}, Where("<no spec>", 0))})
    elif isinstance(spec, ShapeSpec):
        spec_obj = spec
    else:
        spec_obj = load_spec(spec)
    convention = _check_calling_convention(calling_convention)
    plats = [check_platform(p, "--platform") for p in platforms] if platforms else (spec_obj.platforms or ["cpu"])
    plats = list(dict.fromkeys(plats))
    allowed = sorted(set(spec_obj.allow_custom_calls) | set(allow_custom_calls))
    fname = function or function_name(module)
    if not _IDENTIFIER.match(fname):
        raise UsageError(f"--function {fname!r}: a function name must be an identifier (letters, digits, '_').")
    inputs = _spec_inputs(spec_obj) if spec is not None else None

    meta = dict(spec_obj.metadata)
    meta.setdefault("labels", {})
    artifact_name = name or meta.get("name") or fname
    check_artifact_name(artifact_name, "--name" if name else "metadata.name")
    meta["name"] = artifact_name
    if version is not None:
        meta["version"] = str(version)
    for k in ("version", "description"):
        meta.setdefault(k, None)

    imported = build(module, inputs, spec_obj, name=fname, platforms=plats, calling_convention=convention,
                     allow_custom_calls=allowed, strip_locations=strip_locations)
    low = imported.lowered
    payload = f"functions/{fname}.jaxexport"
    entry = f"{pipeline._relative(Path(module))}:main"
    members: dict[str, Any] = {payload: bytes(low.exported.serialize())}
    spec_file = spec is not None and bool(spec_obj.file) and not spec_obj.file.startswith("<")
    m = {
        "format": manifest.FORMAT_NAME,
        "format_version": manifest.FORMAT_VERSION,
        "producer": manifest_writer.versions(),
        "metadata": meta,
        "source": {"spec": pipeline._relative(Path(spec_obj.file)) if spec_file else None},
        "members": {},
        "functions": {fname: manifest_writer.build_function_entry(low, spec_obj, entry, payload, allowed)},
    }
    out = Path(output) if output is not None else Path(f"{artifact_name}.jaxport")
    if out.is_dir():
        out = out / f"{artifact_name}.jaxport"
    raw = container.write_artifact(out, m, members)
    sidecar = None
    if write_manifest:
        sidecar = out.with_name(out.name + ".manifest.json")
        container.atomic_write(sidecar, lambda fh: fh.write(raw))
    return pipeline.ExportResult(path=out, manifest=m, size=out.stat().st_size, manifest_path=sidecar,
                                 warnings=imported.warnings)


def module_function(module_path: str | Path, f: Mapping[str, Any]) -> Callable[..., Any]:
    """The module's ``main`` as a JAX-callable function with the signature a manifest records for it, imported
    afresh from the file (``verify`` uses it as the live function of an imported artifact)."""
    spec, inputs = _spec_from_manifest(f, str(module_path))
    imported = build(module_path, inputs, spec, name=function_name(module_path),
                     platforms=list(f.get("platforms") or ["cpu"]),
                     calling_convention=_check_calling_convention(None),
                     allow_custom_calls=list(f.get("allowed_custom_calls") or []))
    exported = imported.lowered.exported
    sig = f.get("signature") or {"args": [{"input": k} for k in range(len(inputs))], "kwargs": {}}
    order = [a["input"] for a in sig.get("args") or []] + [v["input"] for v in (sig.get("kwargs") or {}).values()]
    keywords = list(sig.get("kwargs") or {})

    def call(*args: Any, **kwargs: Any) -> Any:
        flat: list[Any] = [None] * len(inputs)
        for position, value in zip(order, list(args) + [kwargs[k] for k in keywords]):
            flat[position] = value
        return exported.call(*flat)

    call.__name__ = Path(module_path).name
    return call
