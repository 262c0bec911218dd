"""The ``Loaded`` function: an artifact's function, called with the original function's arguments.

``Loaded`` owns what does not depend on the runtime: the signature, binding a caller's arguments to input names
(``artifact.calltree.bind``), the input checks on every call (``artifact.contract.check``; JAX does not keep the
spec's constraints in the serialization) and the records of results and timings. It compiles and runs through its
backend (``backend.Backend``: ``jax_backend.JaxBackend`` or ``iree.IreeBackend``), once per input shape signature.
Called inside a JAX transformation (``jax.grad``, ``jax.jit``), a Loaded traces the program instead of running a
compiled executable, so JAX differentiates it with the stored VJPs (``gradients.py``); bound weights are then
constants. Use :func:`jaxport.run.load.load`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .. import dtypes, usercache
from ..arrayfiles import subbyte
from ..artifact import calltree, contract, model, summary
from ..artifact.model import Function, Manifest
from ..artifact.pathtree import path_trees
from ..artifact.typed import rebuilder
from ..errors import InputError, OutputError, UsageError
from ..isolation import isolate
from ..sharding import gather
from . import gradients
from .backend import DIRECT_FAILURES, Backend, Compilation, Placement, ShapeKey, is_tracer
from .buckets import sizes
from .buckets.ahead import Shapes, plan_warmup
from .cache import compilation_cache
from .latency import Benchmark
from .values import inputs, ranges
from .warmup import Warmed, signature


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


@dataclass
class Run:
    """One checked call: the output pytree, its leaves by name, the solved dimensions and the times taken."""

    outputs: Any
    leaves: list[tuple[str, Any]]
    dims: dict[str, int]
    compilation: Compilation
    run_seconds: float


class Prepared(NamedTuple):
    """Named input arrays after the checks: in the manifest's order, their shape signature, the solved dims."""

    flat: list[Any]
    key: ShapeKey
    dims: dict[str, int]


def _jax_value(v: Any) -> bool:
    """Whether ``v`` is JAX's own (an array, a key array, a tracer), which JAX takes as it is."""
    return type(v).__module__.partition(".")[0] in ("jax", "jaxlib")


def _as_numpy(name: str, v: Any) -> Any:
    """An input that is neither a plain numpy array nor JAX's, as the numpy array its data is (an ndarray subclass as
    a base-class view, so its ``shape`` is the buffer's; another array type through ``__array__``); a masked array
    is refused, since the mask would be dropped."""
    import numpy as np

    if isinstance(v, np.ma.MaskedArray):
        raise InputError(f"input {name!r} is a masked array, whose mask a program cannot take; give "
                         f"{name}.filled(VALUE) (the masked elements replaced) or a separate mask input.")
    try:
        return np.asarray(v)
    except Exception as e:  # noqa: BLE001 - the object's own __array__ failed
        raise InputError(f"input {name!r} ({type(v).__name__}) cannot be read as an array: {type(e).__name__}: "
                         f"{str(e)[:200]}.") from None


class Loaded:
    """A function of an artifact, ready to call with the free inputs of the original function.

    ``loaded(x, mask, params={...})`` takes the same pytrees as the exported function, minus its static arguments
    (which may also be given, if equal to the exported value), checks them against the manifest and returns the
    same output pytree. Use :func:`jaxport.load`.
    """

    def __init__(self, path: Path, function: str, model: Manifest, backend: Backend, platform: str,
                 load_seconds: float, artifact: Any = None, notes: list[str] | None = None,
                 *, check_ranges: bool = False):
        self.path = path
        #: Whether every call refuses an input value outside its declared ``range`` (``load(check_ranges=True)``).
        self.check_ranges = check_ranges
        #: Lines about how the program was read (one older than this JAX's window is read by jaxport).
        self.notes: list[str] = list(notes or [])
        self.function = function
        #: The artifact's manifest as records (``artifact.model.Manifest``).
        self.model = model
        #: The function's manifest entry as its record (``artifact.model.Function``).
        self.function_record: Function = model.functions[function]
        #: What compiles and runs the program (``backend.Backend``).
        self.backend = backend
        self.platform = platform
        self.load_seconds = load_seconds
        f = self.function_record
        sharded = f.mesh is not None
        self.signature = Signature(function, tuple(i.to_json(sharded) for i in f.inputs),
                                   tuple(o.to_json(sharded) for o in f.outputs),
                                   {v: d.to_json() for v, d in f.dims.items()}, f.constraints,
                                   summary.signature(function, f))
        self._artifact = artifact  # keeps the memory map of the weights open
        #: JAX's compilation cache the function compiles with, and jaxport's records there (``load(cache_dir=)``);
        #: None: the process's own cache (or none, after ``compile_in(None)``).
        self.cache_dir: Path | None = None
        self._own_cache = False  # compile_in was called: compile in the block of cache_dir (None: no cache)
        #: The solved dimension variables of each input shape signature that passed the checks.
        self._checked: dict[ShapeKey, dict[str, int]] = {}
        #: ``((shape, dtype, type), ...)`` of inputs that passed the checks unconverted -> their compiled signature.
        self._seen: dict[tuple[Any, ...], ShapeKey] = {}
        #: How the program was compiled for each input shape signature, in the order compiled.
        self._compilations: dict[ShapeKey, Compilation] = {}
        #: The number of inputs when a call ``f(a, b, ...)`` passes exactly the inputs in order (each positional
        #: argument is one input array and nothing else is free): such a call skips ``bind``. Else -1.
        self._positional = _positional_inputs(f.signature)
        self._input_names = tuple(self.function_record.input_names)
        #: Input signatures (as ``_seen``) -> the backend's direct call of the program compiled for them.
        self._direct: dict[tuple[Any, ...], Any] = {}
        #: The direct call last taken with JAX arrays alone, and their type: JAX's own dispatch checks each array's
        #: shape, dtype and placement against what it was compiled for, so such a call needs no key of ours.
        self._fast: tuple[Any, type] | None = None
        member = model.members.get(f.payload)
        #: What gives the outputs the user's types (``artifact.typed``); None when they have them already.
        self._typed = rebuilder(f, member.sha256 if member is not None else None)

    def __repr__(self) -> str:
        return f"<jaxport.Loaded {self.signature.text!r} from {str(self.path)!r}>"

    @property
    def runtime(self) -> str:
        """Which runtime compiles and runs the program (``jax``, ``iree``)."""
        return self.backend.name

    @property
    def platform_mismatch(self) -> bool:
        """Whether the function was exported for other platforms than this one (``load(allow_platform_mismatch=True)``
        tries it here all the same)."""
        return self.platform not in self.function_record.platforms

    @property
    def mesh(self) -> Any:
        """The ``jax.sharding.Mesh`` a sharded function runs on here, or None."""
        return self.backend.mesh

    def placement(self) -> Placement | None:
        """Where a sharded function runs: devices, mesh, processes (None for an unsharded one)."""
        return self.backend.placement()

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest as JSON (``model.to_json()``)."""
        return self.model.to_json()

    @property
    def input_names(self) -> list[str]:
        return self.function_record.input_names

    @property
    def output_names(self) -> list[str]:
        return self.function_record.output_names

    @property
    def compiled_signatures(self) -> list[ShapeKey]:
        """The input shape signatures compiled so far (each compiled once, then reused)."""
        return list(self._compilations)

    @property
    def compilations(self) -> list[Compilation]:
        """How each signature of :attr:`compiled_signatures` was compiled (or loaded: ``Compilation.shipped``)."""
        return list(self._compilations.values())

    def random_inputs(self, dims: Mapping[str, int] | None = None, seed: int = 0) -> dict[str, Any]:
        """Random input arrays by name, as ``jaxport call --random`` makes them: dimension variables not in
        ``dims`` take the smallest values that satisfy the bounds and constraints (``dims`` is checked as ``--dim``
        is: ``buckets.sizes``, a ``UsageError`` for a mistake)."""
        f = self.function_record
        return inputs.random_inputs(f, sizes.resolved(f, dims), seed)

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The free input arrays of a call ``f(*args, **kwargs)``, by input name (structure checked)."""
        sig, where = self.function_record.signature, f"{self.path}: function {self.function!r}"
        try:
            return calltree.bind(sig, self.input_names, self.function, args, kwargs, where)
        except InputError:
            # a custom pytree node (an optax state, a GraphsTuple) is recorded as the dicts and lists of its key
            # paths (``artifact.pathtree``): give it in that form
            plain_args, plain_kwargs = path_trees(args), path_trees(kwargs)
            if all(x is y for x, y in zip(plain_args, args)) and \
                    all(plain_kwargs[k] is v for k, v in kwargs.items()):
                raise
            try:
                return calltree.bind(sig, self.input_names, self.function, plain_args, plain_kwargs, where)
            except InputError as e:
                first = e
            if any(site.kind == "static" and site.path.count("[") > 1 for site in calltree.walk(sig)):
                raise first from None  # a pinned number (like: leaves: {PATH: {static: true}}) that the call changed
            try:  # an artifact of an earlier jaxport baked a custom node's Python numbers: they are not inputs
                return calltree.bind(sig, self.input_names, self.function, path_trees(args, numbers=False),
                                     path_trees(kwargs, numbers=False), where)
            except InputError:
                raise first from None

    # -- checks, compilation, execution --

    def prepare(self, arrays: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> Prepared:
        """Check named input arrays against the manifest (``sources``, input name -> file, only improves the
        messages). Python scalars take the declared dtype, as in JAX."""
        import numpy as np

        f = self.function_record
        contract.check_input_names(arrays, self.input_names)
        flat, infos = [], []
        for inp in f.inputs:
            v = arrays[inp.name]
            if isinstance(v, (bool, int, float, complex)):  # as JAX takes it, never truncated or wrapped
                v = inputs.python_scalar(inp.name, v, inp.dtype)
            elif not hasattr(v, "dtype") or not hasattr(v, "shape"):
                v = inputs.value_array(inp.name, v)
            elif not hasattr(v, "__array__"):  # a shape and a dtype without values: a jax.ShapeDtypeStruct
                raise InputError(f"input {inp.name!r} is a {type(v).__name__} {v.dtype}{list(v.shape)}, which holds no "
                                 f"values: give an array of that shape and dtype.")
            elif type(v) is not np.ndarray and not _jax_value(v):
                v = _as_numpy(inp.name, v)
            declared = dtypes.to_numpy(inp.dtype)
            if isinstance(v, np.ndarray) and v.dtype.kind == "V" and not v.dtype.fields and \
                    dtypes.from_numpy(v.dtype) is None and v.dtype.itemsize == declared.itemsize and \
                    declared.kind == "V":
                v = v.view(declared)  # numpy stores bfloat16 and float8 as raw void (np.load gives '|V2')
                if dtypes.BY_NAME[inp.dtype].packed:  # int4: the unused high bits of each byte cleared
                    v = subbyte.canonical(v)
            if inp.weak and str(v.dtype) != inp.dtype:  # a Python number at export: any integer or float, kept
                v = inputs.weak_value(inp, v, (sources or {}).get(inp.name))
            flat.append(v)
            infos.append(contract.ArrayInfo(inp.name, tuple(int(d) for d in v.shape), str(v.dtype),
                                          (sources or {}).get(inp.name)))
        key = tuple((a.shape, a.dtype) for a in infos)
        # The checks depend only on the shapes and dtypes: a signature that passed once passes again.
        env = self._checked.get(key)
        if env is None:
            env = self._checked[key] = contract.check(f, infos)
        self.check_values(flat, env)
        return Prepared(flat, key, dict(env))

    def check_values(self, flat: Sequence[Any], dims: Mapping[str, int]) -> None:
        """With ``check_ranges``: refuse the first input value outside its declared range (``ranges.check_values``;
        a traced value, inside the caller's JAX transformation, has none to check)."""
        if self.check_ranges:
            ranges.check_values(self.function_record, [None if is_tracer(v) else v for v in flat], dims)

    def check(self, arrays: Mapping[str, Any]) -> dict[str, int]:
        """Check named input arrays against the manifest; returns the solved dimension variables."""
        return self.prepare(arrays).dims

    def compile_in(self, directory: Path | None) -> None:
        """Compile from now on with JAX's compilation cache in ``directory`` (None: without one), keeping jaxport's
        records there, whatever cache the process has (``load(cache_dir=)``, ``load(cache=False)``)."""
        self.cache_dir, self._own_cache = directory, True

    def _compile(self, key: ShapeKey, in_block: bool = False) -> Compilation:
        """The program compiled for ``key``, once; in the cache :meth:`compile_in` chose unless the caller's block
        chose one (``in_block``: ``warmup``)."""
        if key not in self._compilations:
            with compilation_cache(self.cache_dir) if self._own_cache and not in_block else contextlib.nullcontext():
                compilation = self._compilations[key] = self.backend.compile(key)
            self.notes.extend(n for n in compilation.notes if n not in self.notes)
        return self._compilations[key]

    def use(self, key: ShapeKey, compiled: Any) -> None:
        """Run the input shape signature ``key`` (compiled already) with the executable ``compiled`` from now on
        (``run.compile.retune``: one autotuned here in place of one compiled without the GPU); the direct calls
        kept for it are dropped, and made again at the next call."""
        use = getattr(self.backend, "use", None)
        if use is None or key not in self._compilations:
            return
        use(key, compiled)
        for seen in [s for s, k in self._seen.items() if k == key]:
            self._direct.pop(seen, None)
        self._fast = None

    def forget(self, keys: Sequence[ShapeKey]) -> None:
        """Drop what was compiled for the input shape signatures ``keys`` (a server bounding the executables it
        keeps, ``serve.compiled``): a later call of one compiles it again, or fetches it from the persistent
        cache."""
        gone = set(keys) & self._compilations.keys()
        if not gone:
            return
        for key in gone:
            del self._compilations[key]
        for seen in [s for s, key in self._seen.items() if key in gone]:
            del self._seen[seen]
            self._direct.pop(seen, None)
        self._fast = None
        self.backend.forget(list(gone))

    def run(self, arrays: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> Run:
        """Check named input arrays, compile for their shapes (once), run, and time it.

        ``sources`` (input name -> file) only improves error messages.
        """
        import jax

        flat, key, env = self.prepare(arrays, sources)
        compilation = self._compile(key)
        start = time.perf_counter()
        out = jax.block_until_ready(self.backend.execute(key, self.backend.place(flat)))
        seconds = time.perf_counter() - start
        return Run(out, self.leaves(out), env, compilation, seconds)

    def call_named(self, arrays: Mapping[str, Any]) -> Any:
        """Call with the free input arrays by name (``{"x": ..., "params/w": ...}``); returns the output pytree.

        Inside a JAX transformation (``jax.grad``, ``jax.vjp``, ``jax.jit``, ``jax.vmap`` of the caller) the inputs
        are tracers: the program is then traced through ``Exported.call``, which JAX differentiates with the VJPs
        stored at export (``vjp_order``), instead of running a compiled executable. The outputs take the user's
        types back (``artifact.typed``): namedtuples, dataclasses, PRNG keys.
        """
        out = self._call_plain(arrays)
        return out if self._typed is None else self._typed(out)

    def _call_plain(self, arrays: Mapping[str, Any]) -> Any:
        """``call_named``'s outputs as the program returns them (plain containers, key data)."""
        names = self._input_names
        if len(arrays) == len(names):
            try:
                out = self._steady([arrays[n] for n in names])
            except KeyError:
                out = _MISS
            if out is not _MISS:
                return out
        given = [arrays.get(n) for n in names]
        flat, key, _ = self.prepare(arrays)
        if any(is_tracer(v) for v in flat):
            return self._traced(flat)
        self._compile(key)
        if all(a is b for a, b in zip(flat, given)) and not self.check_ranges:  # the steady state checks nothing
            self._seen[tuple((v.shape, v.dtype, type(v)) for v in flat)] = key
        return self.backend.execute(key, self.backend.place(flat))

    def _traced(self, flat: list[Any]) -> Any:
        """The program inside the caller's own JAX transformation (``jax.jit``, ``jax.grad``, ``jax.vjp``); those
        that JAX's exported calls do not support are a ``UsageError`` saying what to do instead."""
        try:
            return self.backend.trace(flat)
        except NotImplementedError as e:
            if "Batching rule" not in str(e):
                raise
            raise UsageError(f"{self.path}: function {self.function!r} cannot be batched by jax.vmap (JAX has no "
                             f"batching rule for exported calls); give the batch as a symbolic dimension at export "
                             f"(jax.vmap the function before exporting it), or call it once per element with "
                             f"jax.lax.map.") from None
        except TypeError as e:
            if "forward-mode autodiff" not in str(e):
                raise
            raise UsageError(f"{self.path}: function {self.function!r} has reverse-mode derivatives only (the VJPs "
                             f"stored at export, --vjp-order): use jax.grad, jax.vjp or jax.jacrev, not jax.jvp, "
                             f"jax.jacfwd or jax.hessian.") from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == self._positional and not kwargs:  # f(x, ...) passes the inputs as they are: no binding
            fast = self._fast
            if fast is not None:  # JAX arrays of a signature already checked and compiled: straight to JAX's C++
                run, array = fast
                for a in args:
                    if type(a) is not array:  # a numpy array (JAX would convert float64 to float32 silently)
                        break
                else:
                    try:
                        out = run(*args)
                    except Exception:  # noqa: BLE001 - another signature (JAX refuses it), or a failure that
                        pass  # _steady's execute runs again and reports
                    else:
                        return out if self._typed is None else self._typed(out)
            out = self._steady(args)
            if out is not _MISS:
                return out if self._typed is None else self._typed(out)
        return self.call_named(self.bind(*args, **kwargs))

    def _steady(self, flat: Sequence[Any]) -> Any:
        """The steady state: inputs (in the inputs' order) of a signature already checked and compiled, taken as
        they are, straight to the compiled program where the backend offers that (``direct``: no 64-bit mode, mesh
        or weights check to go through), else through ``execute``; ``_MISS`` for inputs of any other signature."""
        try:
            seen = tuple([(v.shape, v.dtype, type(v)) for v in flat])
            run = self._direct.get(seen)
        except (AttributeError, TypeError):
            return _MISS
        if run is not None:
            try:
                out = run(*flat)
            except DIRECT_FAILURES:  # execute runs it again below, and reports the failure
                pass
            else:
                if flat and all(_jax_array(t) for _, _, t in seen) and len({t for _, _, t in seen}) == 1:
                    self._fast = (run, seen[0][2])
                return out
        key = self._seen.get(seen)
        if key is None:
            return _MISS
        if run is None:
            direct = getattr(self.backend, "direct", None)
            run = direct(key) if direct is not None else None
            if run is not None:
                self._direct[seen] = run
                return self._steady(flat)  # now through it
        return self.backend.execute(key, self.backend.place(list(flat)))

    def leaves(self, outputs: Any) -> list[tuple[str, Any]]:
        """The output pytree's arrays as ``(output name, numpy array)``, in the manifest's order."""
        import jax
        import numpy as np

        flat = jax.tree_util.tree_leaves(outputs)
        return [(name, gather(v) if self.mesh is not None else np.asarray(v))
                for name, v in zip(self.output_names, flat)]

    def vjp(self, arrays: Mapping[str, Any], cotangents: Mapping[str, Any] | None = None, *,
            weights: bool = False) -> gradients.VjpResult:
        """Outputs and input cotangents of one call, by name (see ``gradients.vjp``); needs ``vjp_order >= 1``."""
        return gradients.vjp(self, arrays, cotangents, weights=weights)

    def warmup(self, shapes: Shapes = None, *, cache_dir: str | Path | None = None,
               progress: Callable[[str], None] | None = None) -> list[Warmed]:
        """Compile ahead for the input shapes that ``shapes`` gives, so that calls with those shapes compile
        nothing: here (the executables are kept) and in a later process that uses the same JAX compilation cache
        (``jaxport call --cache-dir DIR``, or ``jax.config`` ``jax_compilation_cache_dir``), which fetches them.

        ``shapes`` gives every dimension variable a value (``{"batch": 8}``), or several (``{"batch": [1, 8, 32]}``:
        every combination), or is a list of such mappings; a function without dimension variables takes None. The
        executables go to JAX's persistent cache in ``cache_dir`` (default: the one the function was loaded with,
        ``load(cache_dir=)``, else the directory this process's JAX cache uses, else the user's cache directory,
        ``jaxport.run.cache.default_cache_dir()``), with the verdict of the program's check. Returns what was
        compiled, and how, per signature; ``progress`` gets each one's stage as it starts (``compiling f at b=8``).
        """
        where = f"{self.path}: function {self.function!r}"
        f = self.function_record
        planned = [(dims, signature(f, dims)) for dims in plan_warmup(f, shapes, where)]
        directory = Path(cache_dir).expanduser() if cache_dir is not None else \
            self.cache_dir or usercache.active_cache_dir()
        done = []
        with compilation_cache(directory) as state:
            if state.reason:
                raise OutputError(f"{where}: {state.reason}; warm up into a directory this user can write "
                                  f"(--cache-dir DIR).")
            for dims, key in planned:
                if progress is not None:
                    progress(f"compiling {self.function} at {sizes.shown(dims) or 'its static shapes'}")
                done.append(Warmed(dict(dims), key, self._compile(key, in_block=True)))
        member = self.model.members.get(f.payload)
        if member is not None:
            isolate.remember(member.sha256, directory)
        return done

    def benchmark(self, arrays: Mapping[str, Any], n: int, warmup: int = 1, host: bool = False) -> Benchmark:
        """Time ``n`` calls after ``warmup`` untimed ones, inputs already on the device: each waited for alone
        (``Benchmark.calls``), then ``n`` pipelined, one wait at the end (``Benchmark.pipelined``); with ``host``,
        ``n`` more from the inputs as given (host memory) to the outputs copied back to host memory
        (``Benchmark.host_calls``)."""
        import jax

        if n < 1:
            raise InputError(f"the number of benchmark calls must be at least 1, not {n}.")
        flat, key, _ = self.prepare(arrays)
        compilation = self._compile(key)
        flat = self.backend.place(flat, resident=True)
        for _ in range(warmup):
            jax.block_until_ready(self.backend.execute(key, flat))
        bench = Benchmark(self.load_seconds, compilation, warmup)
        for _ in range(n):
            start = time.perf_counter()
            jax.block_until_ready(self.backend.execute(key, flat))
            bench.calls.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = None
        for _ in range(n):
            out = self.backend.execute(key, flat)
        jax.block_until_ready(out)
        bench.pipelined = (time.perf_counter() - start) / n
        if host:
            import numpy as np

            given = self.prepare(arrays).flat
            for _ in range(n):
                start = time.perf_counter()
                for leaf in jax.tree_util.tree_leaves(self.backend.execute(key, self.backend.place(given))):
                    np.asarray(leaf)
                bench.host_calls.append(time.perf_counter() - start)
        return bench


#: What ``Loaded._steady`` returns for inputs it does not know (None is a valid output pytree).
_MISS = object()


def _positional_inputs(sig: model.Signature) -> int:
    """How many inputs a call passes as its positional arguments, one array each in the inputs' order, when that is
    all a caller passes (the arguments bound or static left out, as ``calltree.bind`` reads such a call: ``f(x)``
    of ``f(params, x)`` with ``params`` bound); -1 for any other call tree."""
    free = [node for node in sig.args if node.is_free]
    if any(node.kind != "input" or node.value != i for i, node in enumerate(free)):
        return -1
    if any(node.is_free for node in sig.kwargs.values()):
        return -1
    return len(free)


def _jax_array(kind: type) -> bool:
    """Whether ``kind`` is JAX's concrete array type (``jax.Array`` instances are of it), not a tracer or numpy's."""
    return kind.__name__ == "ArrayImpl" and kind.__module__.partition(".")[0] in ("jax", "jaxlib")
