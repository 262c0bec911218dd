"""An artifact's signature in the Open Inference Protocol (v2, KServe's and Triton's): datatypes, tensor and model
metadata; requests decoded and responses encoded. No server here, and no kserve: ``rest`` and ``grpc_service`` use
it.

Requests come from anyone who can reach the port: every field is type-checked here, and every value decoded exactly
(:func:`values`: ``call --cast``'s rule, a value passes only where it is kept), each failure an ``InputError`` naming
the field (``inputs[1].data[3]``), with the names it echoes shortened (:func:`shorten`). A response never changes a
value (:func:`response`: NaN and the infinities as the JSON strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``,
never JSON's ``null``, and a float input takes them so too). specs/CLI.md, "Requests and responses".

Metadata follows the protocol: each tensor's ``name``, ``datatype`` (``FP32``, ``INT64``, ...) and ``shape`` with
``-1`` for every axis sized by a dimension variable; what the protocol has no field for goes in ``parameters``:
each tensor's declared shape (``["batch", 784]``) and an input's declared ``range``, and for the model the function,
its dimension variables' bounds, the spec's constraints, the compiled buckets and the padding verdicts. Datatypes
the protocol lacks (bfloat16, float8, int4, complex, PRNG keys) cannot be served: :func:`datatype` says so.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ... import dtypes
from ...artifact import contract
from ...artifact.model import Function, Input, Output
from ...errors import InputError, UsageError

#: Why the repository extension's load and unload are refused, over REST and gRPC: kserve's let any client unload a
#: model for good (its readiness false, a load failing), while the server went on answering.
REPOSITORY = ("jaxport serve does not load or unload models through the protocol's repository extension: the "
              "artifacts served are those of its command line, each ready until the server stops.")

#: The protocol's datatype for each dtype it can carry (jaxport's canonical dtype names).
DATATYPES = {d.name: d.oip for d in dtypes.TABLE if d.oip is not None}
DTYPES = {v: k for k, v in DATATYPES.items()}


def datatype(dtype: str, what: str) -> str:
    """The protocol's datatype of ``dtype``; UsageError naming ``what`` when it has none."""
    if dtype not in DATATYPES:
        raise UsageError(f"{what} is {dtype}, which the Open Inference Protocol has no datatype for (it carries "
                         f"{', '.join(DATATYPES)}); it cannot be served. Export a function whose inputs and outputs "
                         f"use those dtypes.")
    return DATATYPES[dtype]


class Tensor(NamedTuple):
    """One input's or output's metadata: name, datatype, shape (-1 for symbolic axes), declared shape, and an
    input's declared range ([LO, HI), a bound may be a dimension expression; None without one)."""

    name: str
    datatype: str
    shape: list[int]
    declared: list[int | str]
    range: list[Any] | None = None

    @classmethod
    def of(cls, entry: Input | Output, kind: str) -> Tensor:
        """The metadata of ``entry``, an input or output (``kind``); UsageError for a dtype the protocol lacks."""
        declared = None if getattr(entry, "range_example", False) else getattr(entry, "range", None)  # a like: one
        return cls(entry.name, datatype(entry.dtype, f"{kind} {entry.name!r}"),
                   [d if isinstance(d, int) else -1 for d in entry.shape], list(entry.shape),
                   list(declared) if declared is not None else None)

    def types(self) -> dict[str, Any]:
        """The protocol's fields: name, datatype and shape (gRPC metadata has these only)."""
        return {"name": self.name, "datatype": self.datatype, "shape": self.shape}

    def to_json(self) -> dict[str, Any]:
        """The protocol's fields, and in ``parameters`` the declared shape and an input's declared range."""
        extra = {"range": self.range} if self.range is not None else {}
        return {**self.types(), "parameters": {"shape": self.declared, **extra}}


def tensor(entry: Input | Output, kind: str) -> dict[str, Any]:
    """One input's or output's metadata (:class:`Tensor`) as JSON."""
    return Tensor.of(entry, kind).to_json()


def model(f: Function, name: str, versions: Sequence[str], function: str,
          plan: Mapping[str, Any]) -> dict[str, Any]:
    """A model's metadata (``GET /v2/models/NAME``): the protocol's fields, and the rest in ``parameters``, with the
    buckets compiled now (a request that fits one compiles nothing), the planned sizes, batch variable, most rows
    and padding verdicts of the serving ``plan`` (``Batched.describe()``)."""
    dims = {v: f.bounds_of(v).to_manifest() for v in contract.dimension_variables(f)}
    return {"name": name, "versions": list(versions), "platform": "jaxport",
            "inputs": [tensor(i, "input") for i in f.inputs],
            "outputs": [tensor(o, "output") for o in f.outputs],
            "parameters": {"function": function, "dims": dims, "constraints": list(f.constraints),
                           **{k: plan[k] for k in ("buckets", "sizes", "planned", "strict", "batch", "max_rows",
                                                     "padding")}}}


# --- requests: every field checked, every value decoded exactly ------------------------------------------------

#: How many characters of a name a message echoes (a model or input name of any length would come back in the
#: error, which gRPC carries in its metadata, 8 KiB at most).
ECHO_CHARS = 64
#: The most axes a tensor may have (numpy's limit).
MAX_AXES = 64


def shorten(text: object) -> str:
    """``text`` as a message echoes it: its first :data:`ECHO_CHARS` characters, and ``...`` where it is longer."""
    s = str(text)
    return s if len(s) <= ECHO_CHARS else s[:ECHO_CHARS] + "..."


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def shown(value: Any) -> str:
    """A JSON value as a message shows it (shortened): ``true``, ``null``, ``'x'``, ``1.5``, ``a list of 3 items``."""
    if value is None or type(value) is bool:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, str):
        return repr(shorten(value))
    if isinstance(value, list):
        return f"a list of {_count(len(value), 'item')}"
    if isinstance(value, dict):
        return "an object"
    return shorten(repr(value))


def _takes(datatype: str) -> str:
    """The values a datatype takes, as messages say it."""
    import numpy as np

    dt = dtypes.BY_NAME[DTYPES[datatype]]
    if dt.kind == "bool":
        return "true or false"
    if dt.kind in ("int", "uint"):
        info = np.iinfo(np.dtype(dt.name))
        return f"integers from {info.min} to {info.max}"
    return f"numbers from {-float(np.finfo(np.dtype(dt.name)).max):g} to {float(np.finfo(np.dtype(dt.name)).max):g}"


def _refused(at: str, value: Any, datatype: str) -> InputError:
    return InputError(f"{at} is {shown(value)}, which {datatype} cannot hold: {datatype} takes {_takes(datatype)}.")


#: A whole float an integer datatype takes as its integer is below this: from 2**53 on a float is not every integer
#: (a JSON integer a parser could not hold as one, -2**63 - 1, arrives as the float -2**63), so it may not be the one
#: sent.
EXACT_FLOAT_INTEGERS = 2 ** 53


def values(items: Sequence[Any], datatype: str, at: Callable[[int], str]) -> Any:
    """A tensor's values (JSON's, or gRPC's typed contents) as a flat array of ``datatype``, none of them changed:
    BOOL takes true and false only; an integer datatype takes integers (and whole numbers) within its range, never
    a boolean; a float datatype takes numbers (never booleans), each rounded to the nearest value of the type, and
    refuses a finite number that would become infinite. ``call --cast`` keeps values by the same rule (a value passes
    only when it is kept), judged here on the JSON values themselves: a float64 array could not hold every 64-bit
    integer, and a whole float from 2**53 on (:data:`EXACT_FLOAT_INTEGERS`) is refused. An ``InputError`` names the
    first value refused (``at(k)``: its field)."""
    import numpy as np

    dt = dtypes.BY_NAME[DTYPES[datatype]]
    target = np.dtype(dt.name)
    kinds = set(map(type, items))
    allowed = (bool,) if dt.kind == "bool" else (int, float, str) if dt.kind == "float" else (int, float)
    if not kinds <= set(allowed) or str in kinds and any(type(v) is str and v not in NONFINITE for v in items):
        k = next(k for k, v in enumerate(items) if type(v) not in allowed or type(v) is str and v not in NONFINITE)
        raise _refused(at(k), items[k], datatype)
    if str in kinds:  # NaN and the infinities, which JSON has no number for
        items = [NONFINITE[v] if type(v) is str else v for v in items]
        kinds = set(map(type, items))
    if dt.kind == "bool":
        return np.array(items, dtype=target).reshape(-1)
    if dt.kind == "float":
        try:
            wide = np.array(items, dtype=np.float64).reshape(-1)
        except OverflowError:  # an integer past float64's range
            k = next(k for k, v in enumerate(items) if type(v) is int and abs(v) > sys.float_info.max)
            raise _refused(at(k), items[k], datatype) from None
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = wide.astype(target)
        overflowed = np.isinf(narrow) & np.isfinite(wide)
        if overflowed.any():
            k = int(np.argmax(overflowed))
            raise _refused(at(k), items[k], datatype)
        return narrow
    info = np.iinfo(target)
    whole = items
    if float in kinds:  # a whole number is its integer; any other float is refused below
        whole = [int(v) if type(v) is float and v.is_integer() and abs(v) < EXACT_FLOAT_INTEGERS else v
                 for v in items]
    elif not items or (info.min <= min(items) and max(items) <= info.max):
        return np.array(items, dtype=target)
    for k, v in enumerate(whole):
        if type(v) is float and v.is_integer() and info.min <= v <= info.max:
            raise InputError(f"{at(k)} is {shown(v)}, a whole number of 2**53 or more held as a float (an integer "
                             f"past 64 bits, or one written with a fraction or an exponent), which may not be the "
                             f"integer sent: {datatype} takes {_takes(datatype)}, written as integers.")
        if type(v) is not int or not info.min <= v <= info.max:
            raise _refused(at(k), items[k], datatype)
    return np.array(whole, dtype=target)


def _where(at: str, index: Sequence[int]) -> str:
    return at + "".join(f"[{i}]" for i in index)


def _size(shape: Sequence[int]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def check_shape(shape: Any, at: str, datatype: str) -> list[int]:
    """A request's ``shape`` (field ``at``): a list of at most :data:`MAX_AXES` non-negative integers, of an array
    that can exist; an ``InputError`` naming the field otherwise."""
    if not isinstance(shape, list):
        raise InputError(f"{at} is {shown(shape)}; give a list of sizes (non-negative integers).")
    if len(shape) > MAX_AXES:
        raise InputError(f"{at} has {len(shape)} axes; a tensor has at most {MAX_AXES}.")
    for j, d in enumerate(shape):
        if type(d) is not int or d < 0:
            raise InputError(f"{at}[{j}] is {shown(d)}; a size is a non-negative integer.")
    nonzero = _size([d for d in shape if d])
    if nonzero * dtypes.BY_NAME[DTYPES[datatype]].itemsize >= 1 << 63:
        raise InputError(f"{at} is {shorten(shape)}: larger than any array can be.")
    return list(shape)


def _leaves(data: Any, shape: list[int], at: str) -> tuple[list[Any], Callable[[int], str]]:
    """The values of a JSON ``data`` field (``at``) for ``shape``, flat (``[1, 2, 3, 4]``) or nested as the shape
    (``[[1, 2], [3, 4]]``), in row-major order, and the field of each; an ``InputError`` naming the list that does
    not fit."""
    import numpy as np

    if not isinstance(data, list):
        raise InputError(f"{at} is {shown(data)}; give a list of the tensor's values (flat, or nested as the shape).")
    if not data or not isinstance(data[0], list):
        if len(data) != _size(shape):
            raise InputError(f"{at} has {_count(len(data), 'value')}, but shape {shorten(shape)} takes "
                             f"{_size(shape)}.")
        return data, lambda k: f"{at}[{k}]"
    level = [data]
    for axis, size in enumerate(shape):
        below: list[Any] = []
        for j, item in enumerate(level):
            if not isinstance(item, list) or len(item) != size:
                where = _where(at, [int(i) for i in np.unravel_index(j, shape[:axis])] if axis else [])
                raise InputError(f"{where} is {shown(item)}, where shape {shorten(shape)} takes a list of {size} "
                                 f"(axis {axis}); give the data flat, or nested as the shape.")
            below.extend(item)
        level = below
    return level, lambda k: _where(at, [int(i) for i in np.unravel_index(k, shape)])


def decode(at: str, datatype: Any, shape: Any, *, raw: bytes | None = None, data: Any = None,
           data_at: str | None = None) -> Any:
    """A request's tensor (fields ``at``: ``inputs[0]``) as a numpy array, from its raw bytes (binary REST, gRPC)
    or its values (JSON ``data``, gRPC's typed contents: :func:`values`, at ``data_at``); an ``InputError`` naming
    the field when the datatype is not served, the shape is not one, or the data does not fill it exactly."""
    import numpy as np

    if not isinstance(datatype, str) or datatype not in DTYPES:
        raise InputError(f"{at}.datatype is {shown(datatype)}; jaxport serves {', '.join(DTYPES)}.")
    dims = check_shape(shape, f"{at}.shape", datatype)
    dtype = np.dtype(DTYPES[datatype])
    if raw is not None:
        size = _size(dims) * dtype.itemsize
        if len(raw) != size:
            raise InputError(f"{data_at or at}: {_count(len(raw), 'byte')} of data for shape {shorten(dims)} of "
                             f"{datatype}, which takes {size}.")
        array = np.frombuffer(raw, dtype=dtype)
        if dtype.kind == "b" and array.size:
            wrong = np.frombuffer(raw, dtype=np.uint8) > 1
            if wrong.any():
                k = int(np.argmax(wrong))
                raise InputError(f"{data_at or at}: byte {k} is {raw[k]}; a BOOL is one byte, 0 or 1.")
        return array.reshape(tuple(dims))
    leaves, field = _leaves(data, dims, data_at or f"{at}.data")
    return values(leaves, datatype, field).reshape(tuple(dims))


def _object(value: Any, at: str, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise InputError(f"{at} is {shown(value)}; give {what}.")
    return value


#: The parameters the protocol's binary extension defines, by where they go: each one's type and what it takes.
_KNOWN = {"binary_data_output": (bool, "true or false"), "binary_data": (bool, "true or false"),
          "binary_data_size": (int, "a non-negative integer")}


def parameters(value: Any, at: str) -> dict[str, Any]:
    """A ``parameters`` object (field ``at``): each value a boolean, a number or a string, the binary extension's
    of their types; the shared-memory and classification extensions, which jaxport does not serve, refused."""
    if value is None:
        return {}
    given = _object(value, at, 'an object of parameters ({"NAME": value, ...})')
    for key, v in given.items():
        where = f"{at}.{shorten(key)}"
        if type(v) not in (bool, int, float, str):
            raise InputError(f"{where} is {shown(v)}; a parameter is a boolean, a number or a string.")
        negative = type(v) is int and v < 0
        if key in _KNOWN:
            kind, takes = _KNOWN[key]
            if type(v) is not kind or negative:
                raise InputError(f"{where} is {shown(v)}; it takes {takes}.")
        if key.startswith("shared_memory"):
            raise InputError(f"{where}: jaxport does not serve the shared-memory extension; send the tensors in the "
                             f"request (\"data\", or binary data after the JSON).")
        if key == "classification":
            raise InputError(f"{where}: jaxport does not serve the classification extension; ask for the output "
                             f"itself.")
    return given


def check_name(value: Any, at: str, seen: dict[str, str], names: Sequence[str], kind: str) -> str:
    """A tensor's ``name`` (field ``at``): a string, one of ``names`` (the model's inputs or outputs, ``kind``), not
    given before (``seen``: the field of each name given)."""
    if not isinstance(value, str):
        raise InputError(f"{at} is {shown(value)}; give the {kind}'s name, a string.")
    if value in seen:
        raise InputError(f"{at}: {kind} {shown(value)} is given twice ({seen[value]} and {at.rsplit('.', 1)[0]}).")
    if value not in names:
        listed = ", ".join(names) or "(none)"
        raise InputError(f"{at}: unknown {kind} name {shown(value)}; the {kind}s are: {listed}.")
    seen[value] = at.rsplit(".", 1)[0]
    return value


class Requested(NamedTuple):
    """An output a request asks for: its name, and whether in binary (None: as the request's default says)."""

    name: str
    binary: bool | None


class Inference(NamedTuple):
    """An inference request, decoded: its input arrays by name, the outputs it asks for (None: all), its id, and
    whether outputs come in binary unless one says otherwise (``binary_data_output``)."""

    inputs: dict[str, Any]
    outputs: list[Requested] | None
    id: str | None
    binary: bool


def read_request(header: Any, body: bytes, start: int, inputs: Sequence[str], outputs: Sequence[str]) -> Inference:
    """A REST inference request: its JSON ``header`` (parsed) and the binary tensors in ``body`` from ``start`` on,
    for a model of ``inputs`` and ``outputs`` (names). Every field is checked and every value decoded exactly
    (:func:`decode`); an ``InputError`` names the first field that is wrong (``inputs[1].data[3]``, ``parameters``),
    and the bytes after the JSON must be the binary tensors' exactly."""
    request = _object(header, "the request", 'a JSON object: {"inputs": [...]}')
    rid = request.get("id")
    if rid is not None and not isinstance(rid, str):
        raise InputError(f"id is {shown(rid)}; an id is a string.")
    params = parameters(request.get("parameters"), "parameters")
    given = request.get("inputs")
    if not isinstance(given, list):
        what = f"inputs is {shown(given)}" if "inputs" in request else 'the request has no "inputs"'
        raise InputError(f'{what}; give a list of tensors, each {{"name", "shape", "datatype", "data"}}.')
    arrays: dict[str, Any] = {}
    seen: dict[str, str] = {}
    offset = start
    for k, entry in enumerate(given):
        at = f"inputs[{k}]"
        tensor = _object(entry, at, 'a tensor: {"name", "shape", "datatype", "data"}')
        name = check_name(tensor.get("name"), f"{at}.name", seen, inputs, "input")
        own = parameters(tensor.get("parameters"), f"{at}.parameters")
        if "data" in tensor and "binary_data_size" in own:
            raise InputError(f"{at} has both \"data\" and a binary_data_size parameter; give one.")
        if "data" in tensor:
            arrays[name] = decode(at, tensor.get("datatype"), tensor.get("shape"), data=tensor["data"])
        elif "binary_data_size" in own:
            size = own["binary_data_size"]
            if offset + size > len(body):
                raise InputError(f"{at}.parameters.binary_data_size is {size}, but {len(body) - offset} bytes of the "
                                 f"request are left after the JSON and the tensors before it.")
            arrays[name] = decode(at, tensor.get("datatype"), tensor.get("shape"), raw=body[offset:offset + size],
                                  data_at=f"{at}.parameters.binary_data_size")
            offset += size
        else:
            raise InputError(f"{at} has neither \"data\" nor a binary_data_size parameter; give one.")
    if offset != len(body):
        raise InputError(f"the request has {_count(len(body) - offset, 'byte')} after its JSON that no input's "
                         f"binary_data_size covers; send the JSON, then each binary tensor, nothing else.")
    return Inference(arrays, _requested(request.get("outputs"), outputs), rid, params.get("binary_data_output", False))


def _requested(value: Any, outputs: Sequence[str]) -> list[Requested] | None:
    """The outputs a request's ``outputs`` field asks for (None when it has none, or an empty list, as over gRPC: all
    of them)."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise InputError(f'outputs is {shown(value)}; give a list of outputs, each {{"name": NAME}}.')
    asked: list[Requested] = []
    seen: dict[str, str] = {}
    for k, entry in enumerate(value):
        at = f"outputs[{k}]"
        tensor = _object(entry, at, 'an output: {"name": NAME, "parameters": {"binary_data": true}}')
        name = check_name(tensor.get("name"), f"{at}.name", seen, outputs, "output")
        asked.append(Requested(name, parameters(tensor.get("parameters"), f"{at}.parameters").get("binary_data")))
    return asked


#: How a float's NaN and infinities travel in JSON, which has no number for them (requests and responses alike).
NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def json_values(value: Any) -> list[Any]:
    """An array's values for a JSON ``data`` field, flat: numbers, and a float's NaN and infinities as the strings
    of :data:`NONFINITE`."""
    import numpy as np

    flat = value.reshape(-1)
    if value.dtype.kind != "f" or np.isfinite(flat).all():
        return flat.tolist()
    return [x if math.isfinite(x) else ("NaN" if math.isnan(x) else "Infinity" if x > 0 else "-Infinity")
            for x in flat.tolist()]


def response(model: str, version: str, request_id: str, tensors: Sequence[Tensor], outputs: Mapping[str, Any],
             asked: list[Requested] | None, binary: bool) -> tuple[dict[str, Any], list[bytes]]:
    """A REST inference response: its JSON, and the bytes of the outputs it carries in binary (the binary
    extension, in the JSON's order). The outputs ``asked`` for (None: all of ``tensors``, the model's), each in
    binary where it asked (else ``binary``, the request's ``binary_data_output``). An encoding never changes a
    value, and a JSON response is all JSON: a float output's NaN and infinities, which JSON has no number for, are
    the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (:data:`NONFINITE`), which numpy reads back as the
    values (Triton's and KServe's clients do: ``np.array(data, dtype)``)."""
    import numpy as np

    by_name = {t.name: t for t in tensors}
    entries, raw = [], []
    for want in asked if asked is not None else [Requested(t.name, None) for t in tensors]:
        value = np.ascontiguousarray(outputs[want.name])
        entry: dict[str, Any] = {"name": want.name, "datatype": by_name[want.name].datatype,
                                 "shape": list(value.shape)}
        in_binary = binary if want.binary is None else want.binary
        if in_binary:
            data = value.tobytes()
            entry["parameters"] = {"binary_data_size": len(data)}
            raw.append(data)
        else:
            entry["data"] = json_values(value)
        entries.append(entry)
    return {"id": request_id, "model_name": model, "model_version": version, "outputs": entries}, raw
