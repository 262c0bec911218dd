"""The manifest: what an artifact holds, readable without JAX.

``build_function_entry`` describes one lowered function; ``validate`` checks a manifest read from an untrusted file
before anything else looks at it. The layout is documented in ``specs/FORMAT.md`` and
``specs/schemas/manifest.schema.json``.
"""

from __future__ import annotations

import re
from typing import Any

from . import dimexpr, dtypes
from .errors import FormatError

#: The artifact format version, "MAJOR.MINOR". A reader accepts any minor of its major and refuses a newer major.
#: History:
#:   1.0 (2026-11-29): first version: zip container, manifest.json first, one JAX serialization per function.
FORMAT_VERSION = "1.0"
FORMAT_MAJOR = 1
FORMAT_NAME = "jaxport"

#: The member holding every bound tensor (see weights.py).
WEIGHTS_MEMBER = "weights.bin"
MAX_RANK = 64
MAX_NAME = 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def versions() -> dict[str, Any]:
    """Versions of jaxport, jax and jaxlib in this process (imports jax)."""
    import jax
    import jaxlib
    from jax import export

    from ._version import __version__

    return {"jaxport": __version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "calling_convention_range": [export.minimum_supported_calling_convention_version,
                                         export.maximum_supported_calling_convention_version]}


def _dim(d: Any) -> int | str:
    return d if isinstance(d, int) else str(d)


def derivations(inputs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For each dimension variable, the first input axis it can be solved from, in solving order."""
    known: dict[str, int] = {}
    out: dict[str, dict[str, Any]] = {}
    progress = True
    parsed = [(i["name"], [d if isinstance(d, int) else dimexpr.parse(d) for d in i["shape"]]) for i in inputs]
    while progress:
        progress = False
        for name, dims in parsed:
            for axis, d in enumerate(dims):
                if isinstance(d, int):
                    continue
                unknown = dimexpr.variables(d) - known.keys()
                if len(unknown) != 1:
                    continue
                (v,) = unknown
                lin = dimexpr.linear(d, v, known)
                if lin is None or lin[0] == 0:
                    continue
                known[v] = 1
                out[v] = {"input": name, "axis": axis, "expression": str(d)}
                progress = True
    return out


def build_function_entry(lowered: Any, spec: Any, entrypoint: str, payload: str,
                         allowed_custom_calls: list[str]) -> dict[str, Any]:
    """The manifest entry of one lowered function (see ``lower.Lowered``)."""
    from ._jax_internals import guaranteed_stable_custom_calls
    from .lower import function_constraints
    from .module_scan import short_location, stablehlo_version

    exp = lowered.exported
    stable = guaranteed_stable_custom_calls()
    in_shardings = list(getattr(exp, "in_shardings_hlo", None) or [None] * len(exp.in_avals))
    out_shardings = list(getattr(exp, "out_shardings_hlo", None) or [None] * len(exp.out_avals))
    positions = lowered.input_positions or list(range(len(lowered.inputs)))
    inputs = []
    for inp, pos in zip(lowered.inputs, positions):
        aval, sh = exp.in_avals[pos], in_shardings[pos]
        inputs.append({"name": inp.name, "spec_path": inp.spec_path, "shape": [_dim(d) for d in aval.shape],
                       "dtype": str(aval.dtype), "sharding": None if sh is None else str(sh)})
    outputs = []
    for name, aval, sh in zip(lowered.outputs, exp.out_avals, out_shardings):
        outputs.append({"name": name, "shape": [_dim(d) for d in aval.shape], "dtype": str(aval.dtype),
                        "sharding": None if sh is None else str(sh)})
    derived = derivations(inputs)
    dims = {}
    for v in sorted(derived, key=lambda v: list(derived).index(v)):
        d = spec.dims.get(v)
        dims[v] = {"min": d.min if d and d.min is not None else 1, "max": d.max if d else None,
                   "derived_from": derived[v]}
    counts = lowered.scan.custom_call_counts()
    custom_calls = [{"target": t, "count": counts[t],
                     "stability": "guaranteed" if t in stable else "allowed"} for t in sorted(counts)]
    big = sorted(lowered.scan.constants, key=lambda c: -c.nbytes)
    return {
        "entrypoint": entrypoint,
        "payload": payload,
        "calling_convention_version": exp.calling_convention_version,
        "stablehlo_version": stablehlo_version(exp.mlir_module_serialized),
        "platforms": list(exp.platforms),
        "x64": lowered.x64,
        "signature": lowered.signature,
        "inputs": inputs,
        "weights": [t.name for t in lowered.tensors],
        "outputs": outputs,
        "output_tree": lowered.output_tree,
        "dims": dims,
        "constraints": function_constraints(lowered.inputs, spec)[1],
        "shape_assertions": lowered.scan.shape_assertions,
        "custom_calls": custom_calls,
        "allowed_custom_calls": sorted(set(allowed_custom_calls)),
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
        "kept_inputs": list(exp.module_kept_var_idx),
        "effects": {"ordered": [str(e) for e in exp.ordered_effects],
                    "unordered": [str(e) for e in exp.unordered_effects]},
        "nr_devices": exp.nr_devices,
        "vjp_order": 0,
        "embedded_constants": {
            "count": len(big), "bytes": lowered.scan.constant_bytes(),
            "largest": [{"type": c.type, "bytes": c.nbytes, "location": short_location(c.location)}
                        for c in big[:5] if c.nbytes > 0]},
    }


def function_names(m: dict[str, Any], function: str | None = None) -> list[str]:
    """The artifact's functions, or just ``function``; an unknown name is a UsageError with close matches."""
    import difflib

    from .errors import UsageError

    names = list(m["functions"])
    if function is None:
        return names
    if function not in m["functions"]:
        close = difflib.get_close_matches(function, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"the artifact has no function {function!r}.{hint} Functions: {', '.join(names)}.")
    return [function]


# --- validation of untrusted manifests ---------------------------------------------------------------------------


class _V:
    def __init__(self) -> None:
        pass

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
        if name in seen:
            raise v.fail(f"{here}.name", f"duplicate name {name!r}")
        seen.add(name)
        _check_shape(v, v.key(a, "shape", here), f"{here}.shape")
        dt = v.string(v.key(a, "dtype", here), f"{here}.dtype", 64)
        if dt not in dtypes.BY_NAME:
            raise v.fail(f"{here}.dtype", f"{dt!r} is not a dtype jaxport supports")


def validate(m: Any) -> dict[str, Any]:
    """Check the structure of an untrusted manifest; raise FormatError naming the first bad field."""
    v = _V()
    v.obj(m, "(top level)")
    fmt = v.key(m, "format", "(top level)")
    if fmt != FORMAT_NAME:
        raise v.fail("format", f"expected {FORMAT_NAME!r}, found {fmt!r}: this is not a jaxport artifact")
    ver = v.string(v.key(m, "format_version", "(top level)"), "format_version", 32)
    mm = re.match(r"^(\d{1,6})\.(\d{1,6})$", ver)
    if not mm:
        raise v.fail("format_version", f"{ver!r} is not of the form MAJOR.MINOR")
    producer = m.get("producer") if isinstance(m.get("producer"), dict) else {}
    writer = str(producer["jaxport"]) if isinstance(producer.get("jaxport"), str) else "unknown"
    if int(mm.group(1)) > FORMAT_MAJOR:
        from ._version import __version__

        raise FormatError(f"artifact format {ver} was written by jaxport {writer[:40]}; this jaxport "
                          f"({__version__}) reads format {FORMAT_MAJOR}.x. Upgrade jaxport to read it.")
    if int(mm.group(1)) < 1:
        raise v.fail("format_version", f"{ver!r} is not a released format version")
    producer = v.obj(v.key(m, "producer", "(top level)"), "producer")
    for k in ("jaxport", "jax", "jaxlib"):
        v.string(v.key(producer, k, "producer"), f"producer.{k}", 64)
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
        v.obj(f, here)
        payload = v.string(v.key(f, "payload", here), f"{here}.payload")
        if payload not in members:
            raise v.fail(f"{here}.payload", f"{payload!r} is not listed under 'members'")
        v.integer(v.key(f, "calling_convention_version", here), f"{here}.calling_convention_version", 0, 1 << 20)
        plats = v.lst(v.key(f, "platforms", here), f"{here}.platforms", 16)
        for i, p in enumerate(plats):
            v.string(p, f"{here}.platforms[{i}]", 32)
        _check_arrays(v, v.key(f, "inputs", here), f"{here}.inputs")
        _check_arrays(v, v.key(f, "outputs", here), f"{here}.outputs")
        dims = v.obj(f.get("dims", {}), f"{here}.dims")
        for dn, d in dims.items():
            dh = f"{here}.dims[{dn!r}]"
            v.obj(d, dh)
            if d.get("min") is not None:
                v.integer(d["min"], f"{dh}.min", 0, 1 << 62)
            if d.get("max") is not None:
                v.integer(d["max"], f"{dh}.max", 0, 1 << 62)
        for i, c in enumerate(v.lst(f.get("constraints", []), f"{here}.constraints", 1024)):
            try:
                dimexpr.parse_constraint(v.string(c, f"{here}.constraints[{i}]", 1024))
            except dimexpr.DimExprError as e:
                raise v.fail(f"{here}.constraints[{i}]", f"bad constraint: {e}") from None
        for key in ("shape_assertions", "custom_calls", "allowed_custom_calls", "disabled_safety_checks",
                    "kept_inputs"):
            v.lst(f.get(key, []), f"{here}.{key}", 1 << 16)
        for i, c in enumerate(f.get("custom_calls", [])):
            v.obj(c, f"{here}.custom_calls[{i}]")
            v.string(c.get("target"), f"{here}.custom_calls[{i}].target")
        v.integer(f.get("nr_devices", 1), f"{here}.nr_devices", 1, 1 << 20)
        v.obj(f.get("signature", {"args": [], "kwargs": {}}), f"{here}.signature")
        names = v.lst(f.get("weights", []), f"{here}.weights", 1 << 20)
        tensors = (m.get("weights") or {}).get("tensors", {}) if isinstance(m.get("weights"), dict) else {}
        for i, n in enumerate(names):
            if not isinstance(n, str) or n not in tensors:
                raise v.fail(f"{here}.weights[{i}]", f"{n!r} is not a tensor of the top-level 'weights'")
        if len(set(names)) != len(names):
            raise v.fail(f"{here}.weights", "names a tensor twice")
    if m.get("weights") is not None:
        _check_weights(v, m["weights"], members)
    return m


def _check_weights(v: _V, w: Any, members: dict[str, Any]) -> None:
    """Tensors must lie inside the weights member, aligned, without overlapping, with sizes that match."""
    from .container import ALIGNMENT

    v.obj(w, "weights")
    member = v.string(v.key(w, "member", "weights"), "weights.member")
    if member != WEIGHTS_MEMBER or member not in members:
        raise v.fail("weights.member", f"must be {WEIGHTS_MEMBER!r} and listed under 'members'")
    size = members[member]["size"]
    spans = []
    for name, t in v.obj(v.key(w, "tensors", "weights"), "weights.tensors").items():
        here = f"weights.tensors[{name!r}]"
        v.string(name, here)
        v.obj(t, here)
        dt = v.string(v.key(t, "dtype", here), f"{here}.dtype", 64)
        if dt not in dtypes.BY_NAME:
            raise v.fail(f"{here}.dtype", f"{dt!r} is not a dtype jaxport supports")
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
