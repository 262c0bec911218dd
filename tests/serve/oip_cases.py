"""The REST cases of the ``oip-requests`` class (``oip_corpus``): the two served models, :class:`Case`, and one
generator per group, each case a request and its expected outcome (``oip_corpus``'s docstring says how each is
judged)."""

from __future__ import annotations

import gzip
import json
import os
import urllib.parse
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

SOURCE = '''import jax.numpy as jnp


def f(x, n, b):
    return 2.0 * x, n + 1, jnp.logical_not(b), jnp.log(x)


def t(b, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64):
    return b, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64
'''
SPEC_M = ('jaxport: 1\ndims:\n  batch: {min: 1, max: 8}\nargs:\n  - "f32[batch, 3]"\n  - "i32[batch]"\n'
          '  - "bool[batch]"\noutputs: [y, k, nb, w]\n')
#: The inputs of ``t``: name, datatype, numpy dtype.
T = [("b", "BOOL", "bool"), ("i8", "INT8", "int8"), ("i16", "INT16", "int16"), ("i32", "INT32", "int32"),
     ("i64", "INT64", "int64"), ("u8", "UINT8", "uint8"), ("u16", "UINT16", "uint16"), ("u32", "UINT32", "uint32"),
     ("u64", "UINT64", "uint64"), ("f16", "FP16", "float16"), ("f32", "FP32", "float32"), ("f64", "FP64", "float64")]
SPEC_T = ('jaxport: 1\nargs: ["bool[2]", "i8[2]", "i16[2]", "i32[2]", "i64[2]", "u8[2]", "u16[2]", "u32[2]", '
          '"u64[2]", "f16[2]", "f32[2]", "f64[2]"]\noutputs: [' + ", ".join("o" + n for n, _, _ in T) + "]\n")
OUTPUTS = {"m": ["y", "k", "nb", "w"], "t": ["o" + n for n, _, _ in T]}
INPUTS = {"m": ["x", "n", "b"], "t": [n for n, _, _ in T]}
DTYPES = {"BOOL": "bool", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "UINT8": "uint8",
          "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64", "FP16": "float16", "FP32": "float32",
          "FP64": "float64"}
X = np.array([[1.0, 2.0, 0.5], [4.0, 0.25, 3.0]], np.float32)
N = np.array([1, -7], np.int32)
B = np.array([True, False])
GOOD_M = {"x": X, "n": N, "b": B}
GOOD_T = {n: np.array([True, False]) if d == "bool" else np.array([0.5, -2.0] if "float" in d else [0, 1], d)
          for n, _, d in T}
RAW = "@@RAW@@"  # a JSON string replaced by raw text (tokens JSON has not: NaN, 1e400, nesting past the limit)


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    transport: str  # rest: (method, path, body, headers); raw: bytes on a socket; grpc: (method, message); grpc-bytes
    request: Any
    expect: str  # refused, missing, answered, closed, or an HTTP status ("405")
    mention: str = ""  # text a refusal must contain: the field
    model: str = "m"
    inputs: Any = None  # answered: the arguments the request means, by name
    asked: tuple[str, ...] | None = None  # answered: the outputs asked for, in order (None: all)
    binary: frozenset[str] = frozenset()  # answered over REST: outputs that must come in binary
    text: frozenset[str] = frozenset()  # ... and those that must come as JSON (unless not finite)
    rid: str | None = None  # answered: the id the answer must carry

    @property
    def id(self) -> str:
        return f"{self.group}/{self.name}"


# --- requests ------------------------------------------------------------------------------------------------------


def tensor(name: str, array: np.ndarray, datatype: str) -> dict[str, Any]:
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.ravel().tolist()}


def good(model: str = "m") -> dict[str, Any]:
    if model == "m":
        return {"inputs": [tensor("x", X, "FP32"), tensor("n", N, "INT32"), tensor("b", B, "BOOL")]}
    return {"inputs": [tensor(n, GOOD_T[n], dt) for n, dt, _ in T]}


def dumps(value: Any, raw: str = "") -> bytes:
    """``value`` as JSON, the string :data:`RAW` in it replaced by ``raw``."""
    return json.dumps(value).replace(json.dumps(RAW), raw).encode()


def _encodings(req: dict[str, Any], model: str) -> tuple[tuple[str, ...] | None, frozenset[str], frozenset[str]]:
    """The outputs a JSON request asks for (None: all), and which must come in binary and which as JSON: the
    protocol's rule (an output's binary_data, else the request's binary_data_output, else JSON)."""
    default = (req.get("parameters") or {}).get("binary_data_output", False)
    outs = req.get("outputs") or [{"name": n} for n in OUTPUTS[model]]
    binary = {o["name"] for o in outs if ((o.get("parameters") or {}).get("binary_data", default)) is True}
    asked = tuple(o["name"] for o in req["outputs"]) if req.get("outputs") else None
    return asked, frozenset(binary), frozenset(o["name"] for o in outs) - binary


def rest(group: str, name: str, req: Any, expect: str, mention: str = "", *, model: str = "m",
         body: bytes | None = None, headers: dict[str, str] | None = None, path: str | None = None,
         inputs: dict[str, Any] | None = None, method: str = "POST") -> Case:
    """A REST case: ``req`` (a JSON value, or ``body``) POSTed to ``path`` (default: ``model``'s infer)."""
    path = path or f"/v2/models/{model}/infer"
    data = body if body is not None else dumps(req)
    extra: dict[str, Any] = {}
    if expect == "answered":
        asked, binary, text = _encodings(req, model)
        rid = req.get("id") if isinstance(req.get("id"), str) else None
        extra = dict(inputs=inputs or (GOOD_M if model == "m" else GOOD_T), asked=asked, binary=binary, text=text,
                     rid=rid)
    return Case(group, name, "rest", (method, path, data, headers or {}), expect, mention, model, **extra)


def _deep(kind: str, depth: int = 500) -> Any:
    v: Any = [] if kind == "list" else {}
    for _ in range(depth):
        v = [v] if kind == "list" else {"a": v}
    return v


#: What goes in a field instead of what belongs there.
WRONG = {"int": 7, "float": 1.5, "string": "s", "list": [1], "dict": {"a": 1}, "null": None, "bool": True,
         "huge-string": "x" * 100_000, "int-2^64": 2 ** 64, "deep-list": _deep("list"), "deep-dict": _deep("dict")}


def _full() -> dict[str, Any]:
    req = {**good(), "id": "r1", "parameters": {"binary_data_output": False},
           "outputs": [{"name": "y", "parameters": {"binary_data": False}}, {"name": "k"}]}
    for t in req["inputs"]:
        t["parameters"] = {}
    return req


def _at(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else ("." if i else "") + p for i, p in enumerate(path))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def _field_outcome(path: tuple[Any, ...], kind: str) -> tuple[str, str]:
    """What a request whose field ``path`` is a ``kind`` (of ``WRONG``) gets: answered, or refused naming what."""
    at, p = _at(path), tuple("#" if isinstance(x, int) else x for x in path)
    if p == ("id",) and kind in ("string", "huge-string", "null"):
        return "answered", ""
    if p in (("parameters",), ("inputs", "#", "parameters"), ("outputs", "#", "parameters")):
        if kind in ("null", "dict"):
            return "answered", ""
        if kind == "deep-dict":
            return "refused", at + ".a"
    if p == ("outputs",) and kind == "null":
        return "answered", ""
    if p[-1] in ("binary_data_output", "binary_data") and kind == "bool":
        return "answered", ""
    if p in (("inputs",), ("outputs",)) and kind in ("list", "deep-list"):
        return "refused", at + "[0]"
    if p == ("inputs", "#", "shape") and kind == "list":  # shape [1]: the data no longer fits it
        return "refused", _at(path[:-1]) + ".data"
    if p == ("inputs", "#", "shape") and kind == "deep-list":
        return "refused", at + "[0]"
    return "refused", at


def field_type_cases() -> Iterator[Case]:
    """Every field of a full request (id, parameters, each input's every field, outputs) replaced by each of
    ``WRONG``."""
    full = _full()
    paths: list[tuple[Any, ...]] = [("id",), ("parameters",), ("parameters", "binary_data_output"), ("inputs",)]
    for k in range(3):
        paths += [("inputs", k), *[("inputs", k, f) for f in ("name", "datatype", "shape", "data", "parameters")]]
    paths += [("outputs",), ("outputs", 0), ("outputs", 0, "name"), ("outputs", 0, "parameters"),
              ("outputs", 0, "parameters", "binary_data")]
    for path in paths:
        for kind, value in WRONG.items():
            expect, mention = _field_outcome(path, kind)
            yield rest("field-type", f"{_at(path)}={kind}", _replaced(full, path, value), expect, mention)


def datatype_cases() -> Iterator[Case]:
    for k, (name, right) in enumerate([("x", "FP32"), ("n", "INT32")]):
        for wrong in (right.lower(), "INT", "FP128", "BF16", "BYTES", "STRING", "", " " + right, right + "\u0000",
                      "\uff29\uff2e\uff34\uff13\uff12", 32):
            req = good()
            req["inputs"][k]["datatype"] = wrong
            yield rest("datatype", f"{name}:{wrong!r}", req, "refused", f"inputs[{k}].datatype")
        req = good()
        del req["inputs"][k]["datatype"]
        yield rest("datatype", f"{name}:absent", req, "refused", f"inputs[{k}].datatype")
    # another datatype served: the values decoded as it (n's -7 is no UINT32, b's true no UINT8), then refused by
    # the artifact's checks, which name the input
    for k, other, mention in ((0, "FP64", "input 'x'"), (0, "FP16", "input 'x'"), (1, "INT64", "input 'n'"),
                              (1, "INT8", "input 'n'"), (1, "UINT32", "inputs[1].data[1]"),
                              (2, "UINT8", "inputs[2].data[0]")):
        req = good()
        req["inputs"][k]["datatype"] = other
        yield rest("datatype", f"{'xnb'[k]}:served-but-not-its-own-{other}", req, "refused", mention)
    yield rest("datatype", "t.i32:BYTES", _t_with("i32", datatype="BYTES", data=["ab", "c"]), "refused",
               "inputs[3].datatype", model="t")


def _m_with(k: int, **fields: Any) -> dict[str, Any]:
    req = good()
    req["inputs"][k] = {**req["inputs"][k], **fields}
    return req


def _rows(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows)
    return {"x": rng.uniform(0.1, 9.0, (rows, 3)).astype(np.float32),
            "n": rng.integers(-1000, 1000, rows).astype(np.int32), "b": rng.integers(0, 2, rows).astype(bool)}


def shape_cases() -> Iterator[Case]:
    bad = {"negative": [2, -3], "both-negative": [-2, -3], "float": [2, 3.0], "fraction": [2.5, 3],
           "string": ["2", 3], "bool": [True, 3], "null": [None, 3], "2^62-squared": [1 << 62, 1 << 62],
           "2^64": [2 ** 64, 1], "zero-times-2^62": [0, 1 << 62], "65-axes": [1] * 65}
    for name, shape in bad.items():
        j = next((j for j, d in enumerate(shape) if type(d) is not int or d < 0), None)
        yield rest("shape", f"x:{name}", _m_with(0, shape=shape), "refused",
                   f"inputs[0].shape[{j}]" if j is not None else "inputs[0].shape")
    for name, shape in {"rank-1": [6], "rank-3": [2, 3, 1], "transposed": [3, 2], "rank-64": [1] * 58 + [2, 3]}.items():
        yield rest("shape", f"x:{name}", _m_with(0, shape=shape), "refused", "input 'x'")
    yield rest("shape", "n:scalar", _m_with(1, shape=[], data=[1]), "refused", "input 'n'")
    yield rest("shape", "x:empty-batch", _m_with(0, shape=[0, 3], data=[]), "refused", "'x'")
    for name, data, mention in (("5-values", X.ravel().tolist()[:5], "inputs[0].data"),
                                ("7-values", X.ravel().tolist() + [1.0], "inputs[0].data"),
                                ("nested-short", [[1.0, 2.0, 3.0], [4.0, 5.0]], "inputs[0].data[1]"),
                                ("nested-deeper", [[1.0, 2.0, 3.0], [4.0, 5.0, [6.0]]], "inputs[0].data[1][2]"),
                                ("nested-ragged-axis0", [[1.0, 2.0, 3.0]], "inputs[0].data")):
        yield rest("shape", f"x:{name}", _m_with(0, data=data), "refused", mention)
    yield rest("shape", "x:nested-as-shape", _m_with(0, data=X.tolist()), "answered")
    # over the largest bucket (2): split into calls of it, run and joined, past the spec's bound of 8 too (README,
    # "Serving and batch inference": splitting is proven safe for this function)
    for rows in (1, 3, 5, 8, 9, 64):
        arrays = _rows(rows)
        req = {"inputs": [tensor("x", arrays["x"], "FP32"), tensor("n", arrays["n"], "INT32"),
                          tensor("b", arrays["b"], "BOOL")]}
        yield rest("shape", f"batch-{rows}", req, "answered", inputs=arrays)
    yield rest("shape", "batches-disagree", _m_with(1, shape=[1], data=[1]), "refused", "'n'")


def _t_with(name: str, **fields: Any) -> dict[str, Any]:
    req = good("t")
    k = INPUTS["t"].index(name)
    req["inputs"][k] = {**req["inputs"][k], **fields}
    return req


def _value_case(name: str, label: str, data: Any, expect: str, mention: str = "", raw: str = "",
                kept: Any = None) -> Case:
    k = INPUTS["t"].index(name)
    dt = dict((n, d) for n, _, d in T)[name]
    req = _t_with(name, data=data)
    inputs = {**GOOD_T, name: np.array(kept, dt)} if expect == "answered" else None
    return rest("values", f"{dict((n, d) for n, d, _ in T)[name]}:{label}", req, expect,
                mention.replace("@", f"inputs[{k}].data"), model="t", body=dumps(req, raw), inputs=inputs)


def value_cases() -> Iterator[Case]:
    for name, _, dt in T:
        if dt == "bool":
            yield _value_case(name, "true-false", [True, False], "answered", kept=[True, False])
            for label, data, at in (("1-0", [1, 0], 0), ("0.0", [False, 0.0], 1), ("string", ["true", False], 0),
                                    ("null", [None, True], 0), ("nested", [True, [False]], 1)):
                yield _value_case(name, label, data, "refused", f"@[{at}]")
            yield _value_case(name, "NaN-token", [RAW, True], "refused", "not JSON", raw="NaN")
            continue
        if "int" in dt:
            info = np.iinfo(dt)
            lo, hi = int(info.min), int(info.max)
            yield _value_case(name, "at-limits", [lo, hi], "answered", kept=[lo, hi])
            yield _value_case(name, "whole-floats", [2.0, -0.0], "answered", kept=[2, 0])
            yield _value_case(name, "exponent", [RAW, 0], "answered", raw="1e2", kept=[100, 0])
            for label, data, at in (("min-1", [lo - 1, 0], 0), ("max+1", [0, hi + 1], 1), ("1.5", [1.5, 0], 0),
                                    ("true", [True, 0], 0), ("string", ["1", 0], 0), ("null", [None, 0], 0),
                                    ("1e300", [1e300, 0], 0), ("-0.5", [0, -0.5], 1), ("list", [[1], 0], 0)):
                yield _value_case(name, label, data, "refused", f"@[{at}]")
            yield _value_case(name, "2^53+1-as-float", [0, RAW], "refused", "@[1]", raw="9007199254740993.0")
            for token in ("NaN", "Infinity", "-Infinity"):
                yield _value_case(name, f"{token}-token", [RAW, 0], "refused", "not JSON", raw=token)
            continue
        top = float(np.finfo(dt).max)
        yield _value_case(name, "at-limits", [top, -top], "answered", kept=[top, -top])
        yield _value_case(name, "underflow", [1e-50, -1e-50], "answered", kept=[1e-50, -1e-50])
        yield _value_case(name, "rounded", [0.1, 1 / 3], "answered", kept=[0.1, 1 / 3])
        yield _value_case(name, "integers", [7, -1024], "answered", kept=[7.0, -1024.0])
        below, past = {"float16": (65519.0, 65520.0), "float32": (3.40282356e38, 3.4028236e38),
                       "float64": (None, None)}[dt]
        if below is not None:
            yield _value_case(name, "just-below-rounding-to-infinity", [below, 0], "answered", kept=[top, 0])
            yield _value_case(name, "rounds-to-infinity", [0, past], "refused", "@[1]")
            yield _value_case(name, "1e39", [-1e39, 0], "refused", "@[0]")
        for label, data, at in (("true", [True, 0], 0), ("string", ["1.5", 0], 0), ("null", [0, None], 1),
                                ("object", [{}, 0], 0)):
            yield _value_case(name, label, data, "refused", f"@[{at}]")
        for token in ("NaN", "Infinity", "-Infinity", "1e400", "-" + "9" * 400):
            yield _value_case(name, f"{token[:8]}-token", [RAW, 0], "refused", "not JSON", raw=token)
        # JSON has no number for them: a float takes NaN and the infinities as these strings, and no other
        yield _value_case(name, "nan-strings", ["NaN", "-Infinity"], "answered", kept=[np.nan, -np.inf])
        yield _value_case(name, "infinity-string", ["Infinity", 0.5], "answered", kept=[np.inf, 0.5])
        yield _value_case(name, "nan-lowercase", [0, "nan"], "refused", "@[1]")
        big = 2 ** 70
        if dt == "float16":
            yield _value_case(name, "2^70", [big, 0], "refused", "@[0]")
        else:
            yield _value_case(name, "2^70", [big, 0], "answered", kept=[float(big), 0])


def _binary(names: tuple[str, ...], *, sizes: dict[str, Any] | None = None, payload: dict[str, bytes] | None = None,
            extra: bytes = b"", length: Any = None, req: dict[str, Any] | None = None, model: str = "m",
            arrays: dict[str, np.ndarray] | None = None) -> tuple[dict[str, Any], bytes, dict[str, str]]:
    """A request with the inputs ``names`` in binary after the JSON (the binary extension): their bytes
    (``payload``, default the arrays'), their binary_data_size (``sizes``, default the bytes'), then ``extra``;
    ``length``: the Inference-Header-Content-Length (default the JSON's)."""
    arrays = arrays or (GOOD_M if model == "m" else GOOD_T)
    req = req or {"inputs": [tensor(n, arrays[n], dt) for n, dt in
                             (zip(INPUTS["m"], ("FP32", "INT32", "BOOL")) if model == "m" else
                              ((n, dt) for n, dt, _ in T))]}
    raw = []
    for t in req["inputs"]:
        if t["name"] in names:
            data = (payload or {}).get(t["name"], arrays[t["name"]].tobytes())
            del t["data"]
            t["parameters"] = {"binary_data_size": (sizes or {}).get(t["name"], len(data))}
            raw.append(data)
    header = dumps(req)
    return req, header + b"".join(raw) + extra, {"Inference-Header-Content-Length":
                                                 str(len(header)) if length is None else length}


def binary_cases() -> Iterator[Case]:
    def case(name: str, expect: str, mention: str = "", inputs: dict[str, Any] | None = None, **kw: Any) -> Case:
        req, body, headers = _binary(**kw)
        return rest("binary", name, req, expect, mention, model=kw.get("model", "m"), body=body, headers=headers,
                    inputs=inputs)

    yield case("n-binary", "answered", names=("n",))
    yield case("all-binary", "answered", names=("x", "n", "b"))
    odd = {**GOOD_M, "x": np.array([[np.nan, np.inf, -np.inf], [0.0, -1.0, 2.0]], np.float32)}
    yield case("x-nan-inf-binary-outputs-asked-as-json", "answered", names=("x",), arrays=odd, inputs=odd)
    t_odd = {**GOOD_T, "f16": np.array([np.nan, -np.inf], np.float16), "f64": np.array([np.inf, -0.0]),
             "u64": np.array([2 ** 64 - 1, 2 ** 63], np.uint64), "i64": np.array([-2 ** 63, 2 ** 63 - 1], np.int64)}
    yield case("t-all-binary-limits-and-nan", "answered", names=tuple(INPUTS["t"]), model="t", arrays=t_odd,
               inputs=t_odd)
    yield case("bool-byte-2", "refused", "inputs[2].parameters.binary_data_size: byte 1 is 2", names=("b",),
               payload={"b": b"\x01\x02"})
    ihcl = "Inference-Header-Content-Length"
    _, body, _ = _binary(("n",))
    for label, length in (("past-the-body", str(len(body) + 1)), ("negative", "-1"), ("letters", "abc"),
                          ("plus", "+10"), ("inner-space", "1 0"), ("exponent", "1e2"), ("hex", "0x10"),
                          ("superscript-two", "\u00b2"), ("30-digits", "9" * 30), ("empty", ""),
                          ("2^64", str(2 ** 64))):
        yield case(f"header-length-{label}", "refused", ihcl, names=("n",), length=length)
    for label, delta in (("zero", None), ("short", -5), ("long", 4)):
        _, body, headers = _binary(("n",))
        length = "0" if delta is None else str(int(headers[ihcl]) + delta)
        yield case(f"header-length-{label}", "refused", "not JSON", names=("n",), length=length)
    req, body, _ = _binary(("n",))
    yield rest("binary", "no-header-length", req, "refused", "not JSON", body=body)
    bds = "inputs[1].parameters.binary_data_size"
    for label, size in (("negative", -8), ("too-big", 16), ("too-small", 4), ("2^64", 2 ** 64), ("zero", 0),
                        ("float", 8.0), ("string", "8"), ("true", True), ("null", None), ("list", [8])):
        yield case(f"binary_data_size-{label}", "refused", bds, names=("n",), sizes={"n": size})
    yield case("sizes-swapped", "refused", "inputs[0].parameters.binary_data_size", names=("x", "n"),
               sizes={"x": 8, "n": 24})
    yield case("trailing-bytes", "refused", "binary_data_size", names=("n",), extra=b"\0\0\0")
    on_json = good()
    on_json["inputs"][1]["parameters"] = {"binary_data_size": 8}
    yield rest("binary", "binary_data_size-on-a-json-input", on_json, "refused", "inputs[1]",
               body=dumps(on_json) + N.tobytes(), headers={ihcl: str(len(dumps(on_json)))})
    neither = good()
    del neither["inputs"][1]["data"]
    yield rest("binary", "neither-data-nor-size", neither, "refused", "inputs[1]")
    asked = {"inputs": [tensor("x", X, "FP32"), tensor("n", N, "INT32"), tensor("b", B, "BOOL")],
             "parameters": {"binary_data_output": True}}
    req, body, headers = _binary(("x", "b"), req=asked)
    yield rest("binary", "binary-in-binary-out", req, "answered", body=body, headers=headers)


def parameter_cases() -> Iterator[Case]:
    bad = {"bdo-string": ("binary_data_output", "true"), "bdo-int": ("binary_data_output", 1),
           "bdo-null": ("binary_data_output", None), "bdo-list": ("binary_data_output", [True]),
           "list": ("p", [1]), "dict": ("p", {"q": 1}), "null": ("p", None), "nested-list": ("p", [[[]]]),
           "shared-memory-region": ("shared_memory_region", "r"), "shared-memory-size": ("shared_memory_byte_size", 8),
           "shared-memory-offset": ("shared_memory_offset", 0), "classification": ("classification", 1),
           "bds-negative": ("binary_data_size", -1), "bds-float": ("binary_data_size", 1.5),
           "bds-string": ("binary_data_size", "1"), "long-key": ("k" * 10_000, [1]),
           "unicode-key": ("\u043a\u043b\u044e\u0447", [1])}
    fine = {"int": ("priority", 1), "negative": ("timeout", -5), "string": ("note", "s"), "float": ("f", 1.5),
            "bool": ("flag", True), "unicode": ("\u043a\u043b\u044e\u0447", "\u0437\u043d\u0430\u0447"),
            "2^64": ("big", 2 ** 64), "bdo-false": ("binary_data_output", False)}
    for where, at in (("request", "parameters"), ("input", "inputs[1].parameters")):
        for label, (key, value) in {**bad, **fine}.items():
            req = good()
            (req if where == "request" else req["inputs"][1])["parameters"] = {key: value}
            expect = "refused" if label in bad else "answered"
            yield rest("parameters", f"{where}:{label}", req, expect, f"{at}.{key[:64]}" if expect == "refused" else "")
    req = {**good(), "parameters": {"binary_data_output": True}}
    yield rest("parameters", "request:bdo-true", req, "answered")


def output_cases() -> Iterator[Case]:
    for label, name in (("unknown", "q"), ("empty", ""), ("case", "Y"), ("space", "y "), ("nul", "y\u0000"),
                        ("long", "y" * 10_000), ("unicode", "\u00fd"), ("int", 5), ("null", None), ("list", ["y"])):
        yield rest("outputs", f"name-{label}", {**good(), "outputs": [{"name": name}]}, "refused", "outputs[0].name")
    for label, outs, at in (("duplicate", ["y", "y"], 1), ("duplicate-later", ["y", "k", "y"], 2)):
        yield rest("outputs", label, {**good(), "outputs": [{"name": o} for o in outs]}, "refused",
                   f"outputs[{at}].name")
    for label, entry, at in (("string", "y", "outputs[0]"), ("null", None, "outputs[0]"),
                             ("no-name", {}, "outputs[0].name")):
        yield rest("outputs", f"entry-{label}", {**good(), "outputs": [entry]}, "refused", at)
    for label, value in (("string", "true"), ("int", 1), ("zero", 0), ("null", None), ("list", [True]),
                         ("dict", {"a": 1}), ("float", 1.5)):
        yield rest("outputs", f"binary_data-{label}", {**good(), "outputs": [{"name": "y", "parameters":
                   {"binary_data": value}}]}, "refused", "outputs[0].parameters.binary_data")
    for label, params in (("classification", {"classification": 2}), ("shared-memory", {"shared_memory_region": "r"}),
                          ("list", [1])):
        yield rest("outputs", f"parameters-{label}", {**good(), "outputs": [{"name": "y", "parameters": params}]},
                   "refused", "outputs[0].parameters")
    mixed = [{"name": "w", "parameters": {"binary_data": False}}, {"name": "nb", "parameters": {"binary_data": True}},
             {"name": "k"}, {"name": "y", "parameters": {"binary_data": True}}]
    yield rest("outputs", "reversed-mixed-binary", {**good(), "outputs": mixed}, "answered")
    yield rest("outputs", "mixed-binary-default-binary",
               {**good(), "outputs": mixed, "parameters": {"binary_data_output": True}}, "answered")
    yield rest("outputs", "binary_data_size-on-an-output",
               {**good(), "outputs": [{"name": "y", "parameters": {"binary_data_size": 4}}]}, "answered")
    yield rest("outputs", "empty-list-means-all", {**good(), "outputs": []}, "answered")
    nan = {**GOOD_M, "x": np.array([[0.0, -1.0, 1.0], [2.0, 0.5, -3.0]], np.float32)}
    req = {"inputs": [tensor("x", nan["x"], "FP32"), tensor("n", N, "INT32"), tensor("b", B, "BOOL")],
           "outputs": [{"name": "w", "parameters": {"binary_data": False}}, {"name": "y"}]}
    yield rest("outputs", "nan-and-infinity-asked-as-json", req, "answered", inputs=nan)
    t_req = {**good("t"), "outputs": [{"name": "of16", "parameters": {"binary_data": True}}, {"name": "ou64"},
                                      {"name": "ob", "parameters": {"binary_data": True}}]}
    yield rest("outputs", "t-some-outputs", t_req, "answered", model="t")


def name_cases() -> Iterator[Case]:
    def at(path: str, expect: str, mention: str = "", method: str = "POST", label: str = "") -> Case:
        return rest("names", label or f"{method}:{path[:40]}", good(), expect, mention, path=path, method=method)

    q = urllib.parse.quote
    for label, name, mention in (("unknown", "zz", "zz"), ("long", "z" * 10_000, "z" * 64 + "..."),
                                 ("unicode", "\u6a21\u578b", "\u6a21\u578b"), ("upper", "M", "M"),
                                 ("nul", "m\u0000", ""), ("space", "m ", ""), ("semicolon", "m;v=1", "m;v=1"),
                                 ("dot-dot", "..", ""), ("dot", ".", "")):
        yield at(f"/v2/models/{q(name, safe='.;')}/infer", "missing", mention, label=f"model-{label}")
    for label, path in (("slash", "/v2/models/m/x/infer"), ("encoded-dots", "/v2/models/%2e%2e/infer"),
                        ("encoded-slash", "/v2/models/m%2F..%2Fm/infer"), ("double-slash", "/v2/models//infer"),
                        ("empty-version", "/v2/models/m/versions//infer")):
        yield at(path, "missing", label=f"path-{label}")
    for version in ("2", "0", "-1", "01", "1.0", "9" * 10_000, "%00"):
        yield at(f"/v2/models/m/versions/{version}/infer", "missing", "version", label=f"version-{version[:8]}")
    yield at("/v2/models/m/versions/1/infer", "answered", label="version-1")
    yield at("/v2/models/m/versions/%31/infer", "answered", label="version-percent-encoded-1")
    yield at("/v2/models/m/infer?model=zz&x=1", "answered", label="query-ignored")
    for path in ("/v2/models/zz", "/v2/models/zz/ready", "/v2/models/m/versions/2", "/v2/models/m/versions/2/ready",
                 "/v2/models/" + "z" * 10_000):
        yield at(path, "missing", method="GET", label=f"GET:{path[:30]}")
    yield at("/v2/models/m/infer", "405", method="GET")
    yield at("/v2/models/m/infer", "405", method="PUT")


def input_cases() -> Iterator[Case]:
    g = good()["inputs"]
    yield rest("inputs", "duplicate", {"inputs": [*g, g[0]]}, "refused", "inputs[3].name")
    yield rest("inputs", "missing-b", {"inputs": g[:2]}, "refused", "'b'")
    yield rest("inputs", "only-x", {"inputs": g[:1]}, "refused", "'n'")
    yield rest("inputs", "empty", {"inputs": []}, "refused", "'x'")
    yield rest("inputs", "extra", {"inputs": [*g, tensor("z", N, "INT32")]}, "refused", "inputs[3].name")
    yield rest("inputs", "absent", {"id": "r"}, "refused", "inputs")
    yield rest("inputs", "shuffled", {"inputs": [g[2], g[0], g[1]]}, "answered")
    yield rest("inputs", "t-reversed", {"inputs": good("t")["inputs"][::-1]}, "answered", model="t")
    yield rest("inputs", "1000-unknown", {"inputs": [*g, *[tensor(f"z{i}", N, "INT32") for i in range(1000)]]},
               "refused", "inputs[3].name")


def id_cases() -> Iterator[Case]:
    for label, rid in (("int", 5), ("float", 1.5), ("true", True), ("list", []), ("dict", {}), ("2^64", 2 ** 64),
                       ("deep", _deep("list", 300))):
        yield rest("id", label, {**good(), "id": rid}, "refused", "id")
    for label, rid in (("null", None), ("empty", ""), ("100k", "r" * 100_000), ("unicode", "\u0438\u0434-\U0001f600"),
                       ("nul", "a\u0000b"), ("newline", "\n"), ("json-text", '{"inputs": []}')):
        yield rest("id", label, {**good(), "id": rid}, "answered")


def encoding_cases() -> Iterator[Case]:
    body = dumps(good())
    ce = "Content-Encoding"
    for label, data, value in (("gzip", gzip.compress(body), "gzip"), ("deflate", zlib.compress(body), "deflate"),
                               ("gzip-garbage", b"\x1f\x8b\x08\x00" + os.urandom(64), "gzip"),
                               ("gzip-truncated", gzip.compress(body)[:20], "gzip"), ("br", body, "br"),
                               ("upper", gzip.compress(body), "GZIP"), ("list", body, "gzip, identity"),
                               ("long", body, "x" * 5000),
                               ("bomb-64MiB", gzip.compress(b"\0" * (64 << 20), compresslevel=1), "gzip")):
        yield rest("encoding", label, good(), "refused", ce, body=data, headers={ce: value})
    yield rest("encoding", "identity", good(), "answered", headers={ce: "identity"})
    yield rest("encoding", "identity-spaced", good(), "answered", headers={ce: " Identity "})
    yield rest("encoding", "gzip-unlabelled", good(), "refused", "not JSON", body=gzip.compress(body))
    yield rest("encoding", "deflate-labelled-identity", good(), "refused", "not JSON", body=zlib.compress(body),
               headers={ce: "identity"})
    yield rest("encoding", "chunked", good(), "answered", headers={"Transfer-Encoding": "chunked"})
    yield rest("encoding", "utf-8-bom", good(), "refused", "not JSON", body=b"\xef\xbb\xbf" + body)
    yield rest("encoding", "utf-16", good(), "refused", "not JSON", body=json.dumps(good()).encode("utf-16"))
    yield rest("encoding", "nesting-past-the-limit", good(), "refused", "not JSON",
               body=dumps({**good(), "id": RAW}, "[" * 2000 + "]" * 2000))


def raw_cases() -> Iterator[Case]:
    """Requests whose framing lies (raw bytes, the connection half-closed after them): bounded by ``TIMEOUT_S``."""
    body = dumps(good())

    def raw(label: str, head: str, data: bytes, expect: str = "closed", mention: str = "") -> Case:
        start = f"POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode()
        return Case("framing", label, "raw", start + data, expect, mention,
                    **(dict(inputs=GOOD_M, rid=None) if expect == "answered" else {}))

    # the first 10 bytes short of the JSON, the rest read as the next request: refused, or the connection closed
    yield raw("content-length-short", f"Content-Length: {len(body) - 10}\r\n", body)
    yield raw("content-length-long", f"Content-Length: {len(body) + 100}\r\n", body)
    yield raw("content-length-10^20", "Content-Length: " + "1" + "0" * 20 + "\r\n", body)
    yield raw("content-length-negative", "Content-Length: -1\r\n", body)
    yield raw("content-length-letters", "Content-Length: abc\r\n", body)
    yield raw("content-length-twice", f"Content-Length: {len(body)}\r\nContent-Length: 5\r\n", body)
    yield raw("content-length-and-chunked", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
              f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    yield raw("chunk-size-long", "Transfer-Encoding: chunked\r\n", b"100\r\n" + body[:10])
    yield raw("chunk-size-letters", "Transfer-Encoding: chunked\r\n", b"zz\r\n" + body)
    yield raw("chunk-size-huge", "Transfer-Encoding: chunked\r\n", b"f" * 40 + b"\r\n" + body)
    yield raw("no-length", "", b"", "refused", "not JSON")
    yield raw("header-100KiB", "X-Big: " + "a" * (100 << 10) + "\r\n" + f"Content-Length: {len(body)}\r\n", body,
              "answered")  # long, not malformed
    yield Case("framing", "request-line-garbage", "raw", b"FOO\x00 /v2 HTTP/9.9\r\n\r\n", "closed")
