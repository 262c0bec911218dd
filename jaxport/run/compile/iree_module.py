"""Assembling a deployable IREE module: one function per shape bucket, bound tensors as named parameters.

Each bucket's program, specialized to static shapes (``iree.specialize``), takes the bound tensors and then the free
inputs. :func:`assemble` puts the buckets' programs into one module as private functions and gives each bucket a
public function taking only the free inputs, which loads the bound tensors from ``util.global``\\ s initialized by
name from a parameter archive (``#stream.parameter.named<"model"::"params/w1">``): IREE reads them at run time from
the ``.irpa`` file that :func:`write_archive` writes, so the module holds no weights and every bucket shares them.
The result is MLIR text for ``iree.compile_module``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import dtypes
from ..._fsio import atomic_write
from ...arrayfiles import subbyte
from ...errors import PlatformError
from ...jaxprivate.mlir import make_ir_context
from ..iree import RUN_WITH_JAX, iree_packages

#: The parameter scope the module names its bound tensors in (``iree-run-module --parameters=model=FILE.irpa``).
SCOPE = "model"


@dataclass(frozen=True)
class Specialized:
    """One bucket's program: the public function's name, and the program (MLIR text with a ``main``)."""

    name: str
    text: str


def _string(text: str) -> str:
    """An MLIR string literal."""
    out = []
    for ch in text:
        if ch in '"\\' or not (" " <= ch <= "~"):
            out.append("".join(f"\\{b:02X}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def signature(text: str) -> tuple[list[str], list[str]]:
    """The argument and result types of a specialized program's ``main``, as MLIR spells them."""
    with make_ir_context():
        from jax.extend.mlir import ir
        from jax.extend.mlir.dialects import func

        module = ir.Module.parse(text)
        for view in module.body.operations:
            if isinstance(view, func.FuncOp) and view.sym_name.value == "main":
                ftype = ir.FunctionType(view.function_type.value)
                return [str(t) for t in ftype.inputs], [str(t) for t in ftype.results]
    raise PlatformError(f"the specialized program has no main function; {RUN_WITH_JAX}.")


def _renamed(text: str, prefix: str) -> str:
    """The program's functions, each renamed ``prefix + name`` and private, as MLIR text (without the module)."""
    with make_ir_context():
        from jax.extend.mlir import ir
        from jax.extend.mlir.dialects import func

        module = ir.Module.parse(text)
        funcs = [op for op in module.body.operations if isinstance(op, func.FuncOp)]
        names = [f.sym_name.value for f in funcs]
        for name in names:
            ir.SymbolTable.replace_all_symbol_uses(name, prefix + name, module.operation)
        for f, name in zip(funcs, names):
            f.sym_name = ir.StringAttr.get(prefix + name)
            f.sym_visibility = ir.StringAttr.get("private")
        others = [op.operation.name for op in module.body.operations if op.operation.name != "func.func"]
        if others:
            raise PlatformError(f"the specialized program holds {others[0]} beside its functions; {RUN_WITH_JAX}.")
        text = "\n".join(str(f.operation.get_asm(enable_debug_info=False)) for f in funcs)
        if "dense_resource<" in text:  # their bytes live in the module's resource section, not in the functions
            raise PlatformError(f"the specialized program keeps constants as MLIR resources, which jaxport cannot move "
                                f"into a deployable module yet; {RUN_WITH_JAX}.")
        return text


def assemble(programs: Sequence[Specialized], weight_names: Sequence[str]) -> str:
    """One module holding every bucket's public function (see the module docstring). Each program's ``main`` takes
    ``len(weight_names)`` bound tensors, then the free inputs."""
    n = len(weight_names)
    lines = ["module @jaxport {"]
    weight_types: list[str] | None = None
    bodies = []
    for p in programs:
        args, results = signature(p.text)
        if weight_types is None:
            weight_types = args[:n]
            for i, (name, t) in enumerate(zip(weight_names, weight_types)):
                lines.append(f"  util.global private @__jaxport_param_{i} = "
                             f"#stream.parameter.named<{_string(SCOPE)}::{_string(name)}> : {t}")
        prefix = f"__jaxport_{p.name}__"
        bodies.append(_renamed(p.text, prefix))
        inputs = args[n:]
        params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(inputs))
        body = [f"  func.func @{p.name}({params}) -> ({', '.join(results)}) {{"]
        operands = []
        for i, t in enumerate(weight_types or []):
            body.append(f"    %p{i} = util.global.load @__jaxport_param_{i} : {t}")
            operands.append(f"%p{i}")
        operands += [f"%arg{i}" for i in range(len(inputs))]
        call_type = f"({', '.join(args)}) -> ({', '.join(results)})"
        head = "%r" if len(results) == 1 else f"%r:{len(results)}"
        body.append(f"    {head} = func.call @{prefix}main({', '.join(operands)}) : {call_type}")
        shown = "%r" if len(results) == 1 else ", ".join(f"%r#{i}" for i in range(len(results)))
        body.append(f"    return {shown} : {', '.join(results)}" if results else "    return")
        body.append("  }")
        bodies.append("\n".join(body))
    lines += bodies
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_archive(path: str | Path, tensors: Sequence[tuple[str, Any]], inputs: Sequence[str | Path] = ()) -> int:
    """Write the bound tensors as an IREE parameter archive (``.irpa``) at ``path``, each under its name, in the
    given order; returns the file's size. Written next to ``path`` and renamed over it, as every output is."""
    import numpy as np

    _, runtime = iree_packages()
    index = runtime.ParameterIndex()
    for name, value in tensors:
        array = np.ascontiguousarray(np.asarray(value))
        d = dtypes.from_numpy(array.dtype)
        if d is not None and d.packed:  # IREE reads an i4 parameter as its packed bytes
            flat = subbyte.pack(array)
        else:
            flat = array.reshape(-1).view(np.uint8) if array.ndim else array.reshape(1).copy().view(np.uint8)
        index.add_buffer(name, flat)
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    with tempfile.TemporaryDirectory(dir=parent, prefix=".jaxport-irpa-") as tmp:
        built = os.path.join(tmp, "parameters.irpa")
        index.create_archive_file(built)
        with open(built, "rb") as src:
            atomic_write(path, lambda f: shutil.copyfileobj(src, f, 1 << 22), inputs=inputs)
        return os.path.getsize(built)
