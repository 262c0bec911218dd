"""Running an artifact: :func:`load` checks and deserializes one function; :class:`Loaded` calls it.

Before anything is compiled, ``load`` verifies the payload's sha256, checks that the deserialized program agrees
with the manifest, repeats the custom-call allowlist check (JAX checks it only at export) and checks that the local
JAX backend is among the artifact's platforms. Every call checks its inputs against the manifest (``contract.check``),
because JAX does not keep the spec's constraints in the serialization.

The program runs through one ``jax.jit`` of ``Exported.call`` per Loaded, compiled ahead of time once per input
shape signature (``Exported.call`` alone re-traces on every call). A sharded program (one with a ``mesh``) runs on
the mesh laid over the devices JAX lists, its inputs and bound weights placed with the shardings recorded at export
(``sharding.py``). Called inside a JAX transformation (``jax.grad``, ``jax.jit``), a Loaded traces the same
``jax.jit`` instead of running a compiled executable, so JAX differentiates it with the stored VJPs
(``gradients.py``); bound weights are then constants. :func:`compilation_cache` turns on JAX's
persistent compilation cache so that a later process skips XLA compilation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import dtypes
from ..artifact import contract, summary
from ..artifact.container import open_artifact
from ..errors import FormatError, InputError, PlatformError, UsageError
from . import inputs

_CACHE_EVENTS: Counter[str] = Counter()
_HIT = "/jax/compilation_cache/cache_hits"
_MISS = "/jax/compilation_cache/cache_misses"
_listening = False


def _listen() -> None:
    """Count JAX's persistent-cache events, to report whether a compilation was served from the cache."""
    global _listening
    if _listening:
        return
    import jax.monitoring

    def on_event(event: str, **_: Any) -> None:
        if event.startswith("/jax/compilation_cache/"):
            _CACHE_EVENTS[event] += 1

    jax.monitoring.register_event_listener(on_event)
    _listening = True


# --- the persistent compilation cache --------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$JAXPORT_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxport/xla``, else ``~/.cache/jaxport/xla``."""
    if os.environ.get("JAXPORT_CACHE_DIR"):
        return Path(os.environ["JAXPORT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxport" / "xla"


@dataclass(frozen=True)
class CacheState:
    directory: Path | None  # None: no persistent cache
    problem: str | None = None  # why the requested directory is not used


_CACHE_KEYS = ("jax_compilation_cache_dir", "jax_enable_compilation_cache",
               "jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes")


@contextlib.contextmanager
def compilation_cache(directory: str | Path | None) -> Iterator[CacheState]:
    """Use JAX's persistent compilation cache in ``directory`` (None: none) inside the block, then restore.

    Every compilation is cached, however fast or small. A directory that cannot be created is reported in the
    yielded state, and the block runs without a cache.
    """
    import jax
    from jax.experimental.compilation_cache import compilation_cache as jax_cache

    state = CacheState(None)
    if directory is not None:
        path = Path(directory).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
            state = CacheState(path)
        except OSError as e:
            state = CacheState(None, f"cannot use the compilation cache {path}: {e.strerror or e}; running without it")
    saved = {k: getattr(jax.config, k) for k in _CACHE_KEYS}
    try:
        if state.directory is not None:
            jax.config.update("jax_compilation_cache_dir", str(state.directory))
            jax.config.update("jax_enable_compilation_cache", True)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        else:
            jax.config.update("jax_enable_compilation_cache", False)
        jax_cache.reset_cache()  # JAX opens its cache once per process; make it see this directory
        yield state
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)
        jax_cache.reset_cache()


# --- loading ---------------------------------------------------------------------------------------------------


def select_function(manifest: Mapping[str, Any], function: str | None, where: str) -> str:
    """The function to run: ``function``, or the only one of the artifact."""
    from ..artifact.manifest import function_names

    names = function_names(dict(manifest), function)
    if len(names) > 1:
        raise UsageError(f"{where}: the artifact holds {len(names)} functions ({', '.join(names)}); choose one with "
                         f"--function NAME (function=NAME in Python).")
    return names[0]


def _check_payload(exported: Any, f: Mapping[str, Any], where: str, fname: str,
                   manifest_weights: Mapping[str, Any] | None = None) -> None:
    """The deserialized program must take and return what the manifest says, or the input checks would lie."""

    def dims(aval: Any) -> list[int | str]:
        return [d if isinstance(d, int) else str(d) for d in aval.shape]

    def bad(what: str) -> FormatError:
        return FormatError(f"{where}: function {fname!r}: the payload disagrees with the manifest ({what}); the "
                           f"artifact was edited or written by a faulty producer. Re-export it.")

    from ..artifact.calltree import argument_positions

    free, weight_positions = argument_positions(exported)
    names = list(f.get("weights") or [])
    if len(free) != len(f["inputs"]) or len(weight_positions) != len(names):
        raise bad(f"{len(free)} inputs and {len(weight_positions)} bound tensors in the program, "
                  f"{len(f['inputs'])} and {len(names)} in the manifest")
    tensors = (manifest_weights or {}).get("tensors") or {}
    for pos, name in zip(weight_positions, names):
        t = tensors.get(name)
        aval = exported.in_avals[pos]
        if t is None or dims(aval) != t["shape"] or str(aval.dtype) != t["dtype"]:
            raise bad(f"bound tensor {name!r} is {summary.array_type({'shape': dims(aval), 'dtype': str(aval.dtype)})}"
                      f" in the program, {'missing' if t is None else summary.array_type(t)} in the manifest")
    for aval, inp in zip([exported.in_avals[p] for p in free], f["inputs"]):
        if dims(aval) != inp["shape"] or str(aval.dtype) != inp["dtype"]:
            program = summary.array_type({"shape": dims(aval), "dtype": str(aval.dtype)})
            raise bad(f"input {inp['name']!r} is {program} in the program, {summary.array_type(inp)} in the "
                      f"manifest")
    if len(exported.out_avals) != len(f["outputs"]):
        raise bad(f"{len(exported.out_avals)} outputs in the program, {len(f['outputs'])} in the manifest")
    for aval, out in zip(exported.out_avals, f["outputs"]):
        if dims(aval) != out["shape"] or str(aval.dtype) != out["dtype"]:
            program = summary.array_type({"shape": dims(aval), "dtype": str(aval.dtype)})
            raise bad(f"output {out['name']!r} is {program} in the program, {summary.array_type(out)} in the "
                      f"manifest")
    if list(exported.platforms) != list(f["platforms"]):
        raise bad(f"platforms {', '.join(exported.platforms)} in the program, {', '.join(f['platforms'])} in the "
                  f"manifest")


def _check_signature(f: Mapping[str, Any], where: str, fname: str) -> None:
    """The call tree must use each input exactly once, so that ``Loaded.bind`` can fill every input."""
    sig = f.get("signature")
    if not sig:
        return
    used: list[int] = []

    def bad(what: str) -> FormatError:
        return FormatError(f"{where}: function {fname!r}: the manifest's signature is malformed ({what}). Re-export "
                           f"the artifact.")

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, dict) or depth > 64:
            raise bad("a node is not an object, or nests too deep")
        if "input" in node:
            if isinstance(node["input"], bool) or not isinstance(node["input"], int):
                raise bad("an input index is not an integer")
            used.append(node["input"])
        elif "dict" in node and isinstance(node["dict"], dict):
            for v in node["dict"].values():
                walk(v, depth + 1)
        elif "list" in node and isinstance(node["list"], list):
            for v in node["list"]:
                walk(v, depth + 1)
        elif "static" not in node and "bound" not in node:
            raise bad(f"unknown node {sorted(node)[:3]}")

    args, kwargs = sig.get("args", []), sig.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise bad("'args' must be a list and 'kwargs' an object")
    for a in args:
        walk(a, 0)
        if not isinstance(a.get("name"), str):
            raise bad("a positional argument has no name")
    for v in kwargs.values():
        walk(v, 0)
    if sorted(used) != list(range(len(f["inputs"]))):
        raise bad(f"it uses inputs {sorted(used)}, but there are {len(f['inputs'])}")


def load(path: str | Path, function: str | None = None, *, allow_platform_mismatch: bool = False,
         verify: bool = True, runtime: str = "jax", cache_dir: str | Path | None = None) -> Loaded:
    """Open an artifact and prepare one of its functions to run (see the module docstring for the checks).

    ``function`` names the function when the artifact holds several. With ``allow_platform_mismatch``, a function
    exported for other platforms is tried on the local one (JAX's ``DisabledSafetyCheck.platform()``). Bound weights
    are memory-mapped from the artifact; ``verify=False`` skips their sha256 check (one pass over the weight bytes,
    about a second per 1-2 GB), for artifacts whose origin is already trusted. ``runtime="iree"`` compiles and runs
    the program with IREE on the CPU instead of XLA (see ``iree_runtime``), caching compiled modules in
    ``cache_dir`` when given.
    """
    if runtime not in ("jax", "iree"):
        raise UsageError(f"unknown runtime {runtime!r}: use 'jax' or 'iree'.")
    import jax
    from jax import export

    from ..artifact.payload import deserialize
    from ..checks import check_custom_calls
    from ..module_scan import scan_module

    start = time.perf_counter()
    where = str(path)
    art = open_artifact(path)
    try:
        manifest = art.manifest
        fname = select_function(manifest, function, where)
        f = manifest["functions"][fname]
        payload = art.read(f["payload"])
        _check_signature(f, where, fname)
        from ..artifact.payload import check_calling_convention

        writer = str(manifest["producer"].get("jax"))
        check_calling_convention(f["calling_convention_version"], writer, where, fname)
        exported = deserialize(payload, where, fname, writer)
        _check_payload(exported, f, where, fname, manifest.get("weights"))
        weights = _map_weights(art, manifest, f, verify) if f.get("weights") else []
    except BaseException:
        art.close()
        raise
    check_custom_calls(f"{where}: function {fname!r}", scan_module(exported.mlir_module_serialized),
                       set(f.get("allowed_custom_calls") or []))

    local = export.default_export_platform()
    mismatch = local not in exported.platforms
    if mismatch:
        if not allow_platform_mismatch:
            raise PlatformError(
                f"{where}: function {fname!r} was exported for {', '.join(exported.platforms)}, but JAX here runs "
                f"on {local}. Run it where {' or '.join(exported.platforms)} is available, or re-export it with "
                f"--platform {local} (repeat --platform to cover several); --allow-platform-mismatch tries anyway.")
        exported = dataclasses.replace(
            exported, disabled_safety_checks=(*exported.disabled_safety_checks, export.DisabledSafetyCheck.platform()))
    if exported.nr_devices > jax.device_count():
        from ..sharding import device_count_message

        art.close()
        raise PlatformError(device_count_message(f"{where}: function {fname!r}", exported.nr_devices,
                                                 jax.device_count(), f.get("mesh")))
    from .gradients import explain_missing

    exported = explain_missing(exported, where, fname)
    if runtime == "iree":
        from .iree import IreeLoaded

        try:
            return IreeLoaded(Path(path), fname, manifest, exported, local, mismatch, time.perf_counter() - start,
                              weights, art, cache_dir=cache_dir)
        except BaseException:
            art.close()
            raise
    return Loaded(Path(path), fname, manifest, exported, local, mismatch, time.perf_counter() - start, weights, art)


def _map_weights(art: Any, manifest: Mapping[str, Any], f: Mapping[str, Any], verify: bool) -> list[Any]:
    """The function's bound tensors as numpy views of the artifact's memory map (no copy), digest checked."""
    from ..artifact.tensors import tensor_views

    w = manifest.get("weights")
    if not isinstance(w, dict) or w.get("member") not in art.members:
        raise FormatError(f"{art.path}: the manifest lists bound tensors but no weights member.")
    if verify:
        art.verify(w["member"])
    views = tensor_views(art.view(w["member"]), w.get("tensors") or {}, str(art.path))
    missing = [n for n in f["weights"] if n not in views]
    if missing:
        raise FormatError(f"{art.path}: bound tensor(s) {', '.join(missing)} are not in the weights member.")
    return [views[n] for n in f["weights"]]


# --- calling ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """What a function accepts and returns, from its manifest entry; ``str()`` gives the one-line signature."""

    function: str
    inputs: tuple[dict[str, Any], ...]
    outputs: tuple[dict[str, Any], ...]
    dims: dict[str, Any]
    constraints: tuple[str, ...]
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Compilation:
    lower_seconds: float  # tracing Exported.call and building the module
    seconds: float  # XLA compilation (or fetching it from the persistent cache)
    cache_hit: bool | None  # served from the persistent cache; None when no persistent cache is in use


@dataclass
class Run:
    """One checked call: the output pytree, its leaves by name, the solved dimensions and the times taken."""

    outputs: Any
    leaves: list[tuple[str, Any]]
    dims: dict[str, int]
    compilation: Compilation
    run_seconds: float


@dataclass
class Benchmark:
    load_seconds: float
    compilation: Compilation
    warmup: int
    calls: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        import numpy as np

        return float(np.percentile(self.calls, q))

    def as_dict(self) -> dict[str, Any]:
        return {"load_s": self.load_seconds, "lower_s": self.compilation.lower_seconds,
                "compile_s": self.compilation.seconds,
                "compile_cache_hit": self.compilation.cache_hit, "warmup": self.warmup, "n": len(self.calls),
                "p50_s": self.percentile(50), "p90_s": self.percentile(90), "min_s": min(self.calls),
                "mean_s": sum(self.calls) / len(self.calls)}


def _is_tracer(value: Any) -> bool:
    import jax

    return isinstance(value, jax.core.Tracer)


def _same_static(value: Any, static: Any) -> bool:
    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    try:
        return bool(norm(value) == norm(static))
    except Exception:  # noqa: BLE001 - an array compared with a scalar, say
        return False


def _show(path: str) -> str:
    """``'params'`` for a top-level argument, ``params['w']`` inside one."""
    return path if "[" in path else f"'{path}'"


class Loaded:
    """A function of an artifact, ready to call with the free inputs of the original function.

    ``loaded(x, mask, params={...})`` takes the same pytrees as the exported function, minus its static arguments
    (which may also be given, if equal to the exported value), checks them against the manifest and returns the
    same output pytree. Use :func:`load`.
    """

    #: Which runtime compiles and runs the program.
    runtime = "jax"

    def __init__(self, path: Path, function: str, manifest: dict[str, Any], exported: Any, platform: str,
                 platform_mismatch: bool, load_seconds: float, weights: list[Any] | None = None,
                 artifact: Any = None):
        import jax

        from ..artifact.calltree import argument_positions

        self.path = path
        self.function = function
        self.manifest = manifest
        self.platform = platform
        self.platform_mismatch = platform_mismatch
        self.load_seconds = load_seconds
        f = self.function_manifest
        self.signature = Signature(function, tuple(f["inputs"]), tuple(f["outputs"]), dict(f.get("dims") or {}),
                                   tuple(f.get("constraints") or []), summary.signature(function, f))
        self._exported = exported
        self._needs_x64 = bool(f.get("x64"))

        free, weight_positions = argument_positions(exported)
        n = len(exported.in_avals)

        def program(weights: list[Any], *flat: Any) -> Any:
            full: list[Any] = [None] * n
            for pos, value in zip(free, flat):
                full[pos] = value
            for pos, value in zip(weight_positions, weights):
                full[pos] = value
            args, kwargs = exported.in_tree.unflatten(full)
            return exported.call(*args, **kwargs)

        program.__name__ = function
        self._program = program
        self._jit = jax.jit(program)
        self._artifact = artifact  # keeps the memory map of the weights open
        #: A sharded program's mesh over the local devices, and the shardings of its free inputs (None: unsharded).
        self._mesh, self._in_shardings, weight_shardings = self._shardings(free, weight_positions)
        # Bound weights go to the device once; every call passes the same buffers as arguments (not constants).
        with self._x64():
            if weight_shardings is None:
                self._weights = [jax.device_put(w) for w in (weights or [])]
            else:
                from ..sharding import place

                self._weights = [place(w, s) for w, s in zip(weights or [], weight_shardings)]
        if artifact is not None and not weights:
            artifact.close()
            self._artifact = None
        #: The solved dimension variables of each input shape signature that passed the checks.
        self._checked: dict[tuple[Any, ...], dict[str, int]] = {}
        #: ``((shape, dtype, type), ...)`` of inputs that passed the checks unconverted -> their compiled signature.
        self._seen: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        #: Compiled executables (and how long they took) by input shape signature ``((shape, dtype), ...)``.
        self._compiled: dict[tuple[tuple[tuple[int, ...], str], ...], tuple[Any, Compilation]] = {}

    def __repr__(self) -> str:
        return f"<jaxport.Loaded {self.signature.text!r} from {str(self.path)!r}>"

    def _shardings(self, free: list[int], weight_positions: list[int]) -> tuple[Any, Any, Any]:
        """For a program with a mesh: the mesh over the devices JAX sees, and the shardings of the free inputs and
        of the bound tensors, as recorded at export."""
        mesh_info = self.function_manifest.get("mesh")
        if not mesh_info:
            return None, None, None
        from ..sharding import named, runtime_mesh

        mesh = runtime_mesh(mesh_info, f"{self.path}: function {self.function!r}")
        try:
            recorded = self._exported.in_shardings_jax(mesh)
        except ValueError as e:  # the program's mesh is not the manifest's
            raise FormatError(f"{self.path}: function {self.function!r}: the payload disagrees with the manifest "
                              f"(mesh: {str(e)[:300]}); the artifact was edited or written by a faulty producer. "
                              f"Re-export it.") from None
        shardings = [s if s is not None else named(mesh, None) for s in recorded]
        return mesh, [shardings[p] for p in free], [shardings[p] for p in weight_positions]

    def _place(self, flat: list[Any]) -> list[Any]:
        """Inputs on the devices: a sharded program's inputs laid out as recorded (each device reads its slice);
        others as given (JAX copies them at the call)."""
        if self._in_shardings is None:
            return flat
        from ..sharding import place

        with self._x64():
            return [v if _is_tracer(v) else place(v, s) for v, s in zip(flat, self._in_shardings)]

    @property
    def mesh(self) -> Any:
        """The ``jax.sharding.Mesh`` a sharded function runs on here, or None."""
        return self._mesh

    @property
    def function_manifest(self) -> dict[str, Any]:
        return self.manifest["functions"][self.function]

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self.function_manifest["inputs"]]

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self.function_manifest["outputs"]]

    @property
    def compiled_signatures(self) -> list[tuple[tuple[tuple[int, ...], str], ...]]:
        """The input shape signatures compiled so far (each compiled once, then reused)."""
        return list(self._compiled)

    def random_inputs(self, dims: Mapping[str, int] | None = None, seed: int = 0) -> dict[str, Any]:
        """Random input arrays by name, as ``jaxport call --random`` makes them: dimension variables not in
        ``dims`` take the smallest values that satisfy the bounds and constraints."""
        f = self.function_manifest
        return inputs.random_inputs(f, contract.resolve_dims(f, dims or {}), seed)

    # -- binding the original function's arguments to the manifest's inputs --

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The free input arrays of a call ``f(*args, **kwargs)``, by input name (structure checked)."""
        f = self.function_manifest
        names = self.input_names
        sig = f.get("signature") or {}
        if not sig:
            sig = {"args": [{"input": i, "name": n} for i, n in enumerate(names)], "kwargs": {}}
        top = list(sig.get("args") or [])
        top_kwargs = dict(sig.get("kwargs") or {})
        free = [a for a in top if "static" not in a and "bound" not in a]
        full = len(args) == len(top) and len(free) != len(top)
        targets = top if full else free
        if len(args) > len(targets):
            listed = ", ".join(a["name"] for a in free)
            raise InputError(f"{self.function}() takes {len(free)} positional array argument"
                             f"{'s' if len(free) != 1 else ''} ({listed}), but {len(args)} were given.")
        bound: dict[str, tuple[Any, Any]] = {}
        for node, value in zip(targets, args):
            bound[node["name"]] = (node, value)
        by_name = {a["name"]: a for a in top}
        by_name.update(top_kwargs)
        for k, v in kwargs.items():
            if k not in by_name:
                raise InputError(f"{self.function}() got an unexpected argument {k!r}; its arguments are "
                                 f"{', '.join(by_name)}.")
            if k in bound:
                raise InputError(f"{self.function}() got two values for argument {k!r}.")
            bound[k] = (by_name[k], v)
        missing = [k for k, node in by_name.items() if k not in bound and "static" not in node and "bound" not in node]
        if missing:
            raise InputError(f"{self.function}() is missing argument{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(map(repr, missing))}.")
        leaves: dict[str, Any] = {}
        for k, (node, value) in bound.items():
            self._walk(node, value, k, leaves)
        return {n: leaves[n] for n in names}

    def _walk(self, node: Mapping[str, Any], value: Any, path: str, leaves: dict[str, Any]) -> None:
        if "input" in node:
            leaves[self.input_names[node["input"]]] = value
        elif "static" in node:
            if value is not None and not _same_static(value, node["static"]):
                raise InputError(f"argument {_show(path)} was fixed to {node['static']!r} when the artifact was "
                                 f"exported; got {value!r}. Leave it out (or pass None), or re-export with the new "
                                 f"value.")
        elif "bound" in node:
            if value is not None:
                raise InputError(f"argument {_show(path)} is bound to weights stored in the artifact (from "
                                 f"{node['bound']}); leave it out.")
        elif "dict" in node:
            keys = list(node["dict"])
            # Keys whose values are fixed (static) or supplied by the artifact (bound) may be left out.
            needed = {k for k, sub in node["dict"].items() if "static" not in sub and "bound" not in sub}
            if not isinstance(value, Mapping) or not needed <= set(value) <= set(keys):
                got = f"keys {sorted(map(str, value))}" if isinstance(value, Mapping) else type(value).__name__
                raise InputError(f"argument {_show(path)}: expected a dict with keys {sorted(needed)}, got {got}.")
            for k in keys:
                self._walk(node["dict"][k], value.get(k), f"{path}[{k!r}]", leaves)
        elif "list" in node:
            items = node["list"]
            if not isinstance(value, (list, tuple)) or len(value) != len(items):
                got = f"length {len(value)}" if isinstance(value, (list, tuple)) else type(value).__name__
                raise InputError(f"argument {_show(path)}: expected a list of {len(items)}, got {got}.")
            for i, (sub, v) in enumerate(zip(items, value)):
                self._walk(sub, v, f"{path}[{i}]", leaves)
        else:
            raise FormatError(f"{self.path}: function {self.function!r}: unreadable signature node at {path}.")

    # -- checks, compilation, execution --

    def _prepare(self, arrays: Mapping[str, Any],
                 sources: Mapping[str, str] | None = None) -> tuple[list[Any], tuple[Any, ...], dict[str, int]]:
        import numpy as np

        f = self.function_manifest
        for name in arrays:
            if name not in self.input_names:
                raise contract.unknown_input_error(name, self.input_names)
        missing = [n for n in self.input_names if n not in arrays]
        if missing:
            raise InputError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}.")
        flat, infos = [], []
        for inp in f["inputs"]:
            v = arrays[inp["name"]]
            if isinstance(v, (bool, int, float, complex)):  # a Python scalar takes the declared type, as in JAX
                v = np.asarray(v, dtype=dtypes.to_numpy(inp["dtype"]))
            elif not hasattr(v, "dtype") or not hasattr(v, "shape"):
                v = np.asarray(v)
            declared = dtypes.to_numpy(inp["dtype"])
            if isinstance(v, np.ndarray) and v.dtype.kind == "V" and not v.dtype.fields and \
                    v.dtype.itemsize == declared.itemsize and declared.kind == "V":
                v = v.view(declared)  # numpy stores bfloat16 and float8 as raw void (np.load gives '|V2')
            flat.append(v)
            infos.append(contract.ArrayInfo(inp["name"], tuple(int(d) for d in v.shape), str(v.dtype),
                                          (sources or {}).get(inp["name"])))
        key = tuple((a.shape, a.dtype) for a in infos)
        # The checks depend only on the shapes and dtypes: a signature that passed once passes again.
        env = self._checked.get(key)
        if env is None:
            env = self._checked[key] = contract.check(f, infos)
        return flat, key, dict(env)

    def check(self, arrays: Mapping[str, Any]) -> dict[str, int]:
        """Check named input arrays against the manifest; returns the solved dimension variables."""
        return self._prepare(arrays)[2]

    def _x64(self) -> Any:
        import jax

        return jax.enable_x64(True) if self._needs_x64 else contextlib.nullcontext()

    def _compile(self, key: tuple[Any, ...]) -> Compilation:
        """Compile for one input shape signature, once; later calls get the first compilation's record."""
        if key in self._compiled:
            return self._compiled[key][1]
        import jax

        _listen()
        shardings = self._in_shardings or [None] * len(key)
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt), sharding=s)
                   for (shape, dt), s in zip(key, shardings)]
        hits, misses = _CACHE_EVENTS[_HIT], _CACHE_EVENTS[_MISS]
        start = time.perf_counter()
        with self._x64():
            try:
                lowered = self._jit.lower(self._weights, *structs)
            except ValueError as e:
                raise self._failure("JAX refused the inputs", e, InputError) from None
            lower_seconds = time.perf_counter() - start
            start = time.perf_counter()
            try:
                compiled = lowered.compile()
            except Exception as e:  # noqa: BLE001 - XLA raises its runtime error type for any compile failure
                raise self._failure(f"XLA on {self.platform} could not compile the program", e,
                                    PlatformError) from None
        seconds = time.perf_counter() - start
        hit = True if _CACHE_EVENTS[_HIT] > hits else False if _CACHE_EVENTS[_MISS] > misses else None
        self._compiled[key] = (compiled, Compilation(lower_seconds, seconds, hit))
        return self._compiled[key][1]

    def _failure(self, what: str, e: Exception, kind: type) -> Exception:
        text = str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__
        where = f"{self.path}: function {self.function!r}"
        if self.platform_mismatch:
            return PlatformError(f"{where} was exported for {', '.join(self.function_manifest['platforms'])} and "
                                 f"cannot run on {self.platform} ({what}: {text}). Run it on a machine with one of "
                                 f"its platforms, or re-export it with --platform {self.platform}.")
        hint = ""
        if "custom call" in text or "FFI handler" in text:
            hint = (" The program calls a kernel that this process does not provide: register its implementation "
                    "(for example with jax.ffi.register_ffi_target) before calling, or run it where it is available.")
        return kind(f"{where}: {what}: {text}.{hint}")

    def _execute(self, key: tuple[Any, ...], flat: list[Any]) -> Any:
        with self._x64():
            try:
                return self._compiled[key][0](self._weights, *flat)
            except Exception as e:  # noqa: BLE001
                if self.platform_mismatch:
                    raise self._failure("running failed", e, PlatformError) from None
                raise

    def run(self, arrays: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> Run:
        """Check named input arrays, compile for their shapes (once), run, and time it.

        ``sources`` (input name -> file) only improves error messages.
        """
        import jax

        flat, key, env = self._prepare(arrays, sources)
        compilation = self._compile(key)
        start = time.perf_counter()
        out = jax.block_until_ready(self._execute(key, self._place(flat)))
        seconds = time.perf_counter() - start
        return Run(out, self.leaves(out), env, compilation, seconds)

    def call_named(self, arrays: Mapping[str, Any]) -> Any:
        """Call with the free input arrays by name (``{"x": ..., "params/w": ...}``); returns the output pytree.

        Inside a JAX transformation (``jax.grad``, ``jax.vjp``, ``jax.jit``, ``jax.vmap`` of the caller) the inputs
        are tracers: the program is then traced through ``Exported.call``, which JAX differentiates with the VJPs
        stored at export (``vjp_order``), instead of running a compiled executable.
        """
        try:  # the steady state: arrays of a shape signature already checked and compiled, taken as they are
            flat = [arrays[n] for n in self.input_names]
            key = self._seen.get(tuple((v.shape, v.dtype, type(v)) for v in flat)) if len(arrays) == len(flat) \
                else None
        except (KeyError, AttributeError, TypeError):
            key = None
        if key is None:
            given = [arrays.get(n) for n in self.input_names]
            flat, key, _ = self._prepare(arrays)
            if any(_is_tracer(v) for v in flat):
                with self._x64():
                    return self._jit(self._weights, *flat)
            self._compile(key)
            if all(a is b for a, b in zip(flat, given)):
                self._seen[tuple((v.shape, v.dtype, type(v)) for v in flat)] = key
        return self._execute(key, self._place(flat))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call_named(self.bind(*args, **kwargs))

    def leaves(self, outputs: Any) -> list[tuple[str, Any]]:
        """The output pytree's arrays as ``(output name, numpy array)``, in the manifest's order."""
        import jax
        import numpy as np

        from ..sharding import gather

        flat = jax.tree_util.tree_leaves(outputs)
        return [(name, gather(v) if self._mesh is not None else np.asarray(v))
                for name, v in zip(self.output_names, flat)]

    def vjp(self, arrays: Mapping[str, Any], cotangents: Mapping[str, Any] | None = None, *,
            weights: bool = False) -> Any:
        """Outputs and input cotangents of one call, by name (see ``gradients.vjp``); needs ``vjp_order >= 1``."""
        from .gradients import vjp

        return vjp(self, arrays, cotangents, weights=weights)

    def benchmark(self, arrays: Mapping[str, Any], n: int, warmup: int = 1) -> Benchmark:
        """Time ``n`` calls after ``warmup`` untimed ones, inputs already on the device."""
        import jax

        if n < 1:
            raise InputError(f"the number of benchmark calls must be at least 1, not {n}.")
        flat, key, _ = self._prepare(arrays)
        compilation = self._compile(key)
        flat = [jax.device_put(v) for v in flat] if self._in_shardings is None else self._place(flat)
        for _ in range(warmup):
            jax.block_until_ready(self._execute(key, flat))
        bench = Benchmark(self.load_seconds, compilation, warmup)
        for _ in range(n):
            start = time.perf_counter()
            jax.block_until_ready(self._execute(key, flat))
            bench.calls.append(time.perf_counter() - start)
        return bench


# --- describing outputs ----------------------------------------------------------------------------------------


def stats(name: str, value: Any) -> dict[str, Any]:
    """Name, shape, dtype, min, max and mean (of the finite values) and the NaN/Inf counts of an array."""
    import numpy as np

    a = np.asarray(value)
    kind = dtypes.BY_NAME[str(a.dtype)].kind if str(a.dtype) in dtypes.BY_NAME else a.dtype.kind
    out: dict[str, Any] = {"name": name, "shape": list(a.shape), "dtype": str(a.dtype), "size": int(a.size),
                           "min": None, "max": None, "mean": None, "nan": 0, "inf": 0}
    if kind in ("float", "complex"):
        wide = a.astype(np.complex128 if kind == "complex" else np.float64)
        out["nan"] = int(np.isnan(wide).sum())
        out["inf"] = int(np.isinf(wide).sum())
        if kind == "float":
            finite = wide[np.isfinite(wide)]
            if finite.size:
                out.update(min=float(finite.min()), max=float(finite.max()), mean=float(finite.mean()))
    elif a.size:
        wide = a.astype(np.int64 if kind != "uint" else np.uint64)
        out.update(min=int(wide.min()), max=int(wide.max()), mean=float(wide.mean()))
    return out


def jsonable(value: Any) -> Any:
    """An array as nested lists for JSON: floats as numbers, NaN and infinities as strings, complex as [re, im]."""
    import numpy as np

    a = np.asarray(value)
    kind = dtypes.BY_NAME[str(a.dtype)].kind if str(a.dtype) in dtypes.BY_NAME else a.dtype.kind

    def fix(x: Any) -> Any:
        if isinstance(x, list):
            return [fix(v) for v in x]
        if isinstance(x, complex):
            return [fix(x.real), fix(x.imag)]
        if isinstance(x, float) and not math.isfinite(x):
            return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
        return x

    if kind == "float":
        return fix(a.astype(np.float64).tolist())
    if kind == "complex":
        return fix(a.astype(np.complex128).tolist())
    return a.tolist()


def save_outputs(path: str | Path, leaves: list[tuple[str, Any]]) -> None:
    """Write outputs atomically: ``.npz`` keyed by output name, or ``.npy`` for a single output."""
    import zipfile

    import numpy as np

    from ..artifact.container import atomic_write
    from ..errors import OutputError

    path = Path(path)
    check_output_path(path, [n for n, _ in leaves])
    if path.suffix.lower() == ".npy":
        atomic_write(path, lambda f: np.lib.format.write_array(f, np.asarray(leaves[0][1]), allow_pickle=False))
        return

    def write(f: Any) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, value in leaves:
                with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)

    try:
        atomic_write(path, write)
    except ValueError as e:  # numpy refuses an array it would have to pickle
        raise OutputError(f"{path}: cannot write the outputs: {e}.") from None


def check_output_path(path: str | Path, names: list[str]) -> None:
    """Refuse an output file that cannot hold these outputs, before running anything."""
    from ..errors import OutputError

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".npy"):
        raise OutputError(f"{path}: the output file must end in .npz (all outputs, keyed by name) or .npy (a "
                          f"single output).")
    if suffix == ".npy" and len(names) != 1:
        raise OutputError(f"{path}: a .npy file holds one array, but the function has {len(names)} outputs "
                          f"({', '.join(names)}); write an .npz instead.")
    for name in names:
        if not inputs._safe_member(f"{name}.npy"):
            raise OutputError(f"{path}: output name {name!r} is not a safe .npz member name.")
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name ending in {suffix}.")
