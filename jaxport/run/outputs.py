"""What a call produced: output statistics, JSON values, output files, and the report ``call --json`` prints."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import dtypes
from .._fsio import atomic_write, check_output
from ..errors import OutputError
from .cache import CacheState
from .npyio import safe_member

if TYPE_CHECKING:
    from .gradients import VjpResult
    from .loaded import Benchmark, Loaded, Run
    from .streaming import StreamResult


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
    """Refuse an output file that cannot hold these outputs, or that jaxport must not write (``check_output``: not
    a regular file, or a file the command reads), before running anything."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".npy"):
        raise OutputError(f"{path}: the output file must end in .npz (all outputs, keyed by name) or .npy (a "
                          f"single output).")
    if suffix == ".npy" and len(names) != 1:
        raise OutputError(f"{path}: a .npy file holds one array, but the function has {len(names)} outputs "
                          f"({', '.join(names)}); write an .npz instead.")
    for name in names:
        if not safe_member(f"{name}.npy"):
            raise OutputError(f"{path}: output name {name!r} is not a safe .npz member name.")
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name ending in {suffix}.")
    check_output(path)


# --- the report of a call --------------------------------------------------------------------------------------


@dataclass
class CallReport:
    """What one ``jaxport call`` did: :meth:`as_dict` is the document ``call --json`` prints (its schema is
    ``specs/schemas/cli/call.schema.json``); the text rendering shows the same fields.

    Build it with :meth:`of_run` (a checked call, maybe benchmarked), :meth:`of_vjp` (``--vjp``) or
    :meth:`of_stream` (``--batch-size``)."""

    artifact: str
    function: str
    platform: str
    runtime: str
    dims: dict[str, int]
    inputs: list[dict[str, Any]]
    #: :func:`stats` of each output (with its ``values`` when asked for).
    outputs: list[dict[str, Any]]
    output_file: str | None
    timings: dict[str, Any]
    cache: CacheState
    benchmark: dict[str, Any] | None
    devices: dict[str, Any] | None
    #: The section of a derivative (``vjp``) or a streamed (``streaming``) call, by its key.
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of_run(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
               result: Run, cache: CacheState, *, output: str | Path | None = None,
               benchmark: Benchmark | None = None, values_up_to: int | None = None) -> CallReport:
        """The report of ``loaded.run(arrays, sources)``; with ``values_up_to``, outputs of at most that many
        elements carry their values (larger ones ``None``)."""
        outputs = []
        for name, value in result.leaves:
            entry = stats(name, value)
            if values_up_to is not None:
                entry["values"] = jsonable(value) if entry["size"] <= values_up_to else None
            outputs.append(entry)
        c = result.compilation
        timings = {"load_s": loaded.load_seconds, "lower_s": c.lower_seconds, "compile_s": c.seconds,
                   "compile_cache_hit": c.cache_hit, "run_s": result.run_seconds}
        return cls(str(artifact), loaded.function, loaded.platform, loaded.runtime, result.dims,
                   _inputs(arrays, sources), outputs, str(output) if output else None, timings, cache,
                   benchmark.as_dict() if benchmark else None, loaded.placement())

    @classmethod
    def of_vjp(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
               result: VjpResult, seconds: float, cache: CacheState, *, output: str | Path | None = None,
               cotangents: str | Path | None = None) -> CallReport:
        """The report of ``gradients.vjp(loaded, arrays, ...)`` that took ``seconds``, for the output cotangents
        read from the file ``cotangents`` (None: ones)."""
        section = {"cotangents": [stats(n, v) for n, v in result.cotangents], "not_differentiable": result.skipped,
                   "cotangents_of_outputs": str(cotangents) if cotangents else "ones"}
        return cls(str(artifact), loaded.function, loaded.platform, loaded.runtime, loaded.check(arrays),
                   _inputs(arrays, sources), [stats(n, v) for n, v in result.outputs],
                   str(output) if output else None, _untimed(loaded, seconds), cache, None, loaded.placement(),
                   {"vjp": section})

    @classmethod
    def of_stream(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
                  result: StreamResult, cache: CacheState) -> CallReport:
        """The report of ``streaming.call(loaded, arrays, ...)``."""
        return cls(str(artifact), loaded.function, loaded.platform, loaded.runtime, result.dims,
                   _inputs(arrays, sources), result.stats, result.output_file, _untimed(loaded, result.seconds),
                   cache, None, loaded.placement(), {"streaming": result.as_dict()})

    def as_dict(self) -> dict[str, Any]:
        """The ``call --json`` document."""
        return {"artifact": self.artifact, "function": self.function, "platform": self.platform,
                "runtime": self.runtime, "dims": self.dims, "inputs": self.inputs, "outputs": self.outputs,
                "output_file": self.output_file, "timings": self.timings,
                "compilation_cache": str(self.cache.directory) if self.cache.directory else None,
                "warnings": [self.cache.problem] if self.cache.problem else [], "benchmark": self.benchmark,
                **self.sections, "devices": self.devices}


def _inputs(arrays: Mapping[str, Any], sources: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": n, "shape": [int(d) for d in a.shape], "dtype": str(a.dtype), "source": sources.get(n)}
            for n, a in arrays.items()]


def _untimed(loaded: Loaded, seconds: float) -> dict[str, Any]:
    """The timings of a call whose compilations are not reported apart (derivative, streamed)."""
    return {"load_s": loaded.load_seconds, "lower_s": 0.0, "compile_s": 0.0, "compile_cache_hit": None,
            "run_s": seconds}
