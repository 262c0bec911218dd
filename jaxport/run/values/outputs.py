"""What a call produced: output statistics, JSON values and output files (``report`` puts them in the report
``call --json`` prints)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ... import dtypes
from ..._fsio import atomic_write, check_output
from ...arrayfiles import safetensors as safetensors_file
from ...errors import OutputError
from . import keys
from .npyio import safe_member


class Stats(NamedTuple):
    """Name, shape, dtype, size, min, max and mean (of the finite values) and the NaN/Inf counts of an array: an
    entry of the report's ``outputs`` (:meth:`to_json`; :meth:`from_json` reads one back)."""

    name: str
    shape: list[int]
    dtype: str
    size: int
    min: float | int | None
    max: float | int | None
    mean: float | None
    nan: int
    inf: int

    @classmethod
    def of(cls, name: str, value: Any) -> Stats:
        """The statistics of the array ``value``."""
        import numpy as np

        a = np.asarray(value)
        kind = dtypes.BY_NAME[str(a.dtype)].kind if str(a.dtype) in dtypes.BY_NAME else a.dtype.kind
        lo: float | int | None = None
        hi: float | int | None = None
        mean: float | None = None
        nan = inf = 0
        if kind in ("float", "complex"):
            wide = a.astype(np.complex128 if kind == "complex" else np.float64)
            nan, inf = int(np.isnan(wide).sum()), int(np.isinf(wide).sum())
            if kind == "float":
                finite = wide[np.isfinite(wide)]
                if finite.size:
                    lo, hi, mean = float(np.min(finite)), float(np.max(finite)), float(finite.mean())
        elif a.size:
            wide = a.astype(np.int64 if kind != "uint" else np.uint64)
            lo, hi, mean = int(np.min(wide)), int(np.max(wide)), float(wide.mean())
        return cls(name, list(a.shape), str(a.dtype), int(a.size), lo, hi, mean, nan, inf)

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> Stats:
        """The statistics of a report's ``outputs`` entry (its ``values``, if any, left out)."""
        return cls(*(entry[f] for f in cls._fields))

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def stats(name: str, value: Any) -> dict[str, Any]:
    """:class:`Stats` of an array, as the report's ``outputs`` entry."""
    return Stats.of(name, value).to_json()


def output_entries(leaves: list[tuple[str, Any]], values_up_to: int | None = None) -> list[dict[str, Any]]:
    """The report's ``outputs``: :func:`stats` of each output; with ``values_up_to``, outputs of at most that many
    elements carry their values (larger ones ``None``)."""
    entries = []
    for name, value in leaves:
        s = Stats.of(name, value)
        shown = {} if values_up_to is None else {"values": jsonable(value) if s.size <= values_up_to else None}
        entries.append({**s.to_json(), **shown})
    return entries


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


#: Dtypes that a ``.npy`` header cannot name: numpy stores them as raw void bytes (``|V2``, ``|V1``).
NOT_IN_NPY = dtypes.NOT_IN_NPY


def raw_in_npy(leaves: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """The (name, dtype) of each output that a ``.npz`` or ``.npy`` file can only store as raw void bytes."""
    return [(n, str(getattr(v, "dtype", ""))) for n, v in leaves if str(getattr(v, "dtype", "")) in NOT_IN_NPY]


def raw_warning(path: str | Path, raw: list[tuple[str, str]], streamed: bool = False) -> str:
    """The warning for writing reduced-precision outputs to ``.npz``/``.npy``: plain numpy cannot use them
    (``streamed``: by ``call --batch-size``, which writes neither ``.safetensors`` nor converted outputs)."""
    shown = ", ".join(f"{n!r} ({d})" for n, d in raw[:5]) + (", ..." if len(raw) > 5 else "")
    floats = any(dtypes.BY_NAME[d].kind == "float" for _, d in raw)
    if all(safetensors_file.tag_of(d) is not None for _, d in raw):
        fix = f"{'without --batch-size, ' if streamed else ''}write .safetensors to keep the dtype, or add " \
              f"--output-dtype f32"
    else:  # int4, uint4: no other file format names them
        untagged = sorted({d for _, d in raw if safetensors_file.tag_of(d) is None})
        fix = (f"{' and '.join(untagged)} {'has' if len(untagged) == 1 else 'have'} no dtype in .safetensors either"
               + (f"; {'without --batch-size, ' if streamed else ''}--output-dtype f32 converts the float outputs"
                  if floats else ""))
    return (f"{path}: {shown} stored as raw void bytes, which plain numpy cannot use (jaxport and "
            f"array.view(ml_dtypes.<type>) can); {fix}.")


def cast_outputs(leaves: list[tuple[str, Any]], dtype: str) -> list[tuple[str, Any]]:
    """The outputs with every real floating-point one converted to ``dtype`` (``float32``); others unchanged."""
    target = dtypes.to_numpy(dtype)
    out = []
    for name, value in leaves:
        kind = dtypes.BY_NAME.get(str(getattr(value, "dtype", "")))
        out.append((name, value.astype(target) if kind is not None and kind.kind == "float" else value))
    return out


def save_outputs(path: str | Path, leaves: list[tuple[str, Any]]) -> None:
    """Write outputs atomically: ``.npz`` keyed by output name, ``.safetensors`` keyed by output name (keeping
    ``bfloat16`` and ``float8`` as such), or ``.npy`` for a single output."""
    import zipfile

    import numpy as np

    path = Path(path)
    check_output_path(path, [n for n, _ in leaves], [str(np.asarray(v).dtype) for _, v in leaves], safetensors=True)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        atomic_write(path, lambda f: np.lib.format.write_array(f, np.asarray(leaves[0][1]), allow_pickle=False))
        return
    if suffix == ".safetensors":
        atomic_write(path, lambda f: safetensors_file.write(f, {n: np.asarray(v) for n, v in leaves}))
        return

    def write(f: Any) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, value in leaves:
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                with zf.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)

    try:
        atomic_write(path, write)
    except ValueError as e:  # numpy refuses an array it would have to pickle
        raise OutputError(f"{path}: cannot write the outputs: {e}.") from None


def save_arrays(path: str | Path, arrays: Mapping[str, Any]) -> None:
    """Write named arrays (``call --save-inputs``) to an ``.npz`` keyed by name, atomically, with fixed timestamps:
    the same arrays give the same bytes, and ``call --inputs`` reads the file back. A typed PRNG key array is written
    as its key data (``uint32``, ``jax.random.key_data``), which ``--inputs`` turns back into keys."""
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise OutputError(f"{path}: inputs are saved as an .npz keyed by input name; give a name ending in .npz.")
    save_outputs(path, [(name, keys.key_data(value)) for name, value in arrays.items()])


def check_output_path(path: str | Path, names: list[str], dtypes_: list[str] | None = None, *,
                      safetensors: bool = False) -> None:
    """Refuse an output file that cannot hold these outputs (``dtypes_``: their dtypes, when known), or that
    jaxport must not write (``check_output``: not a regular file, or a file the command reads), before running
    anything. ``.safetensors`` is accepted only with ``safetensors`` (a streamed call writes .npy/.npz)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".npy") and not (safetensors and suffix == ".safetensors"):
        also = ", .safetensors (all outputs, keyed by name, with native bfloat16 and float8)" if safetensors else ""
        raise OutputError(f"{path}: the output file must end in .npz (all outputs, keyed by name){also} or .npy "
                          f"(a single output).")
    if suffix == ".npy" and len(names) != 1:
        raise OutputError(f"{path}: a .npy file holds one array, but the function has {len(names)} outputs "
                          f"({', '.join(names)}); write an .npz instead.")
    if suffix == ".safetensors":
        if safetensors_file.METADATA in names:
            raise OutputError(f"{path}: an output is named {safetensors_file.METADATA!r}, the key a .safetensors "
                              f"header reserves for its metadata; write .npz instead.")
        odd = [(n, d) for n, d in zip(names, dtypes_ or []) if safetensors_file.tag_of(d) is None]
        if odd:
            raise OutputError(f"{path}: .safetensors has no dtype for output {odd[0][0]!r} ({odd[0][1]}); write .npz "
                              f"instead.")
    else:
        for name in names:
            if not safe_member(f"{name}.npy"):
                raise OutputError(f"{path}: output name {name!r} is not a safe .npz member name.")
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name ending in {suffix}.")
    check_output(path)
