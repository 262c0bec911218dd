"""The manifest: what an artifact holds, readable without JAX.

``validate`` checks a manifest read from an untrusted file before anything else looks at it; ``function_names``
looks functions up in a validated one. The layout is documented in ``specs/FORMAT.md`` and
``specs/schemas/manifest.schema.json``; the writer is ``jaxport.export.manifest``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .. import dimexpr, dtypes
from .._text import plural
from .._version import __version__
from ..errors import FormatError, UsageError
from ..spec_values import dimension_range, input_range
from . import calltree, model
from .bounds import Bounds
from .layout import ALIGNMENT, MAX_NAME, PAYLOAD_NAME, WEIGHTS_MEMBER, is_safe_member_name

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

#: The artifact format version, "MAJOR.MINOR". A reader accepts any minor of its major and refuses a newer major.
#: History:
#:   1.0 (2026-11-29): first version: zip container, manifest.json first, one JAX serialization per function.
#:        Before 1.0 was released it gained, additively, the weights section and member, vjp_order values above 0,
#:        and, for sharded functions, mesh, weights_partition_specs and each array's partition_spec; then an input's
#:        range, source.spec_sha256 and source.binds, with recorded paths relative to the export root.
FORMAT_VERSION = "1.0"
FORMAT_MAJOR = 1
FORMAT_NAME = "jaxport"

MAX_RANK = 64
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def function_names(m: model.Manifest | dict[str, Any], function: str | None = None) -> list[str]:
    """The artifact's functions, or just ``function``; an unknown name is a UsageError with close matches."""
    names = list(m.functions if isinstance(m, model.Manifest) else m["functions"])
    if function is None:
        return names
    if function not in names:
        import difflib  # only for this message: not imported when a manifest is read

        close = difflib.get_close_matches(function, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"the artifact has no function {function!r}.{hint} Functions: {', '.join(names)}.")
    return [function]


# --- validation of untrusted manifests ---------------------------------------------------------------------------


class _V:
    """The validator's checks of one value each; ``fail`` names the field's path in the manifest."""

    @staticmethod
    def fail(path: str, msg: str) -> FormatError:
        return FormatError(f"manifest.json: {path}: {msg}")

    def obj(self, v: Any, path: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, f"expected an object, found {type(v).__name__}")
        return v

    def lst(self, v: Any, path: str, limit: int = 1 << 20) -> list[Any]:
        if not isinstance(v, list):
            raise self.fail(path, f"expected a list, found {type(v).__name__}")
        if len(v) > limit:
            raise self.fail(path, f"has {len(v)} entries; at most {limit} are allowed")
        return v

    def string(self, v: Any, path: str, limit: int = MAX_NAME) -> str:
        if not isinstance(v, str):
            raise self.fail(path, f"expected a string, found {type(v).__name__}")
        if len(v) > limit:
            raise self.fail(path, f"string is {len(v)} characters; at most {limit} are allowed")
        return v

    def integer(self, v: Any, path: str, lo: int = 0, hi: int = (1 << 63) - 1) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(path, f"expected an integer, found {type(v).__name__}")
        if not lo <= v <= hi:
            raise self.fail(path, f"{v} is out of range [{lo}, {hi}]")
        return v

    def key(self, o: dict[str, Any], k: str, path: str) -> Any:
        if k not in o:
            raise self.fail(path, f"missing required field {k!r}")
        return o[k]

    def optional_string(self, v: Any, path: str, limit: int = MAX_NAME) -> str | None:
        return None if v is None else self.string(v, path, limit)

    def strings(self, v: Any, path: str, limit: int = 1 << 16, length: int = MAX_NAME) -> list[str]:
        items = self.lst(v, path, limit)
        for i, s in enumerate(items):
            self.string(s, f"{path}[{i}]", length)
        return items


def _check_shape(v: _V, shape: Any, path: str) -> None:
    v.lst(shape, path, MAX_RANK)
    for i, d in enumerate(shape):
        if isinstance(d, str):
            try:
                dimexpr.parse(v.string(d, f"{path}[{i}]", 256))
            except dimexpr.DimExprError as e:
                raise v.fail(f"{path}[{i}]", f"bad dimension expression: {e}") from None
        else:
            v.integer(d, f"{path}[{i}]", 0, (1 << 62))


def _check_arrays(v: _V, items: Any, path: str) -> None:
    seen = set()
    for i, a in enumerate(v.lst(items, path, 1 << 16)):
        here = f"{path}[{i}]"
        v.obj(a, here)
        name = v.string(v.key(a, "name", here), f"{here}.name")
        if not name.isprintable():
            raise v.fail(f"{here}.name", f"{name!r} contains control characters")
        if name in seen:
            raise v.fail(f"{here}.name", f"duplicate name {name!r}")
        seen.add(name)
        _check_shape(v, v.key(a, "shape", here), f"{here}.shape")
        dt = v.string(v.key(a, "dtype", here), f"{here}.dtype", 64)
        if dt not in dtypes.BY_NAME:
            raise v.fail(f"{here}.dtype", f"{dt!r} is not a dtype jaxport supports")
        v.optional_string(a.get("sharding"), f"{here}.sharding", 1 << 16)
        v.optional_string(a.get("spec_path"), f"{here}.spec_path", 1 << 16)


def _check_ranges(v: _V, inputs: list[Any], path: str) -> None:
    """An input's optional ``range``: ``[LO, HI]``, the half-open range of its values, by the spec's rules
    (``spec_values.input_range``); integer bounds for integer dtypes."""
    for i, a in enumerate(inputs):
        if "range" not in a:
            continue
        here = f"{path}[{i}].range"
        bounds = v.lst(a["range"], here, 2)
        if len(bounds) != 2:
            raise v.fail(here, f"expected [LO, HI], found {plural(len(bounds), 'entry', 'entries')}")
        kind = dtypes.BY_NAME[a["dtype"]].kind
        named = any(isinstance(b, str) and any(c.isalpha() or c == "_" for c in b) for b in bounds)  # [0, "nodes"]
        if not named and kind in ("int", "uint") and not all(isinstance(b, int) and not isinstance(b, bool)
                                                             for b in bounds):
            raise v.fail(here, f"expected two integers for a {a['dtype']} input")
        try:
            (dimension_range if named else input_range)(bounds[0], bounds[1], a["dtype"])
        except ValueError as e:
            raise v.fail(here, str(e).split(";")[0]) from None


def _check_signature(v: _V, sig: Any, n_inputs: int, path: str) -> None:
    """The call tree: known node kinds, input indexes in range, each input used exactly once."""
    v.obj(sig, path)
    used: list[int] = []

    def walk(node: Any, here: str, top: bool) -> None:
        v.obj(node, here)
        kind = calltree.kind(node)
        if kind is None:
            raise v.fail(here, f"a call-tree node has exactly one of {', '.join(model.NODE_KINDS)}; found "
                               f"{', '.join(map(repr, sorted(node)[:4])) or 'none'}")
        if top:
            v.string(v.key(node, "name", here), f"{here}.name")
        if kind == "input":
            used.append(v.integer(node["input"], f"{here}.input", 0, max(n_inputs - 1, 0)))
            if n_inputs == 0:
                raise v.fail(f"{here}.input", "the function has no inputs")
        elif kind == "bound":
            v.string(node["bound"], f"{here}.bound", 1 << 12)
        elif kind == "list":
            for i, c in enumerate(v.lst(node["list"], f"{here}.list", 1 << 16)):
                walk(c, f"{here}.list[{i}]", False)
        elif kind == "dict":
            for k, c in v.obj(node["dict"], f"{here}.dict").items():
                walk(c, f"{here}.dict[{k!r}]", False)

    for i, a in enumerate(v.lst(sig.get("args", []), f"{path}.args", 1 << 16)):
        walk(a, f"{path}.args[{i}]", True)
    for k, c in v.obj(sig.get("kwargs", {}), f"{path}.kwargs").items():
        walk(c, f"{path}.kwargs[{k!r}]", False)
    if sig and sorted(used) != list(range(n_inputs)):
        raise v.fail(path, f"uses inputs {sorted(used)[:8]}, but each of the {n_inputs} inputs must be used exactly "
                           f"once")


def _check_output_tree(v: _V, node: Any, n_outputs: int, path: str) -> None:
    v.obj(node, path)
    if "output" in node:
        v.integer(node["output"], f"{path}.output", 0, max(n_outputs - 1, 0))
        if n_outputs == 0:
            raise v.fail(f"{path}.output", "the function has no outputs")
    for kind in ("list", "tuple", "children"):
        if kind in node:
            for i, c in enumerate(v.lst(node[kind], f"{path}.{kind}", 1 << 16)):
                _check_output_tree(v, c, n_outputs, f"{path}.{kind}[{i}]")
    if "dict" in node:
        for k, c in v.obj(node["dict"], f"{path}.dict").items():
            _check_output_tree(v, c, n_outputs, f"{path}.dict[{k!r}]")
    if "node" in node:
        v.string(node["node"], f"{path}.node")


def _check_described(v: _V, f: dict[str, Any], here: str, inputs: list[Any], n_outputs: int) -> None:
    """The fields a reader only displays or cross-checks: their types and ranges, so that no reader trips on them."""
    v.optional_string(f.get("entrypoint"), f"{here}.entrypoint", 4096)
    v.optional_string(f.get("stablehlo_version"), f"{here}.stablehlo_version", 64)
    if "x64" in f and not isinstance(f["x64"], bool):
        raise v.fail(f"{here}.x64", f"expected true or false, found {type(f['x64']).__name__}")
    _check_signature(v, f.get("signature", {}), len(inputs), f"{here}.signature")
    if "output_tree" in f:
        _check_output_tree(v, f["output_tree"], n_outputs, f"{here}.output_tree")
    names = {a["name"] for a in inputs}
    dims = v.obj(f.get("dims", {}), f"{here}.dims")
    for dn, d in dims.items():
        dh = f"{here}.dims[{dn!r}]"
        if not _IDENTIFIER.match(dn):
            raise v.fail(dh, "a dimension variable's name is an identifier")
        v.obj(d, dh)
        lo = v.integer(d["min"], f"{dh}.min", 0, 1 << 62) if d.get("min") is not None else 1
        hi = v.integer(d["max"], f"{dh}.max", 0, 1 << 62) if d.get("max") is not None else None
        if hi is not None and lo > hi:
            raise v.fail(dh, f"min {lo} is greater than max {hi}")
        src = d.get("derived_from")
        if src is not None:
            v.obj(src, f"{dh}.derived_from")
            name = v.string(v.key(src, "input", f"{dh}.derived_from"), f"{dh}.derived_from.input")
            if name not in names:
                raise v.fail(f"{dh}.derived_from.input", f"{name!r} is not an input of the function")
            v.integer(v.key(src, "axis", f"{dh}.derived_from"), f"{dh}.derived_from.axis", 0, MAX_RANK - 1)
            v.string(v.key(src, "expression", f"{dh}.derived_from"), f"{dh}.derived_from.expression", 256)
    v.strings(f.get("shape_assertions", []), f"{here}.shape_assertions", 1 << 16, 1 << 16)
    for i, c in enumerate(v.lst(f.get("custom_calls", []), f"{here}.custom_calls", 1 << 16)):
        ch = f"{here}.custom_calls[{i}]"
        v.obj(c, ch)
        v.string(c.get("target"), f"{ch}.target")
        if "count" in c:
            v.integer(c["count"], f"{ch}.count")
        v.optional_string(c.get("stability"), f"{ch}.stability", 64)
    v.strings(f.get("allowed_custom_calls", []), f"{here}.allowed_custom_calls")
    v.strings(f.get("disabled_safety_checks", []), f"{here}.disabled_safety_checks")
    for i, k in enumerate(v.lst(f.get("kept_inputs", []), f"{here}.kept_inputs", 1 << 20)):
        v.integer(k, f"{here}.kept_inputs[{i}]", 0, 1 << 20)
    effects = v.obj(f.get("effects", {}), f"{here}.effects")
    for k in ("ordered", "unordered"):
        v.strings(effects.get(k, []), f"{here}.effects.{k}")
    v.integer(f.get("vjp_order", 0), f"{here}.vjp_order", 0, 64)
    consts = v.obj(f.get("embedded_constants", {}), f"{here}.embedded_constants")
    for k in ("count", "bytes"):
        if k in consts:
            v.integer(consts[k], f"{here}.embedded_constants.{k}")
    for i, c in enumerate(v.lst(consts.get("largest", []), f"{here}.embedded_constants.largest", 64)):
        ch = f"{here}.embedded_constants.largest[{i}]"
        v.obj(c, ch)
        v.optional_string(c.get("type"), f"{ch}.type", 1 << 12)
        if "bytes" in c:
            v.integer(c["bytes"], f"{ch}.bytes")
        v.optional_string(c.get("location"), f"{ch}.location", 1 << 12)


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate(m: Any) -> model.Manifest:
    """Check the structure of an untrusted manifest (parsed JSON); raise FormatError naming the first bad field.
    Returns it as records: the only way from a manifest's JSON to a ``model.Manifest``."""
    v = _V()
    v.obj(m, "(top level)")
    fmt = v.key(m, "format", "(top level)")
    if fmt != FORMAT_NAME:
        raise v.fail("format", f"expected {FORMAT_NAME!r}, found {fmt!r}: this is not a jaxport artifact")
    ver = v.string(v.key(m, "format_version", "(top level)"), "format_version", 32)
    mm = re.fullmatch(r"([0-9]{1,6})\.([0-9]{1,6})", ver)
    if not mm:
        raise v.fail("format_version", f"{ver!r} is not of the form MAJOR.MINOR")
    producer = m.get("producer") if isinstance(m.get("producer"), dict) else {}
    writer = str(producer["jaxport"]) if isinstance(producer.get("jaxport"), str) else "unknown"
    if not writer.isprintable() or len(writer) > 40:
        writer = repr(writer[:40])
    if int(mm.group(1)) > FORMAT_MAJOR:
        raise FormatError(f"artifact format {ver} was written by jaxport {writer}; this jaxport "
                          f"({__version__}) reads format {FORMAT_MAJOR}.x. Upgrade jaxport to read it.")
    if int(mm.group(1)) < 1:
        raise v.fail("format_version", f"{ver!r} is not a released format version")
    producer = v.obj(v.key(m, "producer", "(top level)"), "producer")
    for k in ("jaxport", "jax", "jaxlib"):
        v.string(v.key(producer, k, "producer"), f"producer.{k}", 64)
    if producer.get("calling_convention_range") is not None:
        rng = v.lst(producer["calling_convention_range"], "producer.calling_convention_range", 2)
        if len(rng) != 2:
            raise v.fail("producer.calling_convention_range", "expected [oldest, newest]")
        for i, x in enumerate(rng):
            v.integer(x, f"producer.calling_convention_range[{i}]", 0, 1 << 20)
    source = v.obj(m.get("source", {}), "source")
    v.optional_string(source.get("spec"), "source.spec", 4096)
    if source.get("spec_sha256") is not None and not _SHA256.match(v.string(source["spec_sha256"],
                                                                             "source.spec_sha256", 64)):
        raise v.fail("source.spec_sha256", "expected 64 lowercase hex digits")
    for k, val in v.obj(source.get("binds", {}), "source.binds").items():
        v.string(val, f"source.binds[{k!r}]", 1 << 12)
    meta = v.obj(m.get("metadata", {}), "metadata")
    for k in ("name", "version", "description"):
        if meta.get(k) is not None:
            v.string(meta[k], f"metadata.{k}", 1 << 16)
    labels = v.obj(meta.get("labels", {}), "metadata.labels")
    for k, val in labels.items():
        v.string(val, f"metadata.labels[{k!r}]", 1 << 12)
    members = v.obj(v.key(m, "members", "(top level)"), "members")
    if len(members) > 1 << 16:
        raise v.fail("members", f"lists {len(members)} members; at most {1 << 16} are allowed")
    for name, info in members.items():
        here = f"members[{name!r}]"
        if name == "manifest.json":
            raise v.fail(here, "the manifest does not list itself")
        v.string(name, here)
        v.obj(info, here)
        v.integer(v.key(info, "size", here), f"{here}.size")
        digest = v.string(v.key(info, "sha256", here), f"{here}.sha256", 64)
        if not _SHA256.match(digest):
            raise v.fail(f"{here}.sha256", "expected 64 lowercase hex digits")
    functions = v.obj(v.key(m, "functions", "(top level)"), "functions")
    if not functions:
        raise v.fail("functions", "the artifact declares no function")
    for fname, f in functions.items():
        here = f"functions[{fname!r}]"
        v.string(fname, here, 256)
        if not _IDENTIFIER.match(fname):
            raise v.fail(here, "a function's name is an identifier ([A-Za-z_][A-Za-z0-9_]*)")
        v.obj(f, here)
        payload = v.string(v.key(f, "payload", here), f"{here}.payload")
        if payload not in members:
            raise v.fail(f"{here}.payload", f"{payload!r} is not listed under 'members'")
        if not PAYLOAD_NAME.match(payload):
            raise v.fail(f"{here}.payload", f"{payload!r} is not a program member's name (functions/NAME.jaxexport)")
        v.integer(v.key(f, "calling_convention_version", here), f"{here}.calling_convention_version", 0, 1 << 20)
        plats = v.lst(v.key(f, "platforms", here), f"{here}.platforms", 16)
        if not plats:
            raise v.fail(f"{here}.platforms", "the function names no platform")
        for i, p in enumerate(plats):
            v.string(p, f"{here}.platforms[{i}]", 32)
        _check_arrays(v, v.key(f, "inputs", here), f"{here}.inputs")
        _check_ranges(v, f["inputs"], f"{here}.inputs")
        _check_arrays(v, v.key(f, "outputs", here), f"{here}.outputs")
        _check_described(v, f, here, f["inputs"], len(f["outputs"]))
        for i, c in enumerate(v.lst(f.get("constraints", []), f"{here}.constraints", 1024)):
            try:
                dimexpr.parse_constraint(v.string(c, f"{here}.constraints[{i}]", 1024))
            except dimexpr.DimExprError as e:
                raise v.fail(f"{here}.constraints[{i}]", f"bad constraint: {e}") from None
        _check_dimension_ranges(v, f, here)
        v.integer(f.get("nr_devices", 1), f"{here}.nr_devices", 1, 1 << 20)
        _check_mesh(v, f, here)
        names = v.lst(f.get("weights", []), f"{here}.weights", 1 << 20)
        tensors = m["weights"].get("tensors") if isinstance(m.get("weights"), dict) else None
        tensors = tensors if isinstance(tensors, dict) else {}
        for i, n in enumerate(names):
            if not isinstance(n, str) or n not in tensors:
                raise v.fail(f"{here}.weights[{i}]", f"{n!r} is not a tensor of the top-level 'weights'")
        if len(set(names)) != len(names):
            raise v.fail(f"{here}.weights", "names a tensor twice")
    if m.get("weights") is not None:
        _check_weights(v, m["weights"], members)
    return _manifest(m)


def _check_dimension_ranges(v: _V, f: dict[str, Any], here: str) -> None:
    """No shape or constraint can divide by zero or exceed 2**62 within the declared bounds (``dimexpr``'s rule)."""
    bounds = {name: (1 if d.get("min") is None else d["min"], d.get("max")) for name, d in f.get("dims", {}).items()}
    for kind in ("inputs", "outputs"):
        for i, a in enumerate(f[kind]):
            for j, d in enumerate(a["shape"]):
                if isinstance(d, str):
                    try:
                        _, most = dimexpr.value_range(dimexpr.parse(d), bounds)
                    except dimexpr.DimExprError as e:
                        raise v.fail(f"{here}.{kind}[{i}].shape[{j}]", f"bad dimension expression: {e}") from None
                    if most < 0:
                        raise v.fail(f"{here}.{kind}[{i}].shape[{j}]", f"bad dimension expression: {d!r} is "
                                                                        f"negative for every value within the bounds")
    for i, c in enumerate(f.get("constraints", [])):
        try:
            dimexpr.check_ranges(dimexpr.parse_constraint(c), bounds)
        except dimexpr.DimExprError as e:
            raise v.fail(f"{here}.constraints[{i}]", f"bad constraint: {e}") from None


def _check_mesh(v: _V, f: dict[str, Any], here: str) -> None:
    """A sharded function's mesh (axis names and sizes whose product is ``nr_devices``) and PartitionSpecs naming
    only its axes."""
    mesh = f.get("mesh")
    axes: list[str] = []
    if mesh is not None:
        v.obj(mesh, f"{here}.mesh")
        names = v.lst(v.key(mesh, "axis_names", f"{here}.mesh"), f"{here}.mesh.axis_names", 64)
        sizes = v.lst(v.key(mesh, "axis_sizes", f"{here}.mesh"), f"{here}.mesh.axis_sizes", 64)
        if not names or len(names) != len(sizes):
            raise v.fail(f"{here}.mesh", "axis_names and axis_sizes must be non-empty and of the same length")
        total = 1
        for i, (n, s) in enumerate(zip(names, sizes)):
            if not _IDENTIFIER.match(v.string(n, f"{here}.mesh.axis_names[{i}]", 256)) or n in axes:
                raise v.fail(f"{here}.mesh.axis_names[{i}]", "an axis name is a unique identifier")
            axes.append(n)
            total *= v.integer(s, f"{here}.mesh.axis_sizes[{i}]", 1, 1 << 20)
        if total != f.get("nr_devices", 1):
            raise v.fail(f"{here}.mesh", f"the axes multiply to {total} devices, but nr_devices is "
                                         f"{f.get('nr_devices', 1)}")

    def spec(value: Any, path: str) -> None:
        if value is None:
            return
        if mesh is None:
            raise v.fail(path, "a PartitionSpec needs the function's mesh")
        for i, e in enumerate(v.lst(value, path, MAX_RANK)):
            for n in (v.lst(e, f"{path}[{i}]", 64) if isinstance(e, list) else [] if e is None else [e]):
                if n not in axes:
                    raise v.fail(f"{path}[{i}]", f"{n!r} is not an axis of the function's mesh")

    for kind in ("inputs", "outputs"):
        for i, a in enumerate(f[kind]):
            spec(a.get("partition_spec"), f"{here}.{kind}[{i}].partition_spec")
    for name, s in v.obj(f.get("weights_partition_specs", {}), f"{here}.weights_partition_specs").items():
        spec(s, f"{here}.weights_partition_specs[{name!r}]")


def _check_weights(v: _V, w: Any, members: dict[str, Any]) -> None:
    """Tensors must lie inside the weights member, aligned, back to back (each at the first aligned offset after the
    previous one, the last ending the member), with sizes that match: no overlap, and no bytes no tensor owns."""
    v.obj(w, "weights")
    member = v.string(v.key(w, "member", "weights"), "weights.member")
    if member != WEIGHTS_MEMBER or member not in members:
        raise v.fail("weights.member", f"must be {WEIGHTS_MEMBER!r} and listed under 'members'")
    size = members[member]["size"]
    spans = []
    for name, t in v.obj(v.key(w, "tensors", "weights"), "weights.tensors").items():
        here = f"weights.tensors[{name!r}]"
        v.string(name, here)
        if not is_safe_member_name(name) or not name.isprintable():
            raise v.fail(here, "a tensor's name is a relative path of printable characters with no empty, '.' or "
                               "'..' component")
        v.obj(t, here)
        dt = v.string(v.key(t, "dtype", here), f"{here}.dtype", 64)
        if dt not in dtypes.BY_NAME:
            raise v.fail(f"{here}.dtype", f"{dt!r} is not a dtype jaxport supports")
        if dtypes.is_key(dt):  # a PRNG key type describes inputs; stored weights are numbers
            raise v.fail(f"{here}.dtype", f"{dt!r} is a PRNG key type, which weights are never stored as")
        shape = v.lst(v.key(t, "shape", here), f"{here}.shape", MAX_RANK)
        count = 1
        for i, d in enumerate(shape):
            count *= v.integer(d, f"{here}.shape[{i}]", 0, 1 << 62)
            if count > 1 << 62:
                raise v.fail(f"{here}.shape", "the element count overflows")
        nbytes = v.integer(v.key(t, "nbytes", here), f"{here}.nbytes")
        if nbytes != count * dtypes.BY_NAME[dt].itemsize:
            raise v.fail(f"{here}.nbytes", f"{nbytes} bytes, but shape {shape} of {dt} takes "
                                           f"{count * dtypes.BY_NAME[dt].itemsize}")
        offset = v.integer(v.key(t, "offset", here), f"{here}.offset")
        if offset % ALIGNMENT:
            raise v.fail(f"{here}.offset", f"{offset} is not a multiple of {ALIGNMENT}")
        if offset + nbytes > size:
            raise v.fail(here, f"bytes {offset}..{offset + nbytes} lie past the end of the {size}-byte weights member")
        digest = v.string(v.key(t, "sha256", here), f"{here}.sha256", 64)
        if not _SHA256.match(digest):
            raise v.fail(f"{here}.sha256", "expected 64 lowercase hex digits")
        spans.append((offset, offset + nbytes, name))
    spans.sort()
    for (_, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise v.fail("weights.tensors", f"tensors {an!r} and {bn!r} overlap")
    end = 0
    for start, stop, name in spans:
        if start != end + (-end) % ALIGNMENT:
            raise v.fail(f"weights.tensors[{name!r}].offset", f"{start} leaves a gap after the previous tensor, "
                                                              f"which ends at {end}")
        end = stop
    if size != end:
        raise v.fail(f"members[{WEIGHTS_MEMBER!r}].size", f"{size} bytes, but the tensors end at {end}")


# --- the records of a validated manifest -------------------------------------------------------------------------


def _manifest(m: dict[str, Any]) -> model.Manifest:
    """The records of a manifest ``validate`` has checked (absent optional fields as ``model`` says)."""
    p = m["producer"]
    rng = p.get("calling_convention_range")
    meta = m.get("metadata") or {}
    source = m.get("source") or {}
    w = m.get("weights")
    weights = None if w is None else model.Weights(w["member"], {
        n: model.StoredTensor(t["dtype"], tuple(t["shape"]), t["offset"], t["nbytes"], t["sha256"])
        for n, t in w["tensors"].items()})
    return model.Manifest(
        format_version=m["format_version"],
        producer=model.Producer(p["jaxport"], p["jax"], p["jaxlib"], None if rng is None else (rng[0], rng[1])),
        members={n: model.MemberInfo(i["size"], i["sha256"]) for n, i in m["members"].items()},
        functions={n: function_record(f) for n, f in m["functions"].items()},
        metadata=model.Metadata(meta.get("name"), meta.get("version"), meta.get("description"),
                                meta.get("labels") or model.EMPTY,
                                tuple(k for k in meta if k in model.METADATA_KEYS)),
        source=model.Source(source.get("spec"), source.get("spec_sha256"), source.get("binds")),
        weights=weights,
        format=m["format"])


def _partition_spec(spec: Any) -> tuple[Any, ...] | None:
    return None if spec is None else tuple(tuple(e) if isinstance(e, list) else e for e in spec)


def _call_node(node: Mapping[str, Any]) -> model.CallNode:
    kind = calltree.kind(node)
    assert kind is not None  # validate checked it
    value = node[kind]
    if kind == "list":
        value = tuple(_call_node(c) for c in value)
    elif kind == "dict":
        value = {k: _call_node(c) for k, c in value.items()}
    return model.CallNode(kind, value, node.get("name"))


def _output_node(node: Mapping[str, Any]) -> model.OutputNode:
    if "output" in node:
        return model.OutputNode("output", node["output"])
    if "dict" in node:
        return model.OutputNode("dict", {k: _output_node(c) for k, c in node["dict"].items()})
    for kind in ("list", "tuple"):
        if kind in node:
            return model.OutputNode(kind, tuple(_output_node(c) for c in node[kind]))
    if "node" in node or "children" in node:
        return model.OutputNode("node", tuple(_output_node(c) for c in node.get("children", [])), node.get("node"))
    return model.OutputNode("none")


def as_function(f: model.Function | Mapping[str, Any]) -> model.Function:
    """A function as its record, whether given the record or (transitional) its JSON."""
    return f if isinstance(f, model.Function) else function_record(f)


def as_input(a: model.Input | Mapping[str, Any]) -> model.Input:
    """An input as its record, whether given the record or (transitional) its entry in a validated manifest."""
    if isinstance(a, model.Input):
        return a
    return model.Input(a["name"], tuple(a["shape"]), a["dtype"], a.get("spec_path"), a.get("sharding"),
                       _partition_spec(a.get("partition_spec")),
                       None if a.get("range") is None else (a["range"][0], a["range"][1]))


def function_record(f: Mapping[str, Any]) -> model.Function:
    """The record of one function entry of a manifest ``validate`` has checked (transitional: for the readers that
    are still given a function's JSON; the others get it from ``validate``)."""
    inputs = tuple(as_input(a) for a in f["inputs"])
    outputs = tuple(model.Output(a["name"], tuple(a["shape"]), a["dtype"], a.get("sharding"),
                                 _partition_spec(a.get("partition_spec"))) for a in f["outputs"])
    sig = f.get("signature")
    if sig:
        signature = model.Signature(tuple(_call_node(a) for a in sig.get("args", [])),
                                    {k: _call_node(c) for k, c in sig.get("kwargs", {}).items()})
    else:  # no call tree: the inputs are the positional arguments, in order
        signature = model.Signature(tuple(model.CallNode("input", i, a.name) for i, a in enumerate(inputs)))
    dims = {}
    for name, d in (f.get("dims") or {}).items():
        src = d.get("derived_from")
        dims[name] = model.DimVar(Bounds.of(d), None if src is None else
                                  model.Derivation(src["input"], src["axis"], src["expression"]))
    consts = f.get("embedded_constants") or {}
    effects = f.get("effects") or {}
    mesh = f.get("mesh")
    wps = f.get("weights_partition_specs")
    return model.Function(
        payload=f["payload"],
        calling_convention_version=f["calling_convention_version"],
        platforms=tuple(f["platforms"]),
        inputs=inputs,
        outputs=outputs,
        signature=signature,
        entrypoint=f.get("entrypoint"),
        stablehlo_version=f.get("stablehlo_version"),
        x64=bool(f.get("x64", False)),
        weights=tuple(f.get("weights", ())),
        output_tree=None if f.get("output_tree") is None else _output_node(f["output_tree"]),
        dims=dims,
        constraints=tuple(f.get("constraints", ())),
        shape_assertions=tuple(f.get("shape_assertions", ())),
        custom_calls=tuple(model.CustomCall(c["target"], c.get("count"), c.get("stability"))
                           for c in f.get("custom_calls", ())),
        allowed_custom_calls=tuple(f.get("allowed_custom_calls", ())),
        disabled_safety_checks=tuple(f.get("disabled_safety_checks", ())),
        kept_inputs=None if f.get("kept_inputs") is None else tuple(f["kept_inputs"]),
        effects=model.Effects(tuple(effects.get("ordered", ())), tuple(effects.get("unordered", ()))),
        nr_devices=f.get("nr_devices", 1),
        vjp_order=f.get("vjp_order", 0),
        embedded_constants=model.EmbeddedConstants(
            consts.get("count"), consts.get("bytes"),
            tuple(model.Constant(c.get("type"), c.get("bytes"), c.get("location")) for c in consts.get("largest", ()))),
        mesh=None if mesh is None else model.Mesh(tuple(mesh["axis_names"]), tuple(mesh["axis_sizes"])),
        weights_partition_specs=None if wps is None else {n: _partition_spec(s) for n, s in wps.items()})
