"""Large inputs: a call streamed through the artifact in chunks of the leading axis (``call --batch-size K``).

Streaming applies when every input's axis 0 and every output's axis 0 is the same dimension expression ``a*v`` of
one dimension variable ``v`` (``batch``, or ``4*b``): the inputs are cut into chunks of K rows, each chunk is one
checked call, and the outputs are concatenated. That equals the unchunked call for a function whose rows are
independent (a model applied per example); it is the caller's promise, which jaxport cannot check. The last chunk
may be smaller (one more compilation); it is never padded, because padding changes the result of a program that
mixes rows (a normalization over the batch, say).

Memory stays bounded by a few chunks: ``.npy`` inputs are read chunk by chunk from the file (their header checked as
``npyio.read_npy`` checks it, never the whole array), and the outputs are written chunk by chunk through jaxport's one
write helper (``_fsio.atomic_output``): a single ``.npy`` output into its exclusively created temporary file, renamed
over the destination at the end; the outputs of an ``.npz`` into anonymous scratch files beside it, packed into the
``.npz`` at the end. An interrupted call leaves no partial output and no temporary file. Output statistics are
accumulated per chunk.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ... import dimexpr, dtypes
from ..._fsio import atomic_output, atomic_write, open_for_reading, scratch_file, write_failure
from ..._text import plural
from ...artifact.model import Function, Input, Output
from ...artifact.summary import array_type
from ...errors import InputError, UsageError
from ..values.inputs import classify, missing_error
from ..values.npyio import final_dtype, read_header, read_npz, size_text
from ..values.outputs import check_output_path


@dataclass(frozen=True)
class Axis:
    """The streamed axis: axis 0 of every input and output is ``factor * variable``."""

    variable: str
    factor: int
    expression: str


def streamed_axis(f: Function, fname: str) -> Axis:
    """The axis to stream along, or a UsageError saying which input or output does not allow streaming."""
    why = (" --batch-size streams along axis 0, which must be the same dimension variable (times a constant) in every "
           "input and output.")
    arrays: list[tuple[str, Input | Output]] = [("input", a) for a in f.inputs]
    arrays += [("output", a) for a in f.outputs]
    if not f.inputs:
        raise UsageError(f"function {fname!r} takes no inputs; there is nothing to stream.{why}")
    first: str | None = None
    for kind, a in arrays:
        shape = a.shape
        if not shape or isinstance(shape[0], int):
            dim = "a scalar" if not shape else f"axis 0 of fixed size {shape[0]}"
            raise UsageError(f"{kind} {a.name!r} ({_type(a)}) has {dim}.{why}")
        text = str(dimexpr.parse(shape[0]))
        if first is None:
            first = text
        elif text != first:
            raise UsageError(f"{kind} {a.name!r} ({_type(a)}) has axis 0 = {text}, but {_type_first(arrays)} "
                             f"has {first}.{why}")
    assert first is not None
    expr = dimexpr.parse(first)
    names = sorted(dimexpr.variables(expr))
    lin = dimexpr.linear(expr, names[0], {}) if len(names) == 1 else None
    if lin is None or lin[1] != 0 or lin[0] < 1:
        raise UsageError(f"axis 0 is {first}, which is not a variable times a constant; chunks of it would not add "
                         f"up to the whole.{why}")
    return Axis(names[0], lin[0], first)


def _type(a: Input | Output) -> str:
    return array_type(a)


def _type_first(arrays: list[tuple[str, Input | Output]]) -> str:
    kind, a = arrays[0]
    return f"{kind} {a.name!r}"


# --- reading inputs chunk by chunk ---------------------------------------------------------------------------------


class NpyRows:
    """A ``.npy`` file read by rows of axis 0, never whole: ``rows[start:stop]`` reads those rows from the file.

    The header is parsed and checked as ``npyio.read_npy`` does (no pickle, declared size equal to the file's).
    """

    def __init__(self, path: str | Path, declared: str, name: str):
        import numpy as np

        self.path = str(path)
        with open_for_reading(path, InputError, directory="a .npy file") as fp:
            header = read_header(fp, self.path)
            size = os.fstat(fp.fileno()).st_size
        self._stored = header.dtype if header.dtype.kind != "V" else final_dtype(header, declared, name, self.path)
        self.dtype = final_dtype(header, declared, name, self.path)
        if size - header.header_bytes != header.nbytes:
            raise InputError(f"{path}: the header declares {size_text(header)}, but {size - header.header_bytes} "
                             f"bytes follow it; the file is truncated or damaged.")
        self.shape = header.shape
        self._offset = header.header_bytes
        self._fortran = header.fortran_order and len(self.shape) > 1
        self._row_items = math.prod(self.shape[1:]) if self.shape else 1
        if self._fortran:  # rows are not contiguous: map the file and let numpy gather them
            with open_for_reading(path, InputError, directory="a .npy file") as fp:  # a regular file, checked
                self._map = np.memmap(fp, dtype=self._stored, mode="r", offset=self._offset, shape=self.shape,
                                      order="F")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __getitem__(self, index: Any) -> Any:
        import numpy as np

        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("NpyRows reads contiguous row ranges: rows[start:stop]")
        start, stop, _ = index.indices(len(self))
        stop = max(start, stop)
        if self._fortran:
            return np.ascontiguousarray(self._map[start:stop]).astype(self.dtype, copy=False)
        count = (stop - start) * self._row_items
        with open_for_reading(self.path, InputError, directory="a .npy file") as fp:  # never a FIFO swapped in
            flat = np.fromfile(fp, dtype=self._stored, count=count,
                               offset=self._offset + start * self._row_items * self._stored.itemsize)
        if flat.size != count:
            raise InputError(f"{self.path}: truncated while reading rows {start}..{stop}.")
        return flat.reshape((stop - start, *self.shape[1:])).astype(self.dtype, copy=False)


def open_inputs(f: Function, items: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``--inputs`` of a streamed call: each ``.npy`` as :class:`NpyRows` (read by chunks); an ``.npz`` is read
    whole (its members may be compressed)."""
    positional, named, npz = classify(f, items)
    declared = {i.name: i.dtype for i in f.inputs}
    names = list(declared)
    if positional and (named or npz):
        raise InputError("give --inputs either all by position (FILE.npy, in the order 'inspect' lists the "
                         "inputs) or all by name (NAME=FILE.npy, or an .npz keyed by input names), not both.")
    if len(positional) > len(names):
        raise InputError(f"too many inputs: {plural(len(positional), 'file')} given, but the function takes "
                         f"{len(names)}.")
    files = dict(zip(names, positional)) | named
    arrays: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for file in npz:
        for name, arr in read_npz(file, declared).items():
            if name in sources:
                raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
            arrays[name], sources[name] = arr, f"{file}[{name}]"
    for name, file in files.items():
        if name in sources:
            raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
        arrays[name], sources[name] = NpyRows(file, declared[name], name), file
    missing = [n for n in names if n not in arrays]
    if missing:
        raise missing_error(f, missing)
    return {n: arrays[n] for n in names}, {n: sources[n] for n in names}


# --- writing outputs chunk by chunk --------------------------------------------------------------------------------


class _NpyWriter:
    """A ``.npy`` file of the output ``path`` written row by row into ``file`` (the output's temporary file, or a
    scratch file): the header of the whole array, then the rows in order."""

    def __init__(self, file: BinaryIO, path: Path, shape: tuple[int, ...], dtype: Any):
        import numpy as np

        self.file, self.path = file, path
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
        try:
            try:
                np.lib.format.write_array_header_1_0(file, header)
            except ValueError:  # a header over 64 KiB (a very high rank)
                np.lib.format.write_array_header_2_0(file, header)
        except OSError as e:
            raise write_failure(path, e) from None

    def write(self, rows: Any) -> None:
        import numpy as np

        try:
            self.file.write(np.ascontiguousarray(rows).tobytes())
        except OSError as e:
            raise write_failure(self.path, e) from None


class _Stats:
    """``outputs.stats`` of an output, accumulated over chunks."""

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype = name, dtype
        self.kind = dtypes.BY_NAME[dtype].kind if dtype in dtypes.BY_NAME else "float"
        self.size = 0
        self.nan = self.inf = 0
        self.lo: Any = None
        self.hi: Any = None
        self.total = 0.0
        self.count = 0

    def add(self, value: Any) -> None:
        import numpy as np

        a = np.asarray(value)
        self.size += int(a.size)
        if self.kind in ("float", "complex"):
            wide = a.astype(np.complex128 if self.kind == "complex" else np.float64)
            self.nan += int(np.isnan(wide).sum())
            self.inf += int(np.isinf(wide).sum())
            if self.kind == "float":
                finite = wide[np.isfinite(wide)]
                if finite.size:
                    self._extend(float(np.min(finite)), float(np.max(finite)), float(finite.sum()), int(finite.size))
        elif a.size:
            wide = a.astype(np.int64 if self.kind != "uint" else np.uint64)
            self._extend(int(np.min(wide)), int(np.max(wide)), float(wide.sum()), int(a.size))

    def _extend(self, lo: Any, hi: Any, total: float, count: int) -> None:
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.total += total
        self.count += count

    def as_dict(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {"name": self.name, "shape": list(shape), "dtype": self.dtype, "size": self.size, "min": self.lo,
                "max": self.hi, "mean": self.total / self.count if self.count else None, "nan": self.nan,
                "inf": self.inf}


@dataclass
class StreamResult:
    """What a streamed call did: rows, chunks, compilations, output statistics, time and throughput."""

    rows: int
    batch_size: int
    chunks: int
    compilations: int
    dims: dict[str, int]
    stats: list[dict[str, Any]]
    seconds: float
    output_file: str | None
    #: The outputs, when no output file was given and ``keep`` was set (concatenated in memory).
    leaves: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "batch_size": self.batch_size, "chunks": self.chunks,
                "compilations": self.compilations, "seconds": self.seconds,
                "rows_per_second": self.rows_per_second if self.seconds > 0 else None}


def call(loaded: Any, arrays: Mapping[str, Any], batch_size: int, output: str | Path | None = None, *,
         keep: bool = False, progress: Callable[[int, int], None] | None = None) -> StreamResult:
    """Call ``loaded`` on ``arrays`` (numpy arrays, memory maps or :class:`NpyRows`) in chunks of ``batch_size``
    rows of the streamed axis, writing the outputs to ``output`` (``.npy`` for one output, ``.npz``) as they come.

    ``keep`` also returns the concatenated outputs in memory (for tests and small runs). ``progress(done, total)``
    is called after each chunk with rows done and total rows.
    """
    import numpy as np

    f = loaded.function_record
    axis = streamed_axis(f, loaded.function)
    if batch_size < 1:
        raise UsageError(f"--batch-size {batch_size}: a chunk has at least one row.")
    if batch_size % axis.factor:
        raise UsageError(f"--batch-size {batch_size}: axis 0 is {axis.expression}, so a chunk must hold a multiple "
                         f"of {axis.factor} rows.")
    names = f.input_names
    missing = [n for n in names if n not in arrays]
    if missing:
        raise InputError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}.")
    rows = {n: int(arrays[n].shape[0]) if getattr(arrays[n], "shape", ()) else 0 for n in names}
    total = rows[names[0]]
    for n in names[1:]:
        if rows[n] != total:
            raise InputError(f"input {n!r} has {rows[n]} rows (axis 0) and input {names[0]!r} has {total}; streamed "
                             f"inputs share axis 0 ({axis.expression}).")
    if total % axis.factor:
        raise InputError(f"input {names[0]!r} has {total} rows, which is not {axis.expression} for any "
                         f"{axis.variable}: a multiple of {axis.factor}.")
    bounds = [(0, min(batch_size, total))] if total else []
    start = bounds[0][1] if bounds else 0
    while start < total:
        bounds.append((start, min(start + batch_size, total)))
        start += batch_size
    if not bounds:
        raise InputError(f"the inputs have 0 rows; {axis.variable} would be 0, and dimension variables are at "
                         f"least 1.")

    def chunk(lo: int, hi: int) -> dict[str, Any]:
        return {n: np.asarray(arrays[n][lo:hi]) for n in names}

    # Check the first and the last chunk before computing anything: a bound or constraint that a chunk breaks is
    # reported at once, not after hours.
    env = loaded.check(chunk(*bounds[0]))
    if len(bounds) > 1:
        loaded.check(chunk(*bounds[-1]))
    outputs = f.outputs
    out_path = Path(output) if output is not None else None
    if out_path is not None:
        check_output_path(out_path, [o.name for o in outputs])
    stats = [_Stats(o.name, o.dtype) for o in outputs]
    writers: list[_NpyWriter] = []
    kept: list[list[Any]] = [[] for _ in outputs]
    shapes: list[tuple[int, ...]] = []
    before = len(loaded.compiled_signatures)
    start_time = time.perf_counter()
    done = 0
    # Leaving this block without an error renames the .npy output into place; with one, every file it made is gone.
    with contextlib.ExitStack() as files:
        for lo, hi in bounds:
            run = loaded.run(chunk(lo, hi))
            if not writers and not shapes:
                shapes = [(total, *np.shape(v)[1:]) for _, v in run.leaves]
                if out_path is not None:
                    writers = _writers(files, out_path, shapes, [np.asarray(v).dtype for _, v in run.leaves])
            for i, (_, value) in enumerate(run.leaves):
                if np.shape(value)[0] != hi - lo:
                    raise UsageError(f"output {outputs[i].name!r} has {np.shape(value)[0]} rows for a chunk of "
                                     f"{hi - lo}; it cannot be streamed.")
                stats[i].add(value)
                if writers:
                    writers[i].write(value)
                if keep:
                    kept[i].append(np.asarray(value))
            done = hi
            if progress:
                progress(done, total)
        if out_path is not None and out_path.suffix.lower() != ".npy":
            _pack(out_path, [w.file for w in writers], [o.name for o in outputs])
    seconds = time.perf_counter() - start_time
    env = dict(env)
    env[axis.variable] = total // axis.factor
    result = StreamResult(total, batch_size, len(bounds), len(loaded.compiled_signatures) - before, env,
                          [s.as_dict(shape) for s, shape in zip(stats, shapes)], seconds,
                          str(out_path) if out_path is not None else None)
    if keep:
        result.leaves = [(o.name, np.concatenate(parts)) for o, parts in zip(outputs, kept)]
    return result


def _writers(files: contextlib.ExitStack, path: Path, shapes: list[tuple[int, ...]],
             dtypes_: list[Any]) -> list[_NpyWriter]:
    """The writers of the outputs, their files entered into ``files``: the ``.npy`` output's own temporary file
    (``atomic_output``), or one anonymous scratch file per output of an ``.npz``."""
    if path.suffix.lower() == ".npy":
        return [_NpyWriter(files.enter_context(atomic_output(path)), path, shapes[0], dtypes_[0])]
    return [_NpyWriter(files.enter_context(scratch_file(path)), path, s, d) for s, d in zip(shapes, dtypes_)]


def _pack(path: Path, scratch: list[BinaryIO], names: list[str]) -> None:
    """Pack the outputs written to the ``scratch`` files into the ``.npz`` at ``path``, atomically."""
    import shutil
    import zipfile

    def write(f: Any) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, src in zip(names, scratch):
                src.seek(0)
                with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                    shutil.copyfileobj(src, member, 1 << 20)

    atomic_write(path, write)
