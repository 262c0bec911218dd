"""Run a module that ``jaxport compile`` built, with numpy and IREE's Python runtime only: no JAX, no jaxport.

This file imports nothing from jaxport; copy it next to ``model.vmfb``, ``model.irpa`` and ``model.run.json`` on a
machine with ``pip install numpy iree-base-runtime`` (or import it as ``jaxport.run.compile.iree_loader``)::

    from iree_loader import load

    model = load("model.run.json")
    outputs = model(x=batch)                 # {output name: numpy array}; positional arguments work too
    choice = model.choose({"x": batch.shape})
    choice.function, choice.padded           # 'main_batch8', {'batch': 3}

A call runs on the function of the smallest bucket that fits it (the ``bucket_rule`` of the run description): each
dimension variable equal to the bucket's value, or not above it where the description allows padding that variable
(``padding.variables``, decided at compile time by proving that the program works row by row along it). Padded
inputs are extended along the listed axes with copies of their last row, and the outputs sliced back along theirs.
Inputs must have the dtypes the module takes (nothing is converted); ``int4`` and ``uint4`` (ml_dtypes arrays) go to
IREE packed two per byte, the first in the low nibble, and come back unpacked. Errors are :class:`CallError` (the
inputs do not fit: names the input, what it has and what would fit) and :class:`DescriptionError` (the run
description or a file it names cannot be used).

Trust: the module is native code and runs as such; load only modules you would run. The run description may only
name files in its own directory.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np  # imported where a call needs it: importing this module (jaxport does, for every call) is light

#: The run-description format this loader reads.
FORMAT = "jaxport-iree-run/1"
#: A run description larger than this is refused unread.
MAX_DESCRIPTION_BYTES = 64 << 20


class DeployError(Exception):
    """Base class of this loader's errors."""


class DescriptionError(DeployError):
    """The run description, or a file it names, cannot be used."""


class CallError(DeployError, ValueError):
    """The inputs of a call do not fit any function of the module."""


@dataclass(frozen=True)
class Choice:
    """Which function a call runs on, and how its inputs are padded."""

    function: str  # the module's function
    dims: dict[str, int]  # the bucket: each variable's value in that function
    sizes: dict[str, int]  # the call's value of each variable that is padded or matched on a padded axis
    padded: dict[str, int]  # rows added per padded variable (bucket value minus the call's), only those > 0


def _dtype(name: str) -> Any:
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16 and the float8 types: numpy names them through ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


#: IREE's element type of each 4-bit dtype its Python runtime takes only as a buffer view of packed bytes.
_PACKED = {"int4": "SINT_4", "uint4": "UINT_4"}


def _to_runtime(rt: Any, device: Any, a: Any) -> Any:
    """An input as IREE takes it: the array, or a buffer view of an int4/uint4 array's packed bytes (the layout of
    jaxport's ``arrayfiles.subbyte``; this file imports nothing from jaxport)."""
    import numpy as np

    if str(a.dtype) not in _PACKED:
        return a
    codes = a.reshape(-1).view(np.uint8) & np.uint8(0x0F)
    if codes.size % 2:
        codes = np.concatenate([codes, np.zeros(1, np.uint8)])
    packed = codes[0::2] | (codes[1::2] << np.uint8(4))
    buffer = device.allocator.allocate_buffer_copy(memory_type=rt.MemoryType.DEVICE_LOCAL,
                                                   allowed_usage=rt.BufferUsage.DEFAULT, device=device, buffer=packed)
    return rt.HalBufferView(buffer, list(a.shape), getattr(rt.HalElementType, _PACKED[str(a.dtype)]))


def _from_runtime(r: Any, dtype: str) -> Any:
    """A result as a numpy array; an int4/uint4 one unpacked from its buffer's bytes."""
    import numpy as np

    if dtype not in _PACKED:
        return np.asarray(r.to_host()) if hasattr(r, "to_host") else np.asarray(r)
    view = getattr(r, "_buffer_view", r)
    shape = [int(n) for n in view.shape]
    raw = np.array(view.map().asarray((int(view.byte_length),), np.dtype(np.uint8)))
    codes = np.stack([raw & np.uint8(0x0F), raw >> np.uint8(4)], axis=1).reshape(-1)[:math.prod(shape)]
    return codes.view(_dtype(dtype)).reshape(shape)


def _plain_file(directory: str, name: Any, what: str) -> str:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise DescriptionError(f"{what} {name!r}: the run description may only name a file in its own directory.")
    return os.path.join(directory, name)


@dataclass(frozen=True)
class Array:
    """An input or output of a module's function: its name, static shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        """The array as a function of the run description lists it."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Tensor:
    """An input or output of the signature: its name, declared shape (sizes, and dimension variables or
    expressions by name), dtype and, for an input, the range its random values are drawn from (None: its dtype's)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    range: tuple[Any, Any] | None = None


@dataclass(frozen=True)
class ModuleFunction:
    """One function of the module: its bucket (each variable's value) and its inputs and outputs, in order."""

    name: str
    dims: dict[str, int]
    inputs: tuple[Array, ...]
    outputs: tuple[Array, ...]


@dataclass(frozen=True)
class Padding:
    """Whether calls may pad a variable and, when they may, its axes in each input and output (by name)."""

    allowed: bool
    inputs: dict[str, list[int]]
    outputs: dict[str, list[int]]


@dataclass(frozen=True)
class Description:
    """What this loader reads of a run description (the file holds more: how it was compiled, the rules in words)."""

    module: Any  # the module's file name, checked to lie in the description's directory when the loader opens it
    #: The parameter archive's file name and scope, when the function has bound tensors.
    parameters: tuple[Any, str] | None
    device: str | None
    #: The signature: the inputs and the outputs, each variable's bounds (lo, hi or None), the constraints.
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    bounds: dict[str, tuple[int, int | None]]
    constraints: tuple[str, ...]
    functions: tuple[ModuleFunction, ...]
    padding: dict[str, Padding]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outputs)


def _array(entry: dict[str, Any], fname: Any, path: str) -> Array:
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise DescriptionError(f"{path}: function {fname!r} has a non-static shape.")
    return Array(str(entry["name"]), tuple(shape), str(entry["dtype"]))


def _function(f: dict[str, Any], path: str) -> ModuleFunction:
    name = f["name"]
    return ModuleFunction(name, dict(f["dims"]), tuple(_array(i, name, path) for i in f["inputs"]),
                          tuple(_array(o, name, path) for o in f["outputs"]))


def _tensor(entry: dict[str, Any]) -> Tensor:
    lo_hi = entry.get("range")
    return Tensor(entry["name"], tuple(entry["shape"]), entry["dtype"], None if lo_hi is None else (lo_hi[0], lo_hi[1]))


def _padding(verdict: dict[str, Any]) -> Padding:
    if not verdict.get("allowed"):
        return Padding(False, {}, {})
    return Padding(True, dict(verdict["inputs"]), dict(verdict["outputs"]))


def _parse(d: dict[str, Any], path: str) -> Description:
    """The run description ``d`` (parsed JSON) as records, the only place that reads its fields; KeyError or
    TypeError for a missing or mistyped field."""
    functions = tuple(_function(f, path) for f in d["functions"])
    signature = d["signature"]
    bounds = {v: (b.get("min", 1), b.get("max")) for v, b in (signature.get("dims") or {}).items()
              if isinstance(b, dict)}
    padding = {v: _padding(p) for v, p in d["padding"]["variables"].items()}
    parameters = d.get("parameters")
    return Description(d.get("module"), (parameters["file"], parameters["scope"]) if parameters else None,
                       d.get("device"), tuple(_tensor(i) for i in signature["inputs"]),
                       tuple(_tensor(o) for o in signature["outputs"]), bounds,
                       tuple(signature.get("constraints", ())), functions, padding)


def _read(path: str) -> tuple[dict[str, Any], Description]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DESCRIPTION_BYTES + 1)
    except OSError as e:
        raise DescriptionError(f"{path}: cannot read the run description: {e.strerror or e}.") from None
    if len(data) > MAX_DESCRIPTION_BYTES:
        raise DescriptionError(f"{path}: larger than {MAX_DESCRIPTION_BYTES} bytes; not a run description.")
    try:
        description = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise DescriptionError(f"{path}: not JSON ({e}); give the .run.json that jaxport compile wrote.") from None
    found = description.get("format") if isinstance(description, dict) else None
    if found != FORMAT:
        raise DescriptionError(f"{path}: format {found!r}, but this loader reads {FORMAT!r}; give the .run.json "
                               f"that jaxport compile wrote.")
    try:
        return description, _parse(description, path)
    except (KeyError, TypeError, AttributeError) as e:
        raise DescriptionError(f"{path}: the run description lacks {e}; give the .run.json that jaxport compile "
                               f"wrote.") from None


class Deployed:
    """A compiled module with its run description (see the module docstring). The IREE runtime starts on the
    first call (or :meth:`start`)."""

    def __init__(self, run_json: str | os.PathLike[str], device: str | None = None):
        self.path = os.fspath(run_json)
        #: The run description as parsed JSON, and as the records this loader reads.
        self.description, self.parsed = _read(self.path)
        directory = os.path.dirname(os.path.abspath(self.path))
        self.module_path = _plain_file(directory, self.parsed.module, "module")
        parameters = self.parsed.parameters
        self.parameters_path = _plain_file(directory, parameters[0], "parameters") if parameters else None
        self.device = device or self.parsed.device or "local-task"
        self.input_names = list(self.parsed.input_names)
        self.output_names = list(self.parsed.output_names)
        self.functions = {f.name: f for f in self.parsed.functions}
        self._bound: Any = None
        self._keep: list[Any] = []
        self._runtime: Any = None

    # --- choosing a bucket ------------------------------------------------------------------------------------

    def _padded_axes(self) -> dict[tuple[str, int], str]:
        """``{(input name, axis): variable}`` for every axis a call may pad."""
        axes = {}
        for v, verdict in self.parsed.padding.items():
            for name, listed in verdict.inputs.items():
                for a in listed:
                    axes[(name, a)] = v
        return axes

    def choose(self, shapes: Mapping[str, Sequence[int]]) -> Choice:
        """The function a call with inputs of these shapes runs on (see the module docstring)."""
        missing = [n for n in self.input_names if n not in shapes]
        extra = [n for n in shapes if n not in self.input_names]
        if missing or extra:
            raise CallError(f"the module takes inputs {', '.join(self.input_names)}; "
                            + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}") + ".")
        padded_axes = self._padded_axes()
        best: tuple[int, int, Choice] | None = None
        for order, f in enumerate(self.parsed.functions):
            sizes: dict[str, int] = {}
            fits = True
            for spec in f.inputs:
                shape = tuple(int(d) for d in shapes[spec.name])
                if len(shape) != len(spec.shape):
                    raise CallError(f"input {spec.name!r} has shape {shape}, but the module takes rank "
                                    f"{len(spec.shape)}.")
                for axis, (have, size) in enumerate(zip(shape, spec.shape)):
                    v = padded_axes.get((spec.name, axis))
                    if v is None:
                        fits = fits and have == size
                    else:
                        fits = fits and have <= size and sizes.setdefault(v, have) == have
            for v, n in sizes.items():
                lo, hi = self.parsed.bounds.get(v, (1, None))
                if n < lo or (hi is not None and n > hi):
                    raise CallError(f"dimension {v!r} = {n}, but it must satisfy {lo} <= {v}"
                                    + (f" <= {hi}" if hi is not None else "") + " (spec bound).")
            if fits:
                cost = sum(math.prod(i.shape) for i in f.inputs)
                padded = {v: f.dims[v] - n for v, n in sizes.items() if f.dims.get(v, n) > n}
                choice = Choice(f.name, dict(f.dims), sizes, padded)
                if best is None or (cost, order) < best[:2]:
                    best = (cost, order, choice)
        if best is None:
            raise CallError(self._no_fit(shapes))
        return best[2]

    def _no_fit(self, shapes: Mapping[str, Sequence[int]]) -> str:
        have = ", ".join(f"{n} {tuple(int(d) for d in shapes[n])}" for n in self.input_names)
        buckets = "; ".join(",".join(f"{k}={v}" for k, v in f.dims.items()) or f.name for f in self.parsed.functions)
        pads = [v for v, d in self.parsed.padding.items() if d.allowed]
        exact = [v for v, d in self.parsed.padding.items() if not d.allowed]
        how = []
        if pads:
            how.append(f"{', '.join(pads)} may be padded up to a bucket")
        if exact:
            how.append(f"{', '.join(exact)} must equal a bucket's value")
        return (f"no function of {os.path.basename(self.module_path)} fits inputs {have}: its buckets are {buckets}"
                + (f" ({'; '.join(how)})" if how else "") + "; compile one that fits with jaxport compile --dim or "
                                                           "--bucket.")

    # --- running ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the IREE runtime: map the module and the parameter archive."""
        if self._bound is not None:
            return
        try:
            import iree.runtime as rt
        except ImportError:
            raise DeployError("the IREE runtime is not installed: pip install iree-base-runtime.") from None
        for p in (self.module_path, self.parameters_path):
            if p is not None and not os.path.isfile(p):
                raise DescriptionError(f"{p}: not found; the run description names it (keep the files jaxport "
                                       f"compile wrote together).")
        config = rt.Config(self.device)
        modules = []
        if self.parameters_path is not None:
            index = rt.ParameterIndex()
            index.load(self.parameters_path)
            assert self.parsed.parameters is not None  # there is a parameters path
            provider = index.create_provider(scope=self.parsed.parameters[1])
            modules.append(rt.create_io_parameters_module(config.vm_instance, provider))
            self._keep += [index, provider]
        modules.append(rt.create_hal_module(config.vm_instance, config.device))
        with open(self.module_path, "rb") as f:
            vm_module = rt.VmModule.copy_buffer(config.vm_instance, f.read())
        modules.append(vm_module)
        self._bound = rt.load_vm_modules(*modules, config=config)[-1]
        self._keep.append(config)
        self._runtime = (rt, config.device)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Outputs by name for inputs by name."""
        import numpy as np

        arrays = {n: np.asarray(v) for n, v in inputs.items()}
        choice = self.choose({n: a.shape for n, a in arrays.items()})
        f = self.functions[choice.function]
        padded_axes = self._padded_axes()
        args = []
        for spec in f.inputs:
            a = arrays[spec.name]
            if a.dtype != _dtype(spec.dtype):
                raise CallError(f"input {spec.name!r} is {a.dtype}, but the module takes {spec.dtype} "
                                f"(convert it first; nothing is converted here).")
            widths = [(0, size - have) if (spec.name, axis) in padded_axes else (0, 0)
                      for axis, (have, size) in enumerate(zip(a.shape, spec.shape))]
            if any(w for _, w in widths):
                a = np.pad(a, widths, mode="edge") if all(d > 0 for d in a.shape) else np.pad(a, widths)
            args.append(np.ascontiguousarray(a))
        self.start()
        rt, device = self._runtime
        result = getattr(self._bound, choice.function)(*[_to_runtime(rt, device, a) for a in args])
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        out_axes: dict[str, list[tuple[int, str]]] = {}
        for v, verdict in self.parsed.padding.items():
            for name, listed in verdict.outputs.items():
                out_axes.setdefault(name, []).extend((a, v) for a in listed)
        outputs = {}
        for spec, r in zip(f.outputs, results):
            value = _from_runtime(r, spec.dtype)
            value = value.astype(_dtype(spec.dtype), copy=False) if value.dtype != _dtype(spec.dtype) else value
            index = [slice(None)] * value.ndim
            for axis, v in out_axes.get(spec.name, []):
                if v in choice.sizes:
                    index[axis] = slice(0, choice.sizes[v])
            outputs[spec.name] = np.array(value[tuple(index)])
        return outputs

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        """Outputs by name; inputs by position (in the signature's order) or by name."""
        if len(args) > len(self.input_names):
            raise CallError(f"{len(args)} inputs given, but the module takes {len(self.input_names)} "
                            f"({', '.join(self.input_names)}).")
        named = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k in named:
                raise CallError(f"input {k!r} is given twice.")
            named[k] = v
        return self.run(named)


def load(run_json: str | os.PathLike[str], device: str | None = None) -> Deployed:
    """The module a ``.run.json`` describes (``device``: IREE's device, default the description's, ``local-task``)."""
    return Deployed(run_json, device)
