"""The arguments and results of an imported function: the spec's inputs checked against ``main``'s signature, and
each dynamic output dimension fitted as a linear expression of the input dimension variables.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .. import dtypes
from ..artifact import model
from ..artifact.bounds import Bounds
from ..artifact.contract import resolve_dims
from ..artifact.model import Function
from ..errors import ExportError, InputError, SpecError
from ..export.lowering.lower import InputLeaf, used_variables
from ..spec import ArrayLeaf, ConstraintSpec, DimVar, FunctionSpec, ShapeSpec, Where
from .mlir import MainSignature, TensorType

#: Offsets tried, per dimension variable, when sampling the module's output shapes: upwards first, then downwards
#: (for a variable whose upper bound is the base size, down to its lower bound, 0 included).
_PROBE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, -1, -2, -3, -4)


# --- the spec ------------------------------------------------------------------------------------------------------


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_identifier(name: str) -> bool:
    """Whether ``name`` is an identifier (letters, digits, '_'): a name callers can pass an argument by."""
    return bool(_IDENTIFIER.match(name))


def spec_inputs(spec: ShapeSpec) -> list[InputLeaf]:
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
    found: list[InputLeaf] = []
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
            found.append(InputLeaf(name, path, leaf))
            continue
        what = {"StaticLeaf": "a static value", "BindLeaf": "a bound value"}.get(
            type(leaf).__name__, "a list" if isinstance(leaf, list) else "a dict")
        where = getattr(leaf, "where", fspec.where)
        raise SpecError(f"{where}: {path} is {what}; a StableHLO module takes a flat list of arrays, so an imported "
                        f"argument is one array leaf such as 'f32[b, 3]' per argument of main.")
    return found


def derived_inputs(sig: MainSignature, display: str) -> list[InputLeaf]:
    """Inputs taken from ``main``'s argument types, for an import without argument specs (static shapes only)."""
    found = []
    for i, t in enumerate(sig.args):
        if any(d is None for d in t.shape):
            raise SpecError(f"{display}: main's argument {i} ({t.text}) has dynamic dimensions; give a spec "
                            f"(--shapes) whose 'args' name them, e.g. args: [\"{_example(t)}\"].")
        found.append(InputLeaf(f"arg{i}", f"args[{i}]", ArrayLeaf(tuple(d for d in t.shape if d is not None),
                                                                str(t.dtype), Where(display, 0))))
    return found


def _example(t: TensorType) -> str:
    short = dtypes.BY_NAME[t.dtype].short if t.dtype in dtypes.BY_NAME else "f32"
    names = iter(("b", "n", "m", "k", "p", "q"))
    return f"{short}[{', '.join(str(d) if d is not None else next(names, 'd') for d in t.shape)}]"


def _leaf_text(leaf: ArrayLeaf) -> str:
    short = dtypes.BY_NAME[leaf.dtype].short
    return f"{short}[{leaf.shape_text()}]"


def check_against_main(inputs: list[InputLeaf], sig: MainSignature, spec_file: str, display: str,
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


def spec_from_manifest(fn: Function, where: str) -> tuple[ShapeSpec, list[InputLeaf]]:
    """A spec and inputs equivalent to a manifest function's signature (to re-import its module)."""
    w = Where(where, 0)
    dims = {v: DimVar(v, b.lo, b.hi, w) for v, b in fn.bounds.items()}
    constraints = [ConstraintSpec(c, w) for c in fn.constraints]
    inputs = [InputLeaf(i.name, i.spec_path or f"args[{k}]", ArrayLeaf(tuple(i.shape), i.dtype, w))
              for k, i in enumerate(fn.inputs)]
    fspec = FunctionSpec(None, None, [], {}, w)
    return ShapeSpec(where, 1, dims, constraints, {None: fspec}), inputs

# --- output shapes -------------------------------------------------------------------------------------------------


def pseudo_function(inputs: list[InputLeaf], spec: ShapeSpec, constraints: list[str]) -> Function:
    """The function ``contract.resolve_dims`` reads: the inputs, with the bounds and constraints of the spec (the
    rest of the function does not exist yet)."""
    used = used_variables(inputs)
    dims = {v: model.DimVar(Bounds.of(d)) for v, d in spec.dims.items() if v in used}
    return Function("", 0, (), tuple(model.Input(i.name, tuple(i.leaf.shape), i.leaf.dtype) for i in inputs), (),
                    model.Signature(), dims=dims, constraints=tuple(constraints))


def _clamp(value: int, b: Bounds) -> int:
    """``value`` moved inside the bounds ``b``."""
    return max(b.lo, min(value, b.hi)) if b.hi is not None else max(b.lo, value)


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


def output_dims(results: list[TensorType], inputs: list[InputLeaf], spec: ShapeSpec, constraints: list[str],
                probe: Callable[[dict[str, int]], list[tuple[int, ...]] | None],
                display: str) -> list[list[int | str]]:
    """Each result's dimensions: static ones as they are, dynamic ones as linear expressions of the input dimension
    variables, fitted to the shapes shape refinement gives at sample sizes and checked at others."""
    shapes: list[list[int | str]] = [[d if d is not None else "?" for d in r.shape] for r in results]
    if all(d is not None for r in results for d in r.shape):
        return shapes
    fn = pseudo_function(inputs, spec, constraints)
    variables = sorted(used_variables(inputs))

    def resolve(given: dict[str, int]) -> dict[str, int] | None:
        try:
            return resolve_dims(fn, given)
        except InputError:
            return None

    base = resolve({v: _clamp(5, fn.bounds_of(v)) for v in variables}) or resolve({}) or {}
    points: list[tuple[dict[str, int], list[tuple[int, ...]]]] = []
    out = probe(base) if base else None
    if out is not None:
        points.append((base, out))
    for v in variables if points else []:
        found = 0
        for step in _PROBE_STEPS:
            if base[v] + step < 0:
                continue
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
