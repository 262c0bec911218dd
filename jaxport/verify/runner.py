"""Verification: run an artifact and the live function it was exported from on the same inputs, and compare.

For each function, :func:`plan_cases` picks assignments of the dimension variables from the manifest's bounds and
constraints: the smallest valid values, then for each variable a value that is not a power of two and its upper
bound (or, without one, a large value), each with the other variables at the smallest values the constraints allow.
Each case's inputs and outputs are kept under a memory budget (:data:`DEFAULT_BUDGET_BYTES`): a larger value is
scaled down until they fit, and the case says so. ``dims`` replaces the plan with the product of the values given.

Inputs are seeded random arrays (:func:`make_inputs`); the artifact runs through :func:`jaxport.load`, and the live
function is called as the export called it: under ``jax.jit``, positional arguments in order with the manifest
signature's static values put back, keyword arguments by name, bound weights loaded again from their source. Every
output is compared with :func:`compare` against per-dtype tolerances (:data:`TOLERANCES`). When the artifact carries
derivatives (``vjp_order >= 1``), each case also compares the input cotangents of the artifact's stored VJP with
``jax.vjp`` of the live function, for the same seeded output cotangents, as outputs named ``vjp(INPUT)``.

When a spec is given (or the one the manifest records is found), :func:`spec_differences` checks that it describes
the artifact's signature: arguments, dtypes, shapes, static values, bounds and constraints.

Everything here imports JAX only when it runs something.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import dimexpr, dtypes
from ..artifact import contract
from ..artifact.calltree import recorded_source
from ..artifact.container import open_artifact
from ..errors import EntrypointError, InputError, JaxportError, PlatformError, UsageError, VerificationError

#: Each case's inputs and outputs together stay under this many bytes (unless the smallest shapes already exceed
#: it, or ``--dim`` asks for more).
DEFAULT_BUDGET_BYTES = 64 << 20
#: The "large" value of a dimension variable without an upper bound.
LARGE_VALUE = 4096
#: Candidates for "a value that is not a power of two", the first that fits the bounds is used.
_NOT_POWERS_OF_TWO = (7, 13, 37, 100, 1000)
#: At most this many cases per function and platform (``--dim`` lists multiply).
MAX_CASES = 256

#: Default ``(atol, rtol)`` by output dtype: an output passes when ``|artifact - live| <= atol + rtol * |live|``
#: everywhere (NaN matching NaN, infinities matching in sign). Integers and booleans must be equal.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-9),
    "complex128": (1e-12, 1e-9),
    "float32": (1e-6, 1e-5),
    "complex64": (1e-6, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}
#: Signed and unsigned integer inputs are drawn from [0, INT_HIGH): valid indices into any axis of at least that
#: size, and products of two values fit in int8.
INT_HIGH = 8


# --- planning the cases ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One assignment of the dimension variables: why it was chosen, and a note when it was scaled down."""

    label: str
    dims: dict[str, int]
    note: str | None = None


def _shape(dims: list[Any], env: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else dimexpr.evaluate(dimexpr.parse(d), dict(env)) for d in dims)


def case_bytes(f: Mapping[str, Any], env: Mapping[str, int]) -> int:
    """Bytes of a function's inputs and outputs at an assignment (outputs that cannot be evaluated count 0)."""
    total = 0
    for arr in list(f["inputs"]) + list(f["outputs"]):
        try:
            shape = _shape(arr["shape"], env)
        except dimexpr.DimExprError:
            continue
        n = dtypes.BY_NAME[arr["dtype"]].itemsize
        for d in shape:
            n *= max(d, 0)
        total += n
    return total


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _resolve(f: Mapping[str, Any], given: dict[str, int]) -> dict[str, int] | None:
    try:
        return contract.resolve_dims(f, given)
    except InputError:
        return None


def _fit(f: Mapping[str, Any], var: str, value: int, lowest: int, why: str, budget: int) -> Case | None:
    """The case ``var = value`` (others at their smallest valid values), scaled down to the budget if needed."""
    wanted = value
    while True:
        env = _resolve(f, {var: value})
        if env is not None and case_bytes(f, env) <= budget:
            note = None
            if value != wanted:
                note = (f"{var}={wanted} scaled down to {value}: its inputs and outputs would take more than "
                        f"{_mb(budget)}")
            return Case(f"{var}: {why}", env, note)
        if value <= lowest:
            return None
        value = max(lowest, value * 3 // 4)


def _not_power_of_two(lo: int, hi: int | None) -> list[int]:
    picks = [v for v in _NOT_POWERS_OF_TWO if v > lo and (hi is None or v <= hi)]
    extra = [v for v in (lo + 1, lo + 2) if not _is_power_of_two(v) and (hi is None or v <= hi)]
    return picks + extra


def plan_cases(f: Mapping[str, Any], chosen: Mapping[str, list[int]] | None = None,
               budget: int = DEFAULT_BUDGET_BYTES) -> list[Case]:
    """The dimension assignments to verify a function at (see the module docstring)."""
    variables = contract.dimension_variables(f)
    if not variables:
        return [Case("fixed shapes", {})]
    if chosen:
        names = list(chosen)
        count = 1
        for n in names:
            count *= len(chosen[n])
        if count > MAX_CASES:
            raise UsageError(f"--dim asks for {count} combinations; at most {MAX_CASES} are allowed. Give fewer "
                             f"values.")
        planned = []
        for combo in itertools.product(*(chosen[n] for n in names)):
            given = dict(zip(names, combo))
            env = contract.resolve_dims(f, given)
            planned.append(Case("--dim", env))
        return _dedupe(planned)
    base = contract.resolve_dims(f, {})
    meta = f.get("dims") or {}
    planned = [Case("smallest valid", base, None if case_bytes(f, base) <= budget else
                    f"the smallest shapes already take {_mb(case_bytes(f, base))}")]
    uppers: dict[str, int] = {}
    for v in variables:
        lo, hi = base[v], (meta.get(v) or {}).get("max")
        for candidate in _not_power_of_two(lo, hi):
            if _resolve(f, {v: candidate}) is not None:
                case = _fit(f, v, candidate, lo, "not a power of two", budget)
                if case is not None:
                    planned.append(case)
                break
        if hi is not None:
            uppers[v] = hi
            case = _fit(f, v, hi, lo, "upper bound", budget)
        else:
            case = _fit(f, v, max(LARGE_VALUE, 2 * lo), lo, "large", budget)
        if case is not None:
            planned.append(case)
    if len(uppers) > 1:
        together = _resolve(f, uppers)
        if together is not None and case_bytes(f, together) <= budget:
            planned.append(Case("all upper bounds", together))
    return _dedupe(planned)


def _dedupe(cases: list[Case]) -> list[Case]:
    seen: dict[tuple[tuple[str, int], ...], int] = {}
    out: list[Case] = []
    for c in cases:
        key = tuple(sorted(c.dims.items()))
        if key in seen:
            continue
        seen[key] = len(out)
        out.append(c)
    return out


# --- inputs ----------------------------------------------------------------------------------------------------


def make_inputs(f: Mapping[str, Any], env: Mapping[str, int], seed: int = 0) -> dict[str, Any]:
    """Seeded random arrays for a function's inputs: floats standard normal, integers in [0, INT_HIGH), booleans
    fair coin flips."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for inp in f["inputs"]:
        shape = _shape(inp["shape"], env)
        kind = dtypes.BY_NAME[inp["dtype"]].kind
        target = dtypes.to_numpy(inp["dtype"])
        if kind == "float":
            arr = rng.standard_normal(shape).astype(target)
        elif kind == "complex":
            arr = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(target)
        elif kind in ("int", "uint"):
            arr = rng.integers(0, INT_HIGH, size=shape).astype(target)
        else:
            arr = rng.random(shape) < 0.5
        out[inp["name"]] = arr
    return out


# --- comparing outputs -----------------------------------------------------------------------------------------


def tolerance(dtype: str, atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    """``(atol, rtol)`` for an output dtype; ``atol``/``rtol`` override the defaults of :data:`TOLERANCES`."""
    default_atol, default_rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    return (default_atol if atol is None else atol), (default_rtol if rtol is None else rtol)


@dataclass
class OutputResult:
    """How one output of one case compares: errors of the artifact's values against the live function's."""

    name: str
    dtype: str
    shape: list[int]
    size: int
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched: int = 0
    worst: dict[str, Any] | None = None  # {"index": [...], "expected": x, "actual": y}
    problem: str | None = None  # a structural mismatch: shape or dtype

    @property
    def passed(self) -> bool:
        return self.problem is None and self.mismatched == 0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape, "size": self.size,
                "passed": self.passed, "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
                "atol": self.atol, "rtol": self.rtol, "mismatched": self.mismatched, "worst": self.worst,
                "problem": self.problem}

    def describe(self) -> str:
        if self.problem:
            return f"output {self.name!r}: {self.problem}"
        text = f"output {self.name!r}: {self.mismatched} of {self.size} values differ"
        if self.max_abs_error is not None:
            text += f" (max abs error {self.max_abs_error:.3g}, tolerance {self.atol:g} + {self.rtol:g}*|expected|)"
        if self.worst:
            text += (f"; worst at index {tuple(self.worst['index'])}: artifact {_show(self.worst['actual'])}, live "
                     f"{_show(self.worst['expected'])}")
        return text


def _show(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _scalar(v: Any) -> Any:
    import math

    if isinstance(v, complex):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def compare(name: str, expected: Any, actual: Any, atol: float | None = None,
            rtol: float | None = None) -> OutputResult:
    """Compare an artifact output (``actual``) with the live function's (``expected``)."""
    import numpy as np

    e, a = np.asarray(expected), np.asarray(actual)
    dtype = str(a.dtype)
    at, rt = tolerance(str(e.dtype), atol, rtol)
    result = OutputResult(name, dtype, [int(d) for d in a.shape], int(a.size), at, rt)
    if e.shape != a.shape:
        result.problem = f"shape {tuple(a.shape)} from the artifact, {tuple(e.shape)} from the live function"
        return result
    if str(e.dtype) != dtype:
        result.problem = f"dtype {dtype} from the artifact, {e.dtype} from the live function"
        return result
    if a.size == 0:
        result.max_abs_error = result.max_rel_error = 0.0
        return result
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the non-finite values are compared apart
        _errors(result, e, a, dtype, at, rt)
    return result


def _errors(result: OutputResult, e: Any, a: Any, dtype: str, at: float, rt: float) -> None:
    import numpy as np

    kind = dtypes.BY_NAME[dtype].kind if dtype in dtypes.BY_NAME else a.dtype.kind
    if kind in ("float", "complex"):
        wide = np.complex128 if kind == "complex" else np.float64
        ew, aw = e.astype(wide), a.astype(wide)
        finite = np.isfinite(ew) & np.isfinite(aw)
        same_special = (np.isnan(ew) & np.isnan(aw)) | (ew == aw)
        diff = np.where(finite, np.abs(aw - ew), 0.0)
        ref = np.abs(np.where(finite, ew, 0.0))
        bad = np.where(finite, diff > at + rt * ref, ~same_special)
        excess = np.where(finite, diff - (at + rt * ref), np.where(bad, np.inf, -np.inf))
    elif kind == "bool":
        ew, aw = e.astype(np.int64), a.astype(np.int64)
        diff = np.abs(aw - ew).astype(np.float64)
        ref = np.abs(ew).astype(np.float64)
        bad = diff > at + rt * ref
        excess = diff - (at + rt * ref)
    else:
        exact = a != e
        ew, aw = e.astype(np.float64), a.astype(np.float64)
        diff = np.where(exact, np.maximum(np.abs(aw - ew), 1.0), 0.0)  # at least 1 where the integers differ
        ref = np.abs(ew)
        bad = exact & (diff > at + rt * ref)
        excess = np.where(exact, diff - (at + rt * ref), -np.inf)
    result.max_abs_error = float(diff.max())
    nonzero = ref > 0
    result.max_rel_error = float((diff[nonzero] / ref[nonzero]).max()) if nonzero.any() else (
        0.0 if result.max_abs_error == 0 else None)
    result.mismatched = int(np.count_nonzero(bad))
    if result.mismatched:
        idx = np.unravel_index(int(np.argmax(excess)), a.shape)
        result.worst = {"index": [int(i) for i in idx], "expected": _scalar(e[idx].item()),
                        "actual": _scalar(a[idx].item())}


# --- the spec ---------------------------------------------------------------------------------------------------


def _equalities(texts: list[str]) -> list[tuple[str, dimexpr.Expr]]:
    out = []
    for t in texts:
        try:
            c = dimexpr.parse_constraint(t)
        except dimexpr.DimExprError:
            continue
        if c.op == "==" and c.lhs.op == "var":
            out.append((str(c.lhs.value), c.rhs))
    return out


def _same_dimension(a: int | str, b: int | str, equalities: list[tuple[str, dimexpr.Expr]]) -> bool:
    """Whether two dimensions are the same expression: equal text, or equal values at sample assignments (with the
    equality constraints applied, as JAX applies them to shapes)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    ea, eb = dimexpr.parse(a), dimexpr.parse(b)
    if str(ea) == str(eb):
        return True
    names = sorted(dimexpr.variables(ea) | dimexpr.variables(eb) | {v for v, _ in equalities})
    for trial in range(8):
        rng = random.Random(trial)
        env = {v: rng.randint(2, 1000) for v in names}
        for _ in range(3):
            for v, rhs in equalities:
                with contextlib.suppress(dimexpr.DimExprError):
                    env[v] = dimexpr.evaluate(rhs, env)
        try:
            if dimexpr.evaluate(ea, env) != dimexpr.evaluate(eb, env):
                return False
        except dimexpr.DimExprError:
            return False
    return True


def _static(value: Any) -> Any:
    """A manifest static value as the export passed it: lists become tuples (the spec's rule)."""
    if isinstance(value, list):
        return tuple(_static(v) for v in value)
    return value


def _norm_static(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm_static(v) for v in value]
    return value


def _compact(text: str) -> str:
    return "".join(text.split())


def _spec_tree_text(tree: Any) -> str:
    from ..spec import ArrayLeaf, StaticLeaf

    if isinstance(tree, ArrayLeaf):
        return f"an array {dtypes.BY_NAME[tree.dtype].short}[{tree.shape_text()}]"
    if isinstance(tree, StaticLeaf):
        return f"a static value {tree.value!r}"
    if isinstance(tree, dict):
        return f"a dict with keys {sorted(tree)}"
    if isinstance(tree, list):
        return f"a list of {len(tree)}"
    if hasattr(tree, "source"):
        return f"weights bound to {tree.source}"
    return type(tree).__name__


def _node_text(node: Mapping[str, Any], f: Mapping[str, Any]) -> str:
    from ..artifact.summary import array_type

    if "input" in node:
        return f"an array {array_type(f['inputs'][node['input']])}"
    if "static" in node:
        return f"a static value {node['static']!r}"
    if "bound" in node:
        return f"weights bound to {node['bound']}"
    if "dict" in node:
        return f"a dict with keys {sorted(node['dict'])}"
    if "list" in node:
        return f"a list of {len(node['list'])}"
    return "an unknown node"


def spec_differences(spec: Any, fname: str, f: Mapping[str, Any], n_functions: int = 1) -> list[str]:
    """How a parsed spec's description of function ``fname`` differs from its manifest entry (empty: it
    describes it). Platforms and metadata are not compared: the export command line may override them."""
    from ..spec import ArrayLeaf, StaticLeaf

    if fname in spec.functions:
        fspec = spec.functions[fname]
    elif None in spec.functions and n_functions == 1:
        fspec = spec.functions[None]
    else:
        named = [n for n in spec.functions if n is not None]
        described = f"describes {', '.join(named)}" if named else "describes a single function"
        return [f"the spec has no function {fname!r} (it {described})"]

    sig = f.get("signature") or {"args": [{"input": i, "name": i_["name"]} for i, i_ in enumerate(f["inputs"])],
                                 "kwargs": {}}
    constraints = list(f.get("constraints") or []) + [c.text for c in spec.constraints]
    eqs = _equalities(constraints)
    out: list[str] = []

    def walk(node: Mapping[str, Any], tree: Any, path: str) -> None:
        if "input" in node and isinstance(tree, ArrayLeaf):
            inp = f["inputs"][node["input"]]
            if inp["dtype"] != tree.dtype:
                out.append(f"{path}: dtype {inp['dtype']} in the artifact, {tree.dtype} in the spec")
            declared = list(inp["shape"])
            if len(declared) != len(tree.shape) or not all(
                    _same_dimension(a, b, eqs) for a, b in zip(declared, tree.shape)):
                out.append(f"{path}: shape [{', '.join(map(str, declared))}] in the artifact, "
                           f"[{tree.shape_text()}] in the spec")
        elif "static" in node and isinstance(tree, StaticLeaf):
            if _norm_static(node["static"]) != _norm_static(tree.value):
                out.append(f"{path}: static value {node['static']!r} in the artifact, "
                           f"{_norm_static(tree.value)!r} in the spec")
        elif "bound" in node and hasattr(tree, "source") and not isinstance(tree, (ArrayLeaf, StaticLeaf)):
            if node["bound"] != recorded_source(tree.source):
                out.append(f"{path}: weights bound to {node['bound']} in the artifact, to {tree.source} in the spec")
        elif "dict" in node and isinstance(tree, dict):
            keys, spec_keys = list(node["dict"]), list(tree)
            if set(keys) != set(spec_keys):
                out.append(f"{path}: dict keys {sorted(keys)} in the artifact, {sorted(spec_keys)} in the spec")
            for k in keys:
                if k in tree:
                    walk(node["dict"][k], tree[k], f"{path}[{k!r}]")
        elif "list" in node and isinstance(tree, list):
            if len(node["list"]) != len(tree):
                out.append(f"{path}: a list of {len(node['list'])} in the artifact, of {len(tree)} in the spec")
            for i, (sub, t) in enumerate(zip(node["list"], tree)):
                walk(sub, t, f"{path}[{i}]")
        else:
            out.append(f"{path}: {_node_text(node, f)} in the artifact, {_spec_tree_text(tree)} in the spec")

    args = list(sig.get("args") or [])
    if len(args) != len(fspec.args):
        out.append(f"args: {len(args)} positional argument{'s' if len(args) != 1 else ''} in the artifact, "
                   f"{len(fspec.args)} in the spec")
    for i, (node, tree) in enumerate(zip(args, fspec.args)):
        walk(node, tree, f"args[{i}]")
    kwargs = dict(sig.get("kwargs") or {})
    for k in kwargs:
        if k not in fspec.kwargs:
            out.append(f"kwargs[{k!r}]: in the artifact, not in the spec")
    for k in fspec.kwargs:
        if k not in kwargs:
            out.append(f"kwargs[{k!r}]: in the spec, not in the artifact")
        else:
            walk(kwargs[k], fspec.kwargs[k], f"kwargs[{k!r}]")

    used = set(contract.dimension_variables(f))
    meta = f.get("dims") or {}
    for v in [v for v in meta] + sorted(used - set(meta)):
        a_lo, a_hi = (meta.get(v) or {}).get("min") or 1, (meta.get(v) or {}).get("max")
        d = spec.dims.get(v)
        s_lo, s_hi = (d.min or 1) if d else 1, d.max if d else None
        if (a_lo, a_hi) != (s_lo, s_hi):
            out.append(f"dims[{v!r}]: {_bounds(v, a_lo, a_hi)} in the artifact, {_bounds(v, s_lo, s_hi)} in the spec")
    spec_used = used | _tree_variables(fspec)
    artifact_constraints = {_compact(c): c for c in f.get("constraints") or []}
    spec_constraints = {_compact(c.text): c.text for c in spec.constraints
                        if dimexpr.parse_constraint(c.text).variables() <= spec_used}
    for k, text in artifact_constraints.items():
        if k not in spec_constraints:
            out.append(f"constraints: {text!r} in the artifact, not in the spec")
    for k, text in spec_constraints.items():
        if k not in artifact_constraints:
            out.append(f"constraints: {text!r} in the spec, not in the artifact")
    return out


def _bounds(var: str, lo: int, hi: int | None) -> str:
    return f"{lo} <= {var} <= {hi}" if hi is not None else f"{var} >= {lo}"


def _tree_variables(fspec: Any) -> set[str]:
    from ..spec import ArrayLeaf

    found: set[str] = set()

    def walk(tree: Any) -> None:
        if isinstance(tree, ArrayLeaf):
            for d in tree.shape:
                if isinstance(d, str):
                    found.update(dimexpr.variables(dimexpr.parse(d)))
        elif isinstance(tree, dict):
            for v in tree.values():
                walk(v)
        elif isinstance(tree, list):
            for v in tree:
                walk(v)

    for a in fspec.args:
        walk(a)
    for v in fspec.kwargs.values():
        walk(v)
    return found


# --- the live function -----------------------------------------------------------------------------------------


def _key_name(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


class LiveFunction:
    """The original function, called as the export called it (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], f: Mapping[str, Any], bind_dir: Path, where: str):
        import jax

        self.f = f
        sig = f.get("signature") or {"args": [{"input": i, "name": inp["name"]} for i, inp in enumerate(f["inputs"])],
                                     "kwargs": {}}
        self._trees: dict[str, Any] = {}
        self._weights: dict[str, Any] = {}
        self._find_bound(sig, bind_dir, where)
        trees = self._trees

        def build(node: Mapping[str, Any], flat: list[Any], weights: dict[str, Any], path: str) -> Any:
            if "input" in node:
                return flat[node["input"]]
            if "static" in node:
                return _static(node["static"])
            if "bound" in node:
                return trees[path].rebuild(weights)
            if "dict" in node:
                return {k: build(v, flat, weights, f"{path}/{k}") for k, v in node["dict"].items()}
            if "list" in node:
                return [build(v, flat, weights, f"{path}/{i}") for i, v in enumerate(node["list"])]
            raise VerificationError(f"{where}: the manifest's signature has an unknown node at {path}.")

        def program(flat: list[Any], weights: dict[str, Any]) -> Any:
            args = [build(a, flat, weights, a.get("name", f"arg{i}")) for i, a in enumerate(sig.get("args") or [])]
            kwargs = {k: build(v, flat, weights, k) for k, v in (sig.get("kwargs") or {}).items()}
            return fn(*args, **kwargs)

        self._jit = jax.jit(program)

    def _find_bound(self, sig: Mapping[str, Any], bind_dir: Path, where: str) -> None:
        found: list[tuple[str, str]] = []

        def walk(node: Any, path: str) -> None:
            if not isinstance(node, dict):
                return
            if "bound" in node:
                found.append((path, str(node["bound"])))
            for k, v in (node.get("dict") or {}).items():
                walk(v, f"{path}/{k}")
            for i, v in enumerate(node.get("list") or []):
                walk(v, f"{path}/{i}")

        for i, a in enumerate(sig.get("args") or []):
            walk(a, a.get("name", f"arg{i}"))
        for k, v in (sig.get("kwargs") or {}).items():
            walk(v, k)
        if not found:
            return
        try:
            from ..export.bind import flatten_bound, load_bind_source
        except ImportError:  # pragma: no cover - a jaxport without bound weights
            raise UsageError(f"{where}: the function has bound weights, which this jaxport cannot load.") from None
        for path, source in found:
            value = _load_bound(load_bind_source, source, bind_dir, f"{where}: {path}")
            tree, tensors = flatten_bound(value, path, f"{where}: {path}")
            self._trees[path] = tree
            self._weights.update({t.name: t.array for t in tensors})

    def __call__(self, arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Outputs ``(name, numpy array)`` named as the export names them."""
        import jax
        import numpy as np

        flat = [arrays[i["name"]] for i in self.f["inputs"]]
        x64 = jax.enable_x64(True) if self.f.get("x64") else contextlib.nullcontext()
        with x64:
            out = jax.block_until_ready(self._jit(flat, self._weights))
        leaves, _ = jax.tree_util.tree_flatten_with_path(out)
        if len(leaves) == 1 and not leaves[0][0]:
            return [("output", np.asarray(leaves[0][1]))]
        return [("/".join(_key_name(k) for k in path) or "output", np.asarray(v)) for path, v in leaves]


def _load_bound(load: Callable[..., Any], source: str, bind_dir: Path, where: str) -> Any:
    """A bound value, from its source relative to the spec's directory (as the spec wrote it), else to the current
    directory (as ``export --bind`` took it)."""
    try:
        return load(source, bind_dir, where)
    except JaxportError:
        if bind_dir.resolve() == Path.cwd().resolve():
            raise
        try:
            return load(source, Path.cwd(), where)
        except JaxportError:
            pass
        raise


# --- running ---------------------------------------------------------------------------------------------------


@dataclass
class CaseResult:
    function: str
    platform: str
    label: str
    dims: dict[str, int]
    note: str | None = None
    error: str | None = None
    outputs: list[OutputResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.error is None and all(o.passed for o in self.outputs)

    @property
    def where(self) -> str:
        dims = ", ".join(f"{k}={v}" for k, v in self.dims.items()) or "fixed shapes"
        return f"{self.function} on {self.platform} at {dims}"

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "platform": self.platform, "label": self.label, "dims": self.dims,
                "note": self.note, "passed": self.passed, "error": self.error,
                "outputs": [o.as_dict() for o in self.outputs]}


@dataclass
class FunctionPlan:
    name: str
    against: str
    platforms: list[str]
    cases: list[Case]


@dataclass
class VerifyReport:
    """What ``verify`` did and found; ``passed`` is the verdict."""

    artifact: str
    seed: int
    budget_bytes: int
    spec: str | None
    spec_differences: list[str]
    functions: list[FunctionPlan]
    cases: list[CaseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.spec_differences and all(c.passed for c in self.cases)

    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]

    def summary(self) -> str:
        """One paragraph naming every failure: the spec differences, and each failed case with its outputs."""
        parts = []
        if self.spec_differences:
            parts.append(f"the spec {self.spec} does not describe the artifact: " + "; ".join(self.spec_differences))
        failed = self.failures()
        if failed:
            lines = []
            for c in failed[:5]:
                what = c.error or "; ".join(o.describe() for o in c.outputs if not o.passed)
                lines.append(f"{c.where} ({c.label}): {what}")
            more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
            parts.append(f"{len(failed)} of {len(self.cases)} cases differ: " + "; ".join(lines) + more)
        if not parts:
            return f"{self.artifact}: all {len(self.cases)} cases match."
        return f"{self.artifact}: verification failed: " + ". ".join(parts) + "."

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "passed": self.passed, "seed": self.seed,
                "budget_bytes": self.budget_bytes,
                "spec": {"path": self.spec, "checked": self.spec is not None,
                         "differences": self.spec_differences},
                "functions": [{"name": p.name, "against": p.against, "platforms": p.platforms,
                               "cases": len(p.cases)} for p in self.functions],
                "cases": [c.as_dict() for c in self.cases],
                "notes": self.notes}


def _devices(platform: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def _platforms(fname: str, f: Mapping[str, Any], requested: list[str] | None, where: str) -> list[str]:
    from jax import export

    exported_for = list(f["platforms"])
    if requested:
        for p in requested:
            if p not in exported_for:
                raise PlatformError(f"{where}: function {fname!r} was exported for {', '.join(exported_for)}, not "
                                    f"{p}; verify it on one of those.")
            if not _devices(p):
                raise PlatformError(f"{where}: --platform {p}: JAX here has no {p} device. Verify on a machine "
                                    f"with one, or leave --platform out to verify on every platform available here.")
        return list(dict.fromkeys(requested))
    local = export.default_export_platform()
    order = [local] + [p for p in exported_for if p != local]
    found = [p for p in order if p in exported_for and (p == local or _devices(p))]
    if not found:
        raise PlatformError(f"{where}: function {fname!r} was exported for {', '.join(exported_for)}, and JAX here "
                            f"runs on {local}. Verify it on a machine with one of its platforms.")
    return found


def _load_live(text: str, defaulted: bool, f: Mapping[str, Any], bind_dir: Path, where: str) -> LiveFunction:
    from ..export.entrypoint import load_entrypoint

    module_file = text.rpartition(":")[0]
    if module_file.lower().endswith((".mlir", ".mlirbc")):
        # An imported artifact: its live function is the foreign module's main, imported afresh.
        from ..importer.build import module_function

        if not Path(module_file).is_file():
            raise EntrypointError(f"{where}: the module {module_file} the artifact was imported from is not in the "
                                  f"current directory; give it with --against MODULE.mlir:main.")
        return LiveFunction(module_function(module_file, f), f, bind_dir, where)
    try:
        entry = load_entrypoint(text, Path.cwd())
    except EntrypointError as e:
        if defaulted:
            raise EntrypointError(f"{e} (the entry point recorded in the artifact, relative to the current "
                                  f"directory; give the live function with --against FILE.py:NAME)") from None
        raise
    return LiveFunction(entry.function, f, bind_dir, where)


def _chosen_for(f: Mapping[str, Any], dims: Mapping[str, list[int]] | None, several: bool) -> dict[str, list[int]]:
    if not dims:
        return {}
    if not several:
        return dict(dims)
    have = set(contract.dimension_variables(f))
    return {k: v for k, v in dims.items() if k in have}


def verify(
    artifact: str | Path,
    against: str | None = None,
    spec: str | Path | None = None,
    *,
    function: str | None = None,
    dims: Mapping[str, list[int]] | None = None,
    platforms: list[str] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    progress: Callable[[int, int, str], None] | None = None,
    runtime: str = "jax",
    cache_dir: str | Path | None = None,
) -> VerifyReport:
    """Verify an artifact against the live function(s) it was exported from (see the module docstring).

    ``against`` (``model.py:NAME``) and ``spec`` default to the entry point and spec the manifest records, relative
    to the current directory; a recorded spec that is not found is skipped with a note. ``dims`` maps dimension
    variables to the values to try. ``progress(done, total, description)`` is called before and after each case.
    With ``runtime="iree"``, the artifact run by IREE is compared with the same artifact run by JAX instead of the
    live function (no entry point needed); ``cache_dir`` keeps IREE's compiled modules.
    Returns the report; raises only for problems that stop verification (artifact, entry point, spec, platform).
    """
    from ..artifact.manifest import function_names
    from ..run import loaded as runtime_mod
    from ..spec import load_spec

    where = str(artifact)
    with open_artifact(artifact) as art:
        manifest = art.manifest
    names = function_names(manifest, function)
    if against is not None and len(names) > 1:
        raise UsageError(f"{where}: --against names one function, but the artifact holds {len(names)} "
                         f"({', '.join(names)}); choose one with --function NAME.")

    notes: list[str] = []
    recorded_spec = (manifest.get("source") or {}).get("spec")
    spec_obj = None
    spec_shown: str | None = None
    if spec is not None:
        spec_obj = load_spec(spec)
        spec_shown = str(spec)
    elif isinstance(recorded_spec, str):
        if Path(recorded_spec).is_file():
            spec_obj = load_spec(recorded_spec)
            spec_shown = recorded_spec
        else:
            notes.append(f"the spec the artifact records ({recorded_spec}) is not in the current directory; the "
                         f"signature was not compared with a spec (give one with --shapes)")
    bind_dir = Path(spec_shown).parent if spec_shown else Path.cwd()

    differences: list[str] = []
    if spec_obj is not None:
        for fname in names:
            differences += spec_differences(spec_obj, fname, manifest["functions"][fname], len(manifest["functions"]))

    if dims:
        known = {v for fname in names for v in contract.dimension_variables(manifest["functions"][fname])}
        unknown = [k for k in dims if k not in known]
        if unknown and len(names) > 1:
            raise UsageError(f"--dim {unknown[0]}: no function of {where} has a dimension variable "
                             f"{unknown[0]!r}; they have {', '.join(sorted(known)) or 'none'}.")

    if runtime not in ("jax", "iree"):
        raise UsageError(f"unknown runtime {runtime!r}: use 'jax' or 'iree'.")
    plans: list[FunctionPlan] = []
    lives: dict[str, Any] = {}
    for fname in names:
        f = manifest["functions"][fname]
        cases = plan_cases(f, _chosen_for(f, dims, len(names) > 1), budget_bytes)
        if runtime == "iree":
            reference = runtime_mod.load(artifact, fname)
            lives[fname] = lambda arrays, ref=reference: ref.run(arrays).leaves
            plans.append(FunctionPlan(fname, "the JAX runtime", [_local_platform()], cases))
            continue
        text = against if against is not None else f.get("entrypoint")
        if not isinstance(text, str):
            raise UsageError(f"{where}: function {fname!r} records no entry point; give it with --against.")
        plats = _platforms(fname, f, platforms, where)
        lives[fname] = _load_live(text, against is None, f, bind_dir, f"{where}: function {fname!r}")
        plans.append(FunctionPlan(fname, text, plats, cases))

    report = VerifyReport(where, seed, budget_bytes, spec_shown, differences, plans, notes=notes)
    total = sum(len(p.cases) * len(p.platforms) for p in plans)
    done = 0
    local = _local_platform()
    for plan in plans:
        f = manifest["functions"][plan.name]
        for platform in plan.platforms:
            loaded = runtime_mod.load(artifact, plan.name, allow_platform_mismatch=platform != local,
                                      runtime=runtime, cache_dir=cache_dir)
            device = _devices(platform)[0]
            for i, case in enumerate(plan.cases):
                if progress:
                    progress(done, total, f"{plan.name} on {platform}: {case.label}")
                report.cases.append(_run_case(loaded, lives[plan.name], f, plan.name, platform, device, case,
                                              seed + i, atol, rtol))
                done += 1
                if progress:
                    progress(done, total, f"{plan.name} on {platform}: {case.label}")
    return report


def _local_platform() -> str:
    from jax import export

    return export.default_export_platform()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300]}" if text else type(e).__name__


def _run_case(loaded: Any, live: LiveFunction, f: Mapping[str, Any], fname: str, platform: str, device: Any,
              case: Case, seed: int, atol: float | None, rtol: float | None) -> CaseResult:
    import jax

    result = CaseResult(fname, platform, case.label, dict(case.dims), case.note)
    arrays = make_inputs(f, case.dims, seed)
    with jax.default_device(device):
        try:
            actual = loaded.run(arrays).leaves
        except JaxportError as e:
            result.error = f"the artifact failed: {e}"
            return result
        except Exception as e:  # noqa: BLE001 - XLA's runtime errors; reported as this case's failure
            result.error = f"the artifact failed: {_first_line(e)}"
            return result
        try:
            expected = live(arrays)
        except Exception as e:  # noqa: BLE001 - the user's function raised
            result.error = f"the live function raised {_first_line(e)}"
            return result
    names = [n for n, _ in actual]
    live_names = [n for n, _ in expected]
    if names != live_names:
        result.error = (f"the artifact returns outputs {', '.join(names) or '(none)'}, the live function "
                        f"{', '.join(live_names) or '(none)'}")
        return result
    for (name, value), (_, reference) in zip(actual, expected):
        result.outputs.append(compare(name, reference, value, atol, rtol))
    from ..run.gradients import stored_order
    from .gradients import compare_with_live

    if stored_order(f) >= 1 and isinstance(live, LiveFunction):  # the stored derivative, as an extra output each
        with jax.default_device(device):
            try:
                result.outputs += compare_with_live(loaded, live, arrays, seed, atol, rtol)
            except Exception as e:  # noqa: BLE001 - either side's derivative failed: this case's failure
                result.error = f"the derivatives failed: {_first_line(e)}"
    return result
