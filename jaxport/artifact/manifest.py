"""The manifest: what an artifact holds, readable without JAX.

``validate`` checks a manifest read from an untrusted file before anything else looks at it; ``function_names``
looks functions up in a validated one. The layout is documented in ``specs/FORMAT.md`` and
``specs/schemas/manifest.schema.json``; the writer is ``jaxport.export.writing.manifest``.
"""

from __future__ import annotations

import re

from .. import dimexpr, dtypes
from .._text import plural
from .._version import __version__
from ..errors import FormatError, UsageError
from ..spec.values import dimension_range, input_range
from . import model
from .bounds import Bounds
from .fields import Fields, as_digest, as_integer, as_list, as_string, fail, peek
from .layout import ALIGNMENT, PAYLOAD_NAME, WEIGHTS_MEMBER, is_safe_member_name
from .versions import FORMAT_MAJOR as FORMAT_MAJOR
from .versions import FORMAT_VERSION as FORMAT_VERSION
from .versions import written_version as written_version

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FORMAT_NAME = "jaxport"

MAX_RANK = 64


def function_names(m: model.Manifest, function: str | None = None) -> list[str]:
    """The artifact's functions, or just ``function``; an unknown name is a UsageError with close matches."""
    names = list(m.functions)
    if function is None:
        return names
    if function not in names:
        import difflib  # only for this message: not imported when a manifest is read

        close = difflib.get_close_matches(function, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"the artifact has no function {function!r}.{hint} Functions: {', '.join(names)}.")
    return [function]


# --- reading an untrusted manifest -------------------------------------------------------------------------------
#
# One pass: each object of the JSON document is read field by field (``fields.Fields``), each field checked where it
# is taken and made into its record (``model``); the first wrong field raises a FormatError that names its path in the
# manifest.

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate(m: Any) -> model.Manifest:
    """Check the structure of an untrusted manifest (parsed JSON); raise FormatError naming the first bad field.
    Returns it as records: the only way from a manifest's JSON to a ``model.Manifest``."""
    top = Fields(m, "(top level)", prefix="")
    fmt = top.value("format")
    if fmt != FORMAT_NAME:
        raise fail("format", f"expected {FORMAT_NAME!r}, found {fmt!r}: this is not a jaxport artifact")
    ver = top.string("format_version", 32)
    mm = re.fullmatch(r"([0-9]{1,6})\.([0-9]{1,6})", ver)
    if not mm:
        raise fail("format_version", f"{ver!r} is not of the form MAJOR.MINOR")
    writer = peek(peek(m, "producer"), "jaxport")
    writer = writer if isinstance(writer, str) else "unknown"
    if not writer.isprintable() or len(writer) > 40:
        writer = repr(writer[:40])
    if int(mm.group(1)) > FORMAT_MAJOR:
        raise FormatError(f"artifact format {ver} was written by jaxport {writer}; this jaxport "
                          f"({__version__}) reads format {FORMAT_MAJOR}.x. Upgrade jaxport to read it.")
    if int(mm.group(1)) < 1:
        raise fail("format_version", f"{ver!r} is not a released format version")
    producer = _producer(top.fields("producer"))
    source = _source(top.fields("source", {}))
    metadata = _metadata(top.fields("metadata", {}))
    members = _members(top.fields("members"))
    raw_functions = top.fields("functions")
    if not raw_functions.raw:
        raise fail("functions", "the artifact declares no function")
    tensors = peek(peek(m, "weights"), "tensors")
    stored = set(tensors) if isinstance(tensors, dict) else set()
    functions = {}
    for fname, f in raw_functions.raw.items():
        here = f"functions[{fname!r}]"
        as_string(fname, here, 256)
        if not _IDENTIFIER.match(fname):
            raise fail(here, "a function's name is an identifier ([A-Za-z_][A-Za-z0-9_]*)")
        functions[fname] = _function(Fields(f, here), members, stored)
    weights = None if top.value("weights", None) is None else _weights(top.fields("weights"), members)
    return model.Manifest(ver, producer, members, functions, metadata, source, weights, fmt)


def _producer(p: Fields) -> model.Producer:
    jaxport, jax, jaxlib = (p.string(k, 64) for k in ("jaxport", "jax", "jaxlib"))
    for_jax = p.optional_string("for_jax", 64)
    upgraded = None
    if p.value("upgraded_from", None) is not None:
        u = p.fields("upgraded_from")
        upgraded = model.UpgradedFrom(u.string("jaxport", 64), u.string("jax", 64), u.string("jaxlib", 64),
                                      as_digest(u.value("sha256", None), u.at("sha256")),
                                      u.optional_string("for_jax", 64))
    ccr = None
    if p.value("calling_convention_range", None) is not None:
        given = p.list("calling_convention_range", 2)
        if len(given) != 2:
            raise fail(p.at("calling_convention_range"), "expected [oldest, newest]")
        oldest, newest = (as_integer(x, f"{p.at('calling_convention_range')}[{i}]", 0, 1 << 20)
                          for i, x in enumerate(given))
        ccr = (oldest, newest)
    return model.Producer(jaxport, jax, jaxlib, ccr, for_jax, upgraded)


def _source(s: Fields) -> model.Source:
    spec = s.optional_string("spec", 4096)
    digest = None if s.value("spec_sha256", None) is None else as_digest(s.value("spec_sha256"), s.at("spec_sha256"))
    binds = None
    if s.has("binds"):
        binds = {k: as_string(v, f"source.binds[{k!r}]", 1 << 12) for k, v in s.fields("binds").raw.items()}
    return model.Source(spec, digest, binds)


def _metadata(meta: Fields) -> model.Metadata:
    name, version, description = (meta.optional_string(k, 1 << 16) for k in ("name", "version", "description"))
    labels = {k: as_string(v, f"metadata.labels[{k!r}]", 1 << 12) for k, v in meta.fields("labels", {}).raw.items()}
    return model.Metadata(name, version, description, labels or model.EMPTY,
                          tuple(k for k in meta.raw if k in model.METADATA_KEYS))


def _members(members: Fields) -> dict[str, model.MemberInfo]:
    if len(members.raw) > 1 << 16:
        raise fail("members", f"lists {len(members.raw)} members; at most {1 << 16} are allowed")
    out = {}
    for name, raw in members.raw.items():
        here = f"members[{name!r}]"
        if name == "manifest.json":
            raise fail(here, "the manifest does not list itself")
        as_string(name, here)
        info = Fields(raw, here)
        out[name] = model.MemberInfo(info.integer("size"), as_digest(info.value("sha256"), info.at("sha256")))
    return out


# --- one function ------------------------------------------------------------------------------------------------


def _function(fn: Fields, members: Mapping[str, model.MemberInfo], stored: set[str]) -> model.Function:
    payload = fn.string("payload")
    if payload not in members:
        raise fail(fn.at("payload"), f"{payload!r} is not listed under 'members'")
    if not PAYLOAD_NAME.match(payload):
        raise fail(fn.at("payload"), f"{payload!r} is not a program member's name (functions/NAME.jaxexport)")
    convention = fn.integer("calling_convention_version", 0, 1 << 20)
    listed = fn.list("platforms", 16)
    if not listed:
        raise fail(fn.at("platforms"), "the function names no platform")
    platforms = tuple(as_string(p, f"{fn.at('platforms')}[{i}]", 32) for i, p in enumerate(listed))
    inputs = _arrays(fn, "inputs")
    _ranges(inputs)
    outputs = _arrays(fn, "outputs")
    entrypoint = fn.optional_string("entrypoint", 4096)
    stablehlo_version = fn.optional_string("stablehlo_version", 64)
    x64 = fn.boolean("x64", False)
    signature = _signature(fn.fields("signature", {}), [rec.name for _, rec in inputs])
    output_tree = _output_node(fn.value("output_tree"), fn.at("output_tree"), len(outputs)) \
        if fn.has("output_tree") else None
    dims = _dims(fn.fields("dims", {}), {rec.name for _, rec in inputs})
    shape_assertions = fn.strings("shape_assertions", 1 << 16, 1 << 16)
    custom_calls = []
    for i, raw in enumerate(fn.list("custom_calls", 1 << 16, [])):
        c = Fields(raw, f"{fn.at('custom_calls')}[{i}]")
        custom_calls.append(model.CustomCall(c.string("target", default=None), c.optional_integer("count"),
                                             c.optional_string("stability", 64)))
    allowed = fn.strings("allowed_custom_calls")
    disabled = fn.strings("disabled_safety_checks")
    kept = tuple(as_integer(k, f"{fn.at('kept_inputs')}[{i}]", 0, 1 << 20)
                 for i, k in enumerate(fn.list("kept_inputs", 1 << 20, [])))
    effects = fn.fields("effects", {})
    effects_record = model.Effects(effects.strings("ordered"), effects.strings("unordered"))
    vjp_order = fn.integer("vjp_order", 0, 64, default=0)
    constants = _constants(fn.fields("embedded_constants", {}))
    constraints = []
    for i, c in enumerate(fn.list("constraints", 1024, [])):
        try:
            text = as_string(c, f"{fn.at('constraints')}[{i}]", 1024)
            constraints.append((text, dimexpr.parse_constraint(text)))
        except dimexpr.DimExprError as e:
            raise fail(f"{fn.at('constraints')}[{i}]", f"bad constraint: {e}") from None
    _dimension_ranges(fn, inputs, outputs, dims, constraints)
    nr_devices = fn.integer("nr_devices", 1, 1 << 20, default=1)
    mesh, weights_specs = _mesh(fn, nr_devices, inputs, outputs)
    names = fn.list("weights", 1 << 20, [])
    for i, n in enumerate(names):
        if not isinstance(n, str) or n not in stored:
            raise fail(f"{fn.at('weights')}[{i}]", f"{n!r} is not a tensor of the top-level 'weights'")
    if len(set(names)) != len(names):
        raise fail(fn.at("weights"), "names a tensor twice")
    return model.Function(
        payload, convention, platforms, tuple(rec for _, rec in inputs), tuple(rec for _, rec in outputs), signature,
        entrypoint=entrypoint, stablehlo_version=stablehlo_version, x64=x64, weights=tuple(names),
        output_tree=output_tree, dims=dims, constraints=tuple(c for c, _ in constraints),
        shape_assertions=shape_assertions, custom_calls=tuple(custom_calls), allowed_custom_calls=allowed,
        disabled_safety_checks=disabled, kept_inputs=kept if fn.has("kept_inputs") else None,
        effects=effects_record, nr_devices=nr_devices, vjp_order=vjp_order, embedded_constants=constants,
        mesh=mesh, weights_partition_specs=weights_specs)


def _shape(shape: Any, path: str) -> tuple[int | str, ...]:
    for i, d in enumerate(as_list(shape, path, MAX_RANK)):
        if isinstance(d, str):
            try:
                dimexpr.parse(as_string(d, f"{path}[{i}]", 256))
            except dimexpr.DimExprError as e:
                raise fail(f"{path}[{i}]", f"bad dimension expression: {e}") from None
        else:
            as_integer(d, f"{path}[{i}]", 0, (1 << 62))
    return tuple(shape)


def _arrays(fn: Fields, key: str) -> list[Any]:
    """The entries of ``inputs`` or ``outputs``: unique printable names, shapes, supported dtypes. Each comes with
    its object, from which ``_ranges`` and ``_mesh`` add the range and the PartitionSpec to its record."""
    path, seen, out = fn.at(key), set(), []
    record = model.Input if key == "inputs" else model.Output
    for i, raw in enumerate(fn.list(key, 1 << 16)):
        a = Fields(raw, f"{path}[{i}]")
        name = a.string("name")
        if not name.isprintable():
            raise fail(a.at("name"), f"{name!r} contains control characters")
        if name in seen:
            raise fail(a.at("name"), f"duplicate name {name!r}")
        seen.add(name)
        shape = _shape(a.value("shape"), a.at("shape"))
        dtype = a.string("dtype", 64)
        if dtype not in dtypes.BY_NAME:
            raise fail(a.at("dtype"), f"{dtype!r} is not a dtype jaxport supports")
        sharding, spec_path = (a.optional_string(k, 1 << 16) for k in ("sharding", "spec_path"))
        rec = model.Input(name, shape, dtype, spec_path, sharding, weak=a.boolean("weak", False),
                          range_example=a.boolean("range_example", False)) if record is model.Input else \
            model.Output(name, shape, dtype, sharding, key=_output_key(a, shape, dtype))
        out.append((a, rec))
    return out


def _output_key(a: Fields, shape: tuple[int | str, ...], dtype: str) -> str | None:
    """An output's optional ``key`` (format 1.2): the key dtype whose key data (``uint32``, data axes last) it is."""
    if not a.has("key"):
        return None
    key = a.string("key", 64)
    if key not in dtypes.KEYS:
        raise fail(a.at("key"), f"{key!r} is not a PRNG key dtype (one of {', '.join(dtypes.KEYS)})")
    data = dtypes.KEYS[key].data_shape
    if dtype != "uint32" or len(shape) < len(data) or tuple(shape[len(shape) - len(data):]) != data:
        raise fail(a.at("key"), f"a {key} output's key data is uint32 with the axes {list(data)} last, "
                                 f"not {dtype}{list(shape)}")
    return key


def _ranges(inputs: list[Any]) -> None:
    """An input's optional ``range``: ``[LO, HI]``, the half-open range of its values, by the spec's rules
    (``spec.values.input_range``); integer bounds for integer dtypes."""
    for k, (a, rec) in enumerate(inputs):
        if not a.has("range"):
            continue
        bounds = a.list("range", 2)
        if len(bounds) != 2:
            raise fail(a.at("range"), f"expected [LO, HI], found {plural(len(bounds), 'entry', 'entries')}")
        kind = dtypes.BY_NAME[rec.dtype].kind
        named = any(isinstance(b, str) and any(c.isalpha() or c == "_" for c in b) for b in bounds)  # [0, "nodes"]
        if not named and kind in ("int", "uint") and not all(isinstance(b, int) and not isinstance(b, bool)
                                                             for b in bounds):
            raise fail(a.at("range"), f"expected two integers for a {rec.dtype} input")
        try:
            (dimension_range if named else input_range)(bounds[0], bounds[1], rec.dtype)
        except ValueError as e:
            raise fail(a.at("range"), str(e).split(";")[0]) from None
        inputs[k] = (a, model.replace(rec, range=(bounds[0], bounds[1])))


def _signature(sig: Fields, input_names: list[str]) -> model.Signature:
    """The call tree: known node kinds, input indexes in range, each input used exactly once."""
    if not sig.raw:  # no call tree: the inputs are the positional arguments, in order
        return model.Signature(tuple(model.CallNode("input", i, name) for i, name in enumerate(input_names)))
    n_inputs, used = len(input_names), []

    def node(raw: Any, here: str, top: bool) -> model.CallNode:
        n = Fields(raw, here)
        kinds = [k for k in model.NODE_KINDS if k in n.raw]
        if len(kinds) != 1:
            raise fail(here, f"a call-tree node has exactly one of {', '.join(model.NODE_KINDS)}; found "
                              f"{', '.join(map(repr, sorted(n.raw)[:4])) or 'none'}")
        kind = kinds[0]
        name = n.string("name") if top else None
        value = n.value(kind)
        if kind == "input":
            used.append(as_integer(value, n.at(kind), 0, max(n_inputs - 1, 0)))
            if n_inputs == 0:
                raise fail(n.at(kind), "the function has no inputs")
        elif kind == "bound":
            as_string(value, n.at(kind), 1 << 12)
        elif kind == "list":
            value = tuple(node(c, f"{here}.list[{i}]", False) for i, c in enumerate(n.list(kind, 1 << 16)))
        elif kind == "dict":
            value = {k: node(c, f"{here}.dict[{k!r}]", False) for k, c in n.fields(kind).raw.items()}
        return model.CallNode(kind, value, name)

    args = tuple(node(a, f"{sig.at('args')}[{i}]", True) for i, a in enumerate(sig.list("args", 1 << 16, [])))
    kwargs = {k: node(c, f"{sig.at('kwargs')}[{k!r}]", False) for k, c in sig.fields("kwargs", {}).raw.items()}
    if sorted(used) != list(range(n_inputs)):
        raise fail(sig.path, f"uses inputs {sorted(used)[:8]}, but each of the {n_inputs} inputs must be used "
                              f"exactly once")
    return model.Signature(args, kwargs)


def _output_node(raw: Any, path: str, n_outputs: int) -> model.OutputNode:
    """A node of the output tree; with several kinds, the first of output, dict, list, tuple, node counts."""
    n = Fields(raw, path)
    index = None
    if n.has("output"):
        index = n.integer("output", 0, max(n_outputs - 1, 0))
        if n_outputs == 0:
            raise fail(n.at("output"), "the function has no outputs")
    def nodes(kind: str) -> tuple[model.OutputNode, ...] | None:
        if not n.has(kind):
            return None
        return tuple(_output_node(c, f"{path}.{kind}[{i}]", n_outputs) for i, c in enumerate(n.list(kind, 1 << 16)))

    in_list, in_tuple, children = nodes("list"), nodes("tuple"), nodes("children")
    entries = {k: _output_node(c, f"{path}.dict[{k!r}]", n_outputs) for k, c in n.fields("dict").raw.items()} \
        if n.has("dict") else None
    type_name = n.string("node") if n.has("node") else None
    module = n.string("module", 1024) if n.has("module") else None
    keys = tuple(as_string(k, f"{n.at('keys')}[{i}]", 1024) for i, k in enumerate(n.list("keys", 1 << 16))) \
        if n.has("keys") else None
    if keys is not None and len(keys) != len(children or ()):
        count = plural(len(children or ()), "child", "children")
        raise fail(n.at("keys"), f"names {plural(len(keys), 'key')} for {count}")
    if index is not None:
        return model.OutputNode("output", index)
    if entries is not None:
        return model.OutputNode("dict", entries)
    if in_list is not None:
        return model.OutputNode("list", in_list)
    if in_tuple is not None:
        return model.OutputNode("tuple", in_tuple)
    if n.has("node") or children is not None:
        return model.OutputNode("node", children or (), type_name, module, keys)
    return model.OutputNode("none")


def _dims(dims: Fields, input_names: set[str]) -> dict[str, model.DimVar]:
    out = {}
    for name, raw in dims.raw.items():
        here = f"{dims.path}[{name!r}]"
        if not _IDENTIFIER.match(name):
            raise fail(here, "a dimension variable's name is an identifier")
        d = Fields(raw, here)
        lo = 1 if d.value("min", None) is None else d.integer("min", 0, 1 << 62)
        hi = None if d.value("max", None) is None else d.integer("max", 0, 1 << 62)
        if hi is not None and lo > hi:
            raise fail(here, f"min {lo} is greater than max {hi}")
        derivation = None
        if d.value("derived_from", None) is not None:
            src = d.fields("derived_from")
            source = src.string("input")
            if source not in input_names:
                raise fail(src.at("input"), f"{source!r} is not an input of the function")
            derivation = model.Derivation(source, src.integer("axis", 0, MAX_RANK - 1), src.string("expression", 256))
        out[name] = model.DimVar(Bounds(lo, hi), derivation)
    return out


def _constants(consts: Fields) -> model.EmbeddedConstants:
    count, size = consts.optional_integer("count"), consts.optional_integer("bytes")
    largest = []
    for i, raw in enumerate(consts.list("largest", 64, [])):
        c = Fields(raw, f"{consts.at('largest')}[{i}]")
        largest.append(model.Constant(c.optional_string("type", 1 << 12), c.optional_integer("bytes"),
                                      c.optional_string("location", 1 << 12)))
    return model.EmbeddedConstants(count, size, tuple(largest))


def _dimension_ranges(fn: Fields, inputs: list[Any], outputs: list[Any], dims: Mapping[str, model.DimVar],
                      constraints: list[Any]) -> None:
    """No shape or constraint can divide by zero or exceed 2**62 within the declared bounds (``dimexpr``'s rule)."""
    bounds = {name: (d.bounds.lo, d.bounds.hi) for name, d in dims.items()}
    for arrays in (inputs, outputs):
        for a, rec in arrays:
            for j, d in enumerate(rec.shape):
                if isinstance(d, str):
                    here = f"{a.at('shape')}[{j}]"
                    try:
                        _, most = dimexpr.value_range(dimexpr.parse(d), bounds)
                    except dimexpr.DimExprError as e:
                        raise fail(here, f"bad dimension expression: {e}") from None
                    if most < 0:
                        raise fail(here, f"bad dimension expression: {d!r} is negative for every value within the "
                                          f"bounds")
    for i, (_, c) in enumerate(constraints):
        try:
            dimexpr.check_ranges(c, bounds)
        except dimexpr.DimExprError as e:
            raise fail(f"{fn.at('constraints')}[{i}]", f"bad constraint: {e}") from None


def _mesh(fn: Fields, nr_devices: int, inputs: list[Any], outputs: list[Any]) -> tuple[Any, Any]:
    """A sharded function's mesh (axis names and sizes whose product is ``nr_devices``) and PartitionSpecs naming
    only its axes; the arrays' records get their PartitionSpecs here."""
    mesh, axes = None, []
    if fn.value("mesh", None) is not None:
        m = fn.fields("mesh")
        names, sizes = m.list("axis_names", 64), m.list("axis_sizes", 64)
        if not names or len(names) != len(sizes):
            raise fail(m.path, "axis_names and axis_sizes must be non-empty and of the same length")
        total = 1
        for i, (n, s) in enumerate(zip(names, sizes)):
            if not _IDENTIFIER.match(as_string(n, f"{m.at('axis_names')}[{i}]", 256)) or n in axes:
                raise fail(f"{m.at('axis_names')}[{i}]", "an axis name is a unique identifier")
            axes.append(n)
            total *= as_integer(s, f"{m.at('axis_sizes')}[{i}]", 1, 1 << 20)
        if total != nr_devices:
            raise fail(m.path, f"the axes multiply to {total} devices, but nr_devices is {nr_devices}")
        mesh = model.Mesh(tuple(names), tuple(sizes))

    def spec(value: Any, path: str) -> tuple[Any, ...] | None:
        if value is None:
            return None
        if mesh is None:
            raise fail(path, "a PartitionSpec needs the function's mesh")
        for i, e in enumerate(as_list(value, path, MAX_RANK)):
            for n in (as_list(e, f"{path}[{i}]", 64) if isinstance(e, list) else [] if e is None else [e]):
                if n not in axes:
                    raise fail(f"{path}[{i}]", f"{n!r} is not an axis of the function's mesh")
        return tuple(tuple(e) if isinstance(e, list) else e for e in value)

    for arrays in (inputs, outputs):
        for k, (a, rec) in enumerate(arrays):
            partition = spec(a.value("partition_spec", None), a.at("partition_spec"))
            if partition is not None:
                arrays[k] = (a, model.replace(rec, partition_spec=partition))
    weights = fn.fields("weights_partition_specs", {})
    specs = {name: spec(s, f"{weights.path}[{name!r}]") for name, s in weights.raw.items()}
    return mesh, specs if fn.has("weights_partition_specs") else None


def _weights(w: Fields, members: Mapping[str, model.MemberInfo]) -> model.Weights:
    """Tensors must lie inside the weights member, aligned, back to back (each at the first aligned offset after the
    previous one, the last ending the member), with sizes that match: no overlap, and no bytes no tensor owns."""
    member = w.string("member")
    if member != WEIGHTS_MEMBER or member not in members:
        raise fail(w.at("member"), f"must be {WEIGHTS_MEMBER!r} and listed under 'members'")
    size = members[member].size
    spans, tensors = [], {}
    for name, raw in w.fields("tensors").raw.items():
        here = f"weights.tensors[{name!r}]"
        as_string(name, here)
        if not is_safe_member_name(name) or not name.isprintable():
            raise fail(here, "a tensor's name is a relative path of printable characters with no empty, '.' or "
                              "'..' component")
        t = Fields(raw, here)
        dt = t.string("dtype", 64)
        if dt not in dtypes.BY_NAME:
            raise fail(t.at("dtype"), f"{dt!r} is not a dtype jaxport supports")
        if dtypes.is_key(dt):  # a PRNG key type describes inputs; stored weights are numbers
            raise fail(t.at("dtype"), f"{dt!r} is a PRNG key type, which weights are never stored as")
        shape = t.list("shape", MAX_RANK)
        count = 1
        for i, d in enumerate(shape):
            count *= as_integer(d, f"{t.at('shape')}[{i}]", 0, 1 << 62)
            if count > 1 << 62:
                raise fail(t.at("shape"), "the element count overflows")
        nbytes, takes = t.integer("nbytes"), dtypes.stored_nbytes(dt, count)
        if nbytes != takes:
            raise fail(t.at("nbytes"), f"{nbytes} bytes, but shape {shape} of {dt} takes {takes}")
        offset = t.integer("offset")
        if offset % ALIGNMENT:
            raise fail(t.at("offset"), f"{offset} is not a multiple of {ALIGNMENT}")
        if offset + nbytes > size:
            raise fail(here, f"bytes {offset}..{offset + nbytes} lie past the end of the {size}-byte weights member")
        digest = as_digest(t.value("sha256"), t.at("sha256"))
        tensors[name] = model.StoredTensor(dt, tuple(shape), offset, nbytes, digest)
        spans.append((offset, offset + nbytes, name))
    spans.sort()
    for (_, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise fail("weights.tensors", f"tensors {an!r} and {bn!r} overlap")
    end = 0
    for start, stop, name in spans:
        if start != end + (-end) % ALIGNMENT:
            raise fail(f"weights.tensors[{name!r}].offset", f"{start} leaves a gap after the previous tensor, "
                                                             f"which ends at {end}")
        end = stop
    if size != end:
        raise fail(f"members[{WEIGHTS_MEMBER!r}].size", f"{size} bytes, but the tensors end at {end}")
    return model.Weights(member, tensors)
