"""The shape spec: a YAML document describing a function's arguments with symbolic shapes.

The language is documented in ``specs/SPEC.md`` (schema: ``specs/schemas/spec.schema.json``). This module turns a
spec file into a :class:`ShapeSpec`, checking everything that can be checked without the function: keys, dtypes,
dimension expressions, bounds and constraints. Each error names the file and line, the argument path and what to
change.

Trust model: a spec is data, read by ``_yaml.load`` (see its trust model): only the plain YAML tags (string,
integer, float, boolean, null, sequence, mapping) are accepted, so ``!!python/...`` tags never construct anything;
the file size, nesting depth and the number of nodes after alias expansion are capped (``SPEC_DOCUMENT``).
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

from .. import dimexpr, dtypes
from .._yaml import Document, Map, Seq, load
from ..errors import SpecError
from ..sharding import indivisible, parse_mesh, parse_partition_spec
from . import outputs
from .like import LIKE_KEYS, parse_like
from .model import ArrayLeaf, BindLeaf, ConstraintSpec, DimVar, FunctionSpec, ShapeSpec, StaticLeaf, Where
from .values import (
    check_artifact_name,
    check_corners,
    check_function_name,
    check_platform,
    closest,
    parse_range,
    suggest,
)

#: Spec format versions this release reads. History:
#: 1 (2026-11-29): first version.
SPEC_VERSIONS = (1,)

MAX_SPEC_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_NODES = 100_000
#: Largest dimension size a spec may give (what a manifest may record), and the most axes of an array.
MAX_DIMENSION = 1 << 62
MAX_RANK = 64

_TOP_KEYS = ("jaxport", "name", "dims", "constraints", "args", "kwargs", "outputs", "platforms", "allow_custom_calls",
             "metadata", "functions", "mesh", "outputs_sharding", "vjp_order")
_FUNCTION_KEYS = ("entrypoint", "args", "kwargs", "outputs", "outputs_sharding")
_METADATA_KEYS = ("name", "version", "description", "labels")
_LONG_LEAF_KEYS = ("shape", "dtype", "sharding", "range")
#: The highest derivative order a spec may ask to store (``vjp_order``).
MAX_VJP_ORDER = 4
_COMPACT = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*(?:<[A-Za-z0-9_]*>)?)\s*\[(.*)\]\s*$", re.S)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


#: How a spec's YAML is read (see ``_yaml``): its caps and how its refusals read.
SPEC_DOCUMENT = Document(
    noun="spec", error=SpecError, first_line="jaxport: 1", max_bytes=MAX_SPEC_BYTES, max_depth=MAX_DEPTH,
    max_nodes=MAX_NODES, integer_keys=True,
    too_big="{file}: the spec is {size} bytes; specs are capped at {max_bytes} bytes. Shorten it.",
    too_deep="{file}:{line}: the spec nests deeper than {max_depth} levels. Flatten it.",
    too_deep_expanded="{file}:{line}: the spec nests deeper than {max_depth} levels (aliases included). Flatten it.",
    too_many_nodes="{file}: the spec expands to more than {max_nodes} YAML nodes (aliases included). Write it without "
                   "deep alias chains.",
    not_utf8="{file}:{line}: the spec is not UTF-8 text (byte {offset} is {byte:#04x}). Save it as UTF-8.",
)


# --- parsing ----------------------------------------------------------------------------------------------------


def _check_keys(m: Map, allowed: tuple[str, ...], file: str, what: str) -> None:
    for k in m:
        if k not in allowed:
            raise SpecError(f"{file}:{m.key_lines[k]}: unknown key {k!r} in {what}.{suggest(k, allowed)} "
                            f"Allowed keys: {', '.join(allowed)}.")


def _split_dims(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    if len(parts) == 1 and not parts[0].strip():
        return []
    return [p.strip() for p in parts]


class _Parser:
    def __init__(self, file: str):
        self.file = file
        self.used_vars: dict[str, Where] = {}
        #: Every symbolic dimension read, with where it is: checked against the bounds once they are all known.
        self.expressions: list[tuple[dimexpr.Expr | dimexpr.Constraint, str, int]] = []
        #: The dimension variables that ranges name (``range: [0, nodes]``), checked once every shape is read.
        self.range_variables: list[tuple[str, str, int]] = []
        #: The ranges whose bounds are dimension expressions, checked at the corners of the bounds at the end.
        self.dimension_ranges: list[tuple[tuple[Any, Any], str, str, int]] = []
        #: The spec's device mesh, read before the arguments (their shardings name its axes).
        self.mesh: dict[str, int] | None = None

    def where(self, line: int) -> Where:
        return Where(self.file, line)

    def fail(self, line: int, msg: str) -> SpecError:
        return SpecError(f"{self.where(line)}: {msg}")

    def dtype(self, spelling: Any, path: str, line: int) -> str:
        if not isinstance(spelling, str):
            raise self.fail(line, f"{path}: dtype must be a string such as 'f32', found {spelling!r}.")
        d = dtypes.canonical(spelling)
        why = dtypes.NOT_EXPORTABLE.get(spelling.strip().lower())
        if d is None and why is not None:
            wider = "uint4" if spelling.strip().lower().startswith("u") else "int4"
            raise self.fail(line, f"{path}: dtype {spelling!r} cannot be exported: {why}. Use {wider} (or a wider "
                                  f"type) for its values.")
        if d is None:
            shorts = ", ".join(x.short for x in dtypes.BY_NAME.values() if x.kind != "key")
            raise self.fail(line, f"{path}: unknown dtype {spelling!r}.{suggest(spelling.lower(), dtypes.spellings())}"
                                  f" Use one of: {shorts} (or numpy names such as float32), or key for a PRNG key "
                                  f"(key<rbg>, key<unsafe_rbg> for other implementations).")
        return d.name

    def dims(self, raw: Any, path: str, line: int) -> tuple[int | str, ...]:
        if isinstance(raw, str):
            items: list[Any] = _split_dims(raw)
        elif isinstance(raw, list):
            items = list(raw)
        elif isinstance(raw, int) and not isinstance(raw, bool):
            items = [raw]
        else:
            raise self.fail(line, f"{path}: shape must be a string like 'batch, 16' or a list, found {raw!r}.")
        out: list[int | str] = []
        for axis, item in enumerate(items):
            here = f"{path}.shape[{axis}]"
            if isinstance(item, bool) or item is None:
                raise self.fail(line, f"{here}: {item!r} is not a dimension.")
            if isinstance(item, int):
                value: int | str = item
            elif isinstance(item, str) and re.fullmatch(r"-?[0-9]+", item.strip()):
                digits = item.strip().lstrip("-")
                if len(digits) > 100:  # int() of thousands of digits is refused by Python itself
                    raise self.fail(line, f"{here}: dimension {digits[:20]}... ({len(digits)} digits) is larger "
                                          f"than 2**62.")
                value = int(item.strip())
            elif isinstance(item, str):
                if not item.strip():
                    raise self.fail(line, f"{here}: empty dimension. Write an integer, a dimension variable or "
                                          f"an expression such as '2*h'.")
                try:
                    expr = dimexpr.parse(item)
                except dimexpr.DimExprError as e:
                    raise self.fail(line, f"{here}: cannot parse dimension {item!r}: {e}. Write an integer, "
                                          f"a dimension variable or an expression such as '2*h'.") from None
                for v in dimexpr.variables(expr):
                    self.used_vars.setdefault(v, self.where(line))
                self.expressions.append((expr, here, line))
                value = str(expr)
            else:
                raise self.fail(line, f"{here}: {item!r} is not a dimension.")
            if isinstance(value, int) and value < 0:
                raise self.fail(line, f"{here}: dimension {value} is negative.")
            if isinstance(value, int) and value > MAX_DIMENSION:
                raise self.fail(line, f"{here}: dimension {value} is larger than 2**62.")
            out.append(value)
        if len(out) > MAX_RANK:
            raise self.fail(line, f"{path}: the shape has {len(out)} dimensions; at most {MAX_RANK} are allowed.")
        count = 1
        for d in out:
            if isinstance(d, int):
                count *= d
        if count > MAX_DIMENSION:
            raise self.fail(line, f"{path}: the shape's constant dimensions multiply to {count} elements, more than "
                                  f"2**62.")
        return tuple(out)

    def leaf_or_tree(self, raw: Any, path: str, line: int) -> Any:
        if isinstance(raw, str):
            m = _COMPACT.match(raw)
            if m is None:
                raise self.fail(line, f"{path}: {raw!r} is not an array spec. Write 'dtype[dims]' such as "
                                      f"'f32[batch, 784]' ('f32[]' for a scalar), or use {{static: ...}} for a "
                                      f"Python value.")
            dtype = self.dtype(m.group(1), path, line)
            return ArrayLeaf(self.dims(m.group(2), path, line), dtype, self.where(line))
        if isinstance(raw, Map):
            line = raw.line
            if "static" in raw:
                _check_keys(raw, ("static",), self.file, path)
                value, at = raw.entry("static")
                return StaticLeaf(self.static_value(value, path, at), self.where(at))
            if "bind" in raw:
                _check_keys(raw, ("bind", "sharding"), self.file, path)
                source, at = raw.entry("bind")
                if not isinstance(source, str) or not source.strip():
                    raise self.fail(at, f"{path}: 'bind' takes a file (.npz, .safetensors, .npy) or a Python "
                                        f"attribute 'model.py:NAME', found {source!r}.")
                bound_sharding = self.bind_sharding(raw, path) if "sharding" in raw else None
                return BindLeaf(source.strip(), self.where(at), sharding=bound_sharding)
            if "like" in raw:
                _check_keys(raw, LIKE_KEYS, self.file, f"the 'like' argument {path}")
                return parse_like(raw, path, self.where, lambda sub, here, at: self.leaf_or_tree(sub, here, at),
                                  lambda dim, here, at: self.dims([dim], here, at)[0], ArrayLeaf)
            if "shape" in raw:
                _check_keys(raw, _LONG_LEAF_KEYS, self.file, f"the array spec {path}")
                if "dtype" not in raw:
                    raise self.fail(line, f"{path}: missing 'dtype' next to 'shape'.")
                spelling, at = raw.entry("dtype")
                dtype = self.dtype(spelling, path, at)
                given, at = raw.entry("shape")
                shape = self.dims(given, path, at)
                array_sharding = None
                if "sharding" in raw:
                    given, line_s = raw.entry("sharding")
                    array_sharding = self.partition_spec(given, len(shape), path, line_s)
                    assert self.mesh is not None  # partition_spec refused a sharding without a mesh

                    def refuse(msg: str) -> SpecError:
                        return self.fail(line_s, msg)

                    indivisible(shape, array_sharding, self.mesh, f"{path}.sharding", refuse)
                values = None
                if "range" in raw:
                    given, at = raw.entry("range")
                    values = self.value_range(given, dtype, path, at)
                return ArrayLeaf(shape, dtype, self.where(line), array_sharding, values)
            return {k: self.leaf_or_tree(v, f"{path}[{k!r}]", raw.key_lines[k]) for k, v in raw.items()}
        if isinstance(raw, Seq):
            return [self.leaf_or_tree(v, f"{path}[{i}]", at) for i, (v, at) in enumerate(raw.entries())]
        if raw is None:
            raise self.fail(line, f"{path}: empty argument. Write an array spec such as 'f32[batch, 784]' or "
                                  f"{{static: null}} for a None argument.")
        raise self.fail(line, f"{path}: {raw!r} is not an array spec. Write 'dtype[dims]' such as "
                              f"'f32[batch, 784]', or {{static: {raw!r}}} to bake a Python value into the program.")

    def value_range(self, raw: Any, dtype: str, path: str, line: int
                    ) -> tuple[int | float | str, int | float | str]:
        try:
            bounds, names = parse_range(raw, dtype)
        except ValueError as e:
            raise self.fail(line, f"{path}.range: {e}.") from None
        self.range_variables.extend((v, f"{path}.range", line) for v in names)
        if names:
            self.dimension_ranges.append((bounds, dtype, f"{path}.range", line))
        return bounds

    def partition_spec(self, raw: Any, rank: int | None, path: str, line: int) -> tuple[Any, ...]:
        return parse_partition_spec(raw, self.mesh, rank, f"{path}.sharding", lambda msg: self.fail(line, msg))

    def bind_sharding(self, raw: Map, path: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        """A bound tree's shardings: ``{key: PartitionSpec}`` (keys '/'-separated), or one list for a single
        array."""
        value, line = raw.entry("sharding")
        if isinstance(value, list):
            return (("", self.partition_spec(value, None, path, line)),)
        if not isinstance(value, Map) or not value:
            raise self.fail(line, f"{path}.sharding: a bound tree's sharding maps tensor keys to PartitionSpecs, "
                                  f"e.g. {{w1: [null, model]}} (or is one list for a single array).")
        return tuple((str(k), self.partition_spec(v, None, f"{path}.sharding[{k!r}]", value.line_of(k, line)))
                     for k, v in value.items())

    def static_value(self, raw: Any, path: str, line: int) -> Any:
        if isinstance(raw, float) and not math.isfinite(raw):
            raise self.fail(line, f"{path}: static value {raw!r} is not a finite number; the manifest records "
                                  f"static values as JSON, which has no NaN or infinity. Pass it as an array.")
        if raw is None or isinstance(raw, (bool, int, float, str)):
            return raw
        if isinstance(raw, list):
            return tuple(self.static_value(v, path, line) for v in raw)
        raise self.fail(line, f"{path}: a static value must be a number, string, boolean, null or a list of "
                              f"those, found a mapping.")

    def function(self, raw: Map, name: str | None, what: str) -> FunctionSpec:
        args_raw, line = raw.entry("args", Seq.at(raw.line))
        if not isinstance(args_raw, Seq):
            raise self.fail(line, f"{what}'args' must be a list of positional arguments.")
        kwargs_raw, line = raw.entry("kwargs")
        if kwargs_raw is None:
            kwargs_raw = Map.at(line)
        if not isinstance(kwargs_raw, Map):
            raise self.fail(line, f"{what}'kwargs' must be a mapping from keyword to argument spec.")
        args = [self.leaf_or_tree(v, f"args[{i}]", at) for i, (v, at) in enumerate(args_raw.entries())]
        kwargs = {k: self.leaf_or_tree(v, f"kwargs[{k!r}]", kwargs_raw.key_lines[k]) for k, v in kwargs_raw.items()}
        entry, line = raw.entry("entrypoint")
        if entry is not None and not isinstance(entry, str):
            raise self.fail(line, f"{what}'entrypoint' must be a string 'file.py:NAME'.")
        outs = None
        listed, line = raw.entry("outputs_sharding")
        if listed is not None:
            if not isinstance(listed, list):
                raise self.fail(line, f"{what}'outputs_sharding' is a list with one sharding per output (null for "
                                      f"unspecified), e.g. [[data, model]].")
            outs = [None if s is None else self.partition_spec(s, None, f"outputs_sharding[{i}]", line)
                    for i, s in enumerate(listed)]
        names, names_where = None, None
        given, line = raw.entry("outputs")
        if given is not None:
            names_where = self.where(line)
            names = outputs.parse(given, str(names_where))
        return FunctionSpec(name, entry, args, kwargs, self.where(raw.line), outs, names, names_where)


def _check_ranges(p: _Parser, dims: dict[str, DimVar]) -> None:
    """No shape or constraint of the spec can divide by zero, or exceed 2**62, within the declared bounds."""
    bounds = {name: (1 if d.min is None else d.min, d.max) for name, d in dims.items()}
    for expr, here, line in p.expressions:
        try:
            dimexpr.check_ranges(expr, bounds)
        except dimexpr.DimExprError as e:
            raise p.fail(line, f"{here}: {e}. Change the expression, or the bounds under 'dims'.") from None


def _check_range_corners(p: _Parser, dims: dict[str, DimVar]) -> None:
    """No range whose bounds are dimension expressions is empty, or leaves its dtype, at a corner of the bounds that
    the spec's constraints allow (``values.check_corners``)."""
    bounds = {name: (1 if d.min is None else d.min, d.max) for name, d in dims.items()}
    constraints = [e for e, _, _ in p.expressions if isinstance(e, dimexpr.Constraint)]
    for given, dtype, here, line in p.dimension_ranges:
        try:
            check_corners(given, dtype, bounds, constraints)
        except ValueError as e:
            raise p.fail(line, f"{here}: {e}. Change the range, or the bounds under 'dims'.") from None


def _int_bound(bounds: Map, key: str, var: str, p: _Parser) -> int | None:
    value, line = bounds.entry(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise p.fail(line, f"dims[{var!r}].{key}: must be an integer >= 1, found {value!r}.")
    if value > MAX_DIMENSION:
        raise p.fail(line, f"dims[{var!r}].{key}: {value if value < 10**30 else 'a number'} is larger than 2**62.")
    return value


def _version(p: _Parser, raw: Map) -> int:
    """The spec format version (``jaxport: 1``)."""
    if "jaxport" not in raw:
        raise p.fail(raw.line, "missing 'jaxport: 1' (the spec format version) at the top.")
    version, line = raw.entry("jaxport")
    if isinstance(version, bool) or not isinstance(version, int) or version not in SPEC_VERSIONS:
        raise p.fail(line, f"spec format version {version!r} is not one this jaxport reads "
                           f"(supported: {', '.join(map(str, SPEC_VERSIONS))}). Upgrade jaxport or write 'jaxport: 1'.")
    return version


def _dims(p: _Parser, raw: Map) -> dict[str, DimVar]:
    """The dimension variables under ``dims:`` (a mapping to their bounds, or a list of names), with their bounds."""
    given, line = raw.entry("dims")
    if given is None:
        return {}
    if isinstance(given, Seq):
        given = Map.at(given.line, {str(v): None for v in given}, dict(zip(map(str, given), given.item_lines)))
    if not isinstance(given, Map):
        raise p.fail(line, "'dims' must map each dimension variable to its bounds, e.g. 'batch: {min: 1, max: 4096}'.")
    dims: dict[str, DimVar] = {}
    for name, bounds in given.items():
        line = given.key_lines[name]
        if not _NAME.match(name) or name in ("max", "min", "mod", "floordiv", "non_negative", "_"):
            raise p.fail(line, f"dims: {name!r} is not a valid dimension variable name (letters, digits, '_'; not a "
                               f"function of dimension expressions, nor '_' alone, which JAX reads as 'the size the "
                               f"argument has').")
        if bounds is None:
            bounds = Map.at(line)
        if not isinstance(bounds, Map):
            raise p.fail(line, f"dims[{name!r}]: bounds must be a mapping like {{min: 1, max: 4096}}, "
                               f"found {bounds!r}.")
        _check_keys(bounds, ("min", "max"), p.file, f"dims[{name!r}]")
        lo = _int_bound(bounds, "min", name, p)
        hi = _int_bound(bounds, "max", name, p)
        if lo is not None and hi is not None and lo > hi:
            raise p.fail(line, f"dims[{name!r}]: min {lo} is greater than max {hi}.")
        dims[name] = DimVar(name, lo, hi, p.where(line))
    return dims


def _vjp_order(p: _Parser, raw: Map) -> int:
    vjp_order, line = raw.entry("vjp_order", 0)
    if isinstance(vjp_order, bool) or not isinstance(vjp_order, int) or not 0 <= vjp_order <= MAX_VJP_ORDER:
        raise p.fail(line, f"'vjp_order' must be an integer from 0 to {MAX_VJP_ORDER} (the highest derivative order to "
                           f"store), found {vjp_order!r}.")
    return vjp_order


def _functions(p: _Parser, raw: Map) -> dict[str | None, FunctionSpec]:
    """The spec's functions: those under ``functions:``, or the one the top level describes (named None)."""
    if "functions" not in raw:
        return {None: p.function(raw, None, "")}
    for key in ("outputs", "outputs_sharding"):
        if key in raw:
            raise p.fail(raw.key_lines[key], f"with 'functions:', give '{key}' inside each function's entry.")
    given, line = raw.entry("functions")
    if "args" in raw or "kwargs" in raw:
        raise p.fail(line, "use either top-level 'args'/'kwargs' (one function) or 'functions:' (several), not both.")
    if not isinstance(given, Map) or not given:
        raise p.fail(line, "'functions' must map each function name to its 'entrypoint', 'args' and 'kwargs'.")
    functions: dict[str | None, FunctionSpec] = {}
    for fname, body in given.items():
        if not _NAME.match(fname):
            raise p.fail(given.key_lines[fname], f"functions: {fname!r} is not a valid function name.")
        if not isinstance(body, Map):
            raise p.fail(given.key_lines[fname], f"functions[{fname!r}] must be a mapping.")
        _check_keys(body, _FUNCTION_KEYS, p.file, f"functions[{fname!r}]")
        functions[fname] = p.function(body, fname, f"functions[{fname!r}]: ")
    return functions


def _function_name(p: _Parser, raw: Map) -> str | None:
    """A single-function spec's top-level ``name:``."""
    if "name" not in raw:
        return None
    given, line = raw.entry("name")
    if "functions" in raw:
        raise p.fail(line, "with 'functions:', each function is named by its key there; remove the top-level 'name'.")
    return check_function_name(given, f"{p.where(line)}: name")


def _constraints(p: _Parser, raw: Map, dims: dict[str, DimVar]) -> list[ConstraintSpec]:
    """The ``constraints:`` between dimension variables, each naming only variables the spec declares or uses."""
    given, line = raw.entry("constraints")
    if not given:
        return []
    if not isinstance(given, Seq):
        raise p.fail(line, "'constraints' must be a list of strings like 'b <= 8*h'.")
    declared = set(dims) | set(p.used_vars)
    constraints: list[ConstraintSpec] = []
    for i, (c, line) in enumerate(given.entries()):
        if not isinstance(c, str):
            raise p.fail(line, f"constraints[{i}]: must be a string like 'batch <= 8*h', found {c!r}.")
        try:
            parsed = dimexpr.parse_constraint(c)
        except dimexpr.DimExprError as e:
            raise p.fail(line, f"constraints[{i}]: cannot parse {c!r}: {e}. Write 'lhs >= rhs', 'lhs <= rhs' "
                               f"or 'lhs == rhs'.") from None
        for v in sorted(parsed.variables()):
            if v not in declared:
                raise p.fail(line, f"constraints[{i}]: {c!r} names dimension variable {v!r}, which is not "
                                   f"declared under 'dims' nor used in any shape.{suggest(v, sorted(declared))}")
        constraints.append(ConstraintSpec(c.strip(), p.where(line)))
        p.expressions.append((parsed, f"constraints[{i}]", line))
    return constraints


def _check_variables(p: _Parser, dims: dict[str, DimVar]) -> None:
    """Every range names, and every declared dimension variable is, a dimension of some argument's shape."""
    for v, here, line in p.range_variables:
        if v not in p.used_vars:
            raise p.fail(line, f"{here}: {v!r} is not a dimension of any argument's shape; a range may name only "
                               f"those.{suggest(v, sorted(p.used_vars))}")
    unused = [name for name in dims if name not in p.used_vars]
    undeclared = [v for v in p.used_vars if v not in dims]
    for name in unused:  # a misspelt use (f32[bacth]) leaves the declared name unused: report the use
        typo = closest(name, undeclared)
        if typo is not None:
            here, line = next((h, at) for e, h, at in p.expressions
                              if isinstance(e, dimexpr.Expr) and typo in dimexpr.variables(e))
            raise p.fail(line, f"{here}: dimension variable {typo!r} is not declared under 'dims'. Did you mean "
                               f"{name!r}? (dims[{name!r}] at line {dims[name].where.line} is used by no argument "
                               f"shape.)")
    if unused and undeclared:  # a use not close to the declared name (f32[bs] for batch): report the use too
        name, use = unused[0], undeclared[0]
        here, line = next((h, at) for e, h, at in p.expressions
                          if isinstance(e, dimexpr.Expr) and use in dimexpr.variables(e))
        raise p.fail(line, f"{here}: dimension variable {use!r} is not declared under 'dims', and dims[{name!r}] at "
                           f"line {dims[name].where.line} is used by no argument shape. Write {name!r} here if that is "
                           f"the dimension meant; else declare {use!r} under 'dims' and use {name!r} in a shape or "
                           f"remove it (JAX derives a dimension variable only from an argument shape).")
    for name, d in dims.items():
        if name not in p.used_vars:
            raise p.fail(d.where.line, f"dims[{name!r}] is declared but no argument shape uses it; JAX can only "
                                       f"derive a dimension variable from an argument shape. Use it or remove it.")


def _platforms(p: _Parser, raw: Map) -> list[str] | None:
    given, line = raw.entry("platforms")
    if given is None:
        return None
    if isinstance(given, str):
        given = [given]
    if not isinstance(given, list) or not given:
        raise p.fail(line, "'platforms' must be a list such as [cpu, cuda, tpu].")
    return [check_platform(x, f"{p.where(line)}: platforms") for x in given]


def _allow_custom_calls(p: _Parser, raw: Map) -> list[str]:
    given, line = raw.entry("allow_custom_calls")
    allow = given or []
    if not isinstance(allow, list) or not all(isinstance(a, str) and a for a in allow):
        raise p.fail(line, "'allow_custom_calls' must be a list of custom-call target names.")
    return list(allow)


def _metadata(p: _Parser, raw: Map) -> dict[str, Any]:
    """The artifact's ``metadata:``: name, version and description as strings (a null name left out), and labels as
    a mapping of strings (empty when not given)."""
    given, line = raw.entry("metadata")
    if not given:
        return {}
    if not isinstance(given, Map):
        raise p.fail(line, "'metadata' must be a mapping with name, version, description and labels.")
    _check_keys(given, _METADATA_KEYS, p.file, "metadata")
    metadata = dict(given)
    for key in ("name", "version", "description"):
        if key not in given:
            continue
        value, at = given.entry(key)
        if value is None:
            if key == "name":
                del metadata[key]
            continue
        if isinstance(value, (dict, list, bool)) or (isinstance(value, float) and not math.isfinite(value)):
            raise p.fail(at, f"metadata.{key} must be a string, found {value!r}.")
        metadata[key] = str(value)
    name, at = given.entry("name")
    if name is not None:
        check_artifact_name(str(name), f"{p.where(at)}: metadata.name")
    labels, at = given.entry("labels")
    labels = labels or Map.at(at)
    if not isinstance(labels, Map):
        raise p.fail(at, "metadata.labels must map strings to strings, e.g. {team: search}.")
    for k, v in labels.items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise p.fail(labels.key_lines[k], f"metadata.labels[{k!r}] must be a string, found {v!r}. Quote it.")
    return {**metadata, "labels": {str(k): str(v) for k, v in labels.items()}}


def parse_spec(text: str, file: str = "<spec>", base_dir: Path | None = None) -> ShapeSpec:
    """Parse spec text; ``file`` is the name used in messages."""
    raw, line = load(text, file, SPEC_DOCUMENT)
    if not isinstance(raw, Map):
        raise SpecError(f"{file}:{line}: a spec must be a YAML mapping starting with 'jaxport: 1'.")
    p = _Parser(file)
    _check_keys(raw, _TOP_KEYS, file, "the spec")
    version = _version(p, raw)
    dims = _dims(p, raw)
    mesh, line = raw.entry("mesh")
    if mesh is not None:
        p.mesh = parse_mesh(mesh, lambda msg: p.fail(line, msg))
    vjp_order = _vjp_order(p, raw)
    functions = _functions(p, raw)
    function_name = _function_name(p, raw)
    constraints = _constraints(p, raw, dims)
    _check_ranges(p, dims)
    _check_variables(p, dims)
    _check_range_corners(p, dims)
    return ShapeSpec(file, version, dims, constraints, functions, _platforms(p, raw), _allow_custom_calls(p, raw),
                     _metadata(p, raw), base_dir, p.mesh, vjp_order, hashlib.sha256(text.encode("utf-8")).hexdigest(),
                     function_name)


def load_spec(path: str | Path) -> ShapeSpec:
    """Read and parse a spec file."""
    path = Path(path)
    return parse_spec(SPEC_DOCUMENT.read(path), str(path), path.parent)
