"""The rows of a batch stacked into input arrays: the one place where the batch engines' adapters (``jaxport.ray``,
``jaxport.beam``, ``jaxport.spark``) turn what an engine hands them (a numpy column, a pandas Series, Beam's
examples) into one array per input, refusing a bad row with an ``InputError`` that names the column, the row and
what the row holds. Numpy only: no JAX, no engine (pandas values are read through their ``to_numpy``).

A column is a numeric array (one row per index of axis 0) or a sequence of cells, one per row (an object column of
pandas or Arrow, Beam's examples). A cell is a number, a numpy array or scalar, a list or tuple of numbers (nested:
a list of rows), or an array-like (``__array__``). Refused, with the row: ``None`` and pandas' missing values
(``pd.NA``, ``pd.NaT``), a dict, a str, bytes, a ragged list, a list holding anything but numbers, any other object,
and a cell whose shape differs from the other rows' (from the input's shape past axis 0 where it is fixed).

NaN. A NaN value of a float input is a value like any other: the function decides what it means. A NaN cell is
refused where it cannot be a value: where rows hold arrays (pandas fills a missing cell of an object column with
NaN) and in an integer or bool input (pandas stores an integer column with a missing cell as float64, the missing
cell NaN; Spark hands an integer column with a null the same way). A NaN cell of a float input whose rows are
scalars passes: neither pandas nor Spark (whose null float reaches the UDF as NaN) tells it from a missing value.
Give missing values as ``pd.NA`` (a nullable ``Float64`` column) to have them refused.

Dtypes: a column is converted to its input's dtype when every value is kept, the rule of ``call --cast``
(``inputs.as_dtype``, ``inputs.first_changed``): Python lists and numbers (int64 and float64 in numpy), Spark's
doubles holding float32 values, int64 ids below 2**31 for an int32 input. A value that would change is refused
with its row. A PRNG key input, and a column of a dtype jaxport does not know, are left to the artifact's checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .. import dtypes
from ..artifact.model import Input
from ..errors import InputError
from ..run.values.inputs import as_dtype, first_changed

__all__ = ["Column", "batch_columns", "column_of", "example_columns", "stack_column"]

_NUMBERS = (bool, int, float, complex)
_DROP = "drop or fill the missing rows"


class Column:
    """How one input's column is stacked and named in messages: ``where`` (``"column 'x'"``), the input's dtype
    (None: no conversion), its shape past axis 0 with None for a variable axis (None: the rows' own), whether a
    row may hold its values flat (Spark's arrays), and ``row``, the format of a row's name (``"row {}"``)."""

    def __init__(self, where: str, dtype: str | None = None, row_shape: Sequence[int | None] | None = None, *,
                 flat: bool = False, row: str = "row {}"):
        self.where, self.row, self.flat = where, row, flat
        self.dtype = dtype if dtype in dtypes.BY_NAME and not dtypes.is_key(dtype) else None
        self.row_shape = None if row_shape is None else tuple(row_shape)
        #: The rows' shape when the input fixes every axis past axis 0.
        self.fixed: tuple[int, ...] | None = None
        if self.row_shape is not None and None not in self.row_shape:
            self.fixed = tuple(int(d) for d in self.row_shape if d is not None)

    def named(self, row: str) -> Column:
        """This column with rows named by ``row`` (``"row {} of partition 3"``)."""
        return Column(self.where, self.dtype, self.row_shape, flat=self.flat, row=row)

    def error(self, i: int, found: str) -> InputError:
        return InputError(f"{self.where}, {self.row.format(i)}: {found}.")


def column_of(inp: Input, where: str | None = None, *, flat: bool = False, row: str = "row {}") -> Column:
    """The :class:`Column` of input ``inp``: its dtype, and its shape past axis 0 when axis 0 is a dimension
    variable (the batch axis), fixed axes as ints."""
    shape = None
    if inp.shape and isinstance(inp.shape[0], str):
        shape = [d if isinstance(d, int) else None for d in inp.shape[1:]]
    return Column(where or f"column {inp.name!r}", inp.dtype, shape, flat=flat, row=row)


def _shape(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _a(noun: str) -> str:
    """``noun`` after its indefinite article (``a uint8``: said "you-int")."""
    return f"{'an' if noun[:1] in 'aeiou' and not noun.startswith('uint') else 'a'} {noun}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _missing(cell: Any) -> str | None:
    """What a missing-value marker is (pandas' ``NA``, ``NaT``), or None; pandas is not imported to tell."""
    name = type(cell).__name__
    if name in ("NAType", "NaTType") and type(cell).__module__.startswith("pandas"):
        return f"a missing value (pandas' {'NA' if name == 'NAType' else 'NaT'})"
    return None


def _is_nan(cell: Any) -> bool:
    import numpy as np

    return isinstance(cell, (float, np.floating)) and bool(np.isnan(cell))


def _leaf(value: Any) -> str:
    """What a value that is no number is, inside a list or array."""
    if value is None:
        return "None"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"the integer {_short(value)} (too large for any integer dtype)"
    kind = "a dict" if isinstance(value, Mapping) else "a list" if isinstance(value, (list, tuple)) else \
        _a(type(value).__name__)
    return _missing(value) or (f"a str {_short(value)}" if isinstance(value, str) else
                               f"bytes {_short(value)}" if isinstance(value, (bytes, bytearray)) else kind)


def _as_array(cell: Any) -> Any:
    """A cell as a numeric numpy array, or the text saying what it is instead."""
    import numpy as np

    missing = _missing(cell)
    if cell is None or missing:
        return missing or "None"
    if isinstance(cell, (str, bytes, bytearray, memoryview, Mapping)):
        return _leaf(bytes(cell) if isinstance(cell, memoryview) else cell)
    if not isinstance(cell, (np.ndarray, np.generic, list, tuple, *_NUMBERS)) and not hasattr(cell, "__array__"):
        return _a(type(cell).__name__)
    try:
        a = np.asarray(cell)
        if a.dtype == object and a.size:  # an object array of equal arrays (Arrow's nested lists), or a mix
            a = np.asarray(a.tolist())
    except Exception as e:  # noqa: BLE001 - numpy's own errors, or an array-like's __array__
        if "inhomogeneous" in str(e):
            return f"a ragged {'list' if isinstance(cell, (list, tuple)) else 'array'} (its items have different " \
                   f"lengths)"
        return f"{_a(type(cell).__name__)} that is no array of numbers ({str(e)[:120]})"
    if a.dtype == object:
        what = "list" if isinstance(cell, (list, tuple)) else "array"
        leaves = list(zip(np.ndindex(a.shape), a.reshape(-1)))
        numbers = (*_NUMBERS, np.number, np.bool_)
        # what is no number first; else a Python int that no integer dtype holds made the array one of objects
        for index, value in [*[(k, v) for k, v in leaves if not isinstance(v, numbers)],
                             *[(k, v) for k, v in leaves if type(v) is int and not -2**63 <= v < 2**64]]:
            return f"{_a(what)} holding {_leaf(value)}{f' at {list(index)}' if index else ''}"
        return f"a {what} of mixed numbers numpy holds as objects"
    if a.dtype.kind in "USVMm" and a.dtype.fields is None and not (a.dtype.kind == "V" and a.dtype.itemsize <= 2):
        held = "strings" if a.dtype.kind == "U" else "bytes" if a.dtype.kind == "S" else f"values of dtype {a.dtype}"
        return f"{'a list' if isinstance(cell, (list, tuple)) else 'an array'} of {held} ({_short(cell)})"
    if a.dtype.fields is not None:
        return f"a structured array (dtype {a.dtype})"
    return a


def _described(col: Column, cell: Any, a: Any) -> str:
    """A good cell, as a message names it beside the shape the rows need."""
    if col.flat and a.ndim == 1:
        return f"an array of {a.shape[0]} values"
    if a.ndim == 0:
        return f"a single value {_short(a.item())}"
    if isinstance(cell, (list, tuple)):
        return f"a list of {a.shape[0]} values" if a.ndim == 1 else f"a nested list of shape {_shape(a.shape)}"
    return f"an array of shape {_shape(a.shape)}"


def _reference(col: Column, shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], bool]:
    """The shape every row must have, and how a message says where it comes from: the input's (fixed) shape past
    axis 0, else the shape most rows have (ties: the earliest)."""
    if col.fixed is not None:
        return col.fixed, True
    counts = Counter(shapes)
    best = max(counts.values())
    shape = next(s for s in shapes if counts[s] == best)
    return shape, False


def _mismatch(col: Column, shapes: list[tuple[int, ...]], i: int, reference: tuple[int, ...], declared: bool) -> str:
    """Where the shape a row should have comes from: the input's declaration, or the other rows."""
    import math

    if declared and reference == ():
        return "where the input's rows are single values"
    if declared and col.flat:
        return f"where the input's rows hold {math.prod(reference)} values (shape {_shape(reference)}, flat or not)"
    if declared:
        return f"where the input's rows have shape {_shape(reference)}"
    if i and all(s == reference for s in shapes[:i]):
        rows = "row 0 has" if i == 1 else f"rows 0..{i - 1} have"
        return f"where {rows} shape {_shape(reference)}"
    same = sum(1 for s in shapes if s == reference)
    return f"where {same} of the {len(shapes)} rows have shape {_shape(reference)}"


def _fits(col: Column, a: Any, reference: tuple[int, ...]) -> bool:
    import math

    if tuple(a.shape) == reference:
        return True
    return col.flat and a.ndim <= 1 and a.size == math.prod(reference)


def _cast(col: Column, a: Any, first_row: int, rows_axis: bool = True) -> Any:
    """``a`` as the column's dtype when every value is kept; InputError naming the row (and element) of the first
    value that would change. ``rows_axis``: axis 0 of ``a`` is the rows (else ``a`` is row ``first_row``)."""
    have, want = str(a.dtype), col.dtype
    if want is None or have == want or have not in dtypes.BY_NAME or dtypes.is_key(have):
        return a
    converted = as_dtype(a, want)
    if dtypes.safe_cast(have, want):
        return converted
    changed = first_changed(a, converted)
    if changed is None:
        return converted
    index, before, after = changed
    row, rest = (index[0], index[1:]) if rows_axis and index else (0, index)
    at = f" at {list(rest)}" if rest else ""
    kind = dtypes.BY_NAME[want].kind
    if before in ("nan", "-nan") and kind in ("int", "uint", "bool"):
        raise col.error(first_row + row, f"NaN{at} in {'a bool' if kind == 'bool' else 'an integer'} column "
                        f"({want}): pandas stores a missing value of an integer column as NaN (and Spark a null); "
                        f"drop or fill the missing rows")
    raise col.error(first_row + row, f"{before} ({have}){at} is not {_a(want)} value (it would become {after}); "
                    f"give the column as {want}, or convert it yourself if that change is what you mean")


def stack_column(values: Any, col: Column, *, first_row: int = 0) -> Any:
    """One input's array from a column's values (a numpy array, a pandas Series, a sequence of cells): the rows
    stacked along axis 0 and converted to the input's dtype (see the module docstring). ``first_row``: the index a
    message gives the column's first row. Raises InputError naming the first bad row."""
    import numpy as np

    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        if hasattr(values, "isna") and not isinstance(getattr(values, "dtype", None), np.dtype):
            # a pandas extension dtype (Int64, Float64, boolean, Arrow's): its NA is a missing value, which
            # to_numpy would give as NaN
            missing = np.flatnonzero(np.asarray(values.isna(), bool))
            if len(missing):
                raise col.error(first_row + int(missing[0]), f"a missing value (pandas' NA); {_DROP}")
        values = values.to_numpy()
    if isinstance(values, np.ndarray) and values.dtype != object:
        return _numeric(values, col, first_row)
    if not isinstance(values, (np.ndarray, list, tuple)):
        raise InputError(f"{col.where}: a {type(values).__name__}, not a column (an array, a pandas Series or a "
                         f"list with one value per row).")
    stacked = _stacked_arrays(values)
    if stacked is not None:
        return _numeric(stacked, col, first_row)
    cells = list(values.tolist() if isinstance(values, np.ndarray) and values.ndim > 1 else values)
    if not cells:
        return np.zeros((0, *(col.fixed or ())), dtypes.to_numpy(col.dtype) if col.dtype else np.float32)
    arrays = []
    for i, cell in enumerate(cells):
        a = _as_array(cell)
        if isinstance(a, str):
            fix = _DROP if cell is None or _missing(cell) else \
                "a row holds a number or an array of numbers"
            raise col.error(first_row + i, f"{a}; {fix}")
        arrays.append(a)
    shapes = [tuple(a.shape) for a in arrays]
    reference, source = _reference(col, shapes)
    nan_cell = next((i for i, c in enumerate(cells) if _is_nan(c)), None)
    if nan_cell is not None and reference != ():
        where = _mismatch(col, shapes, nan_cell, reference, source)
        raise col.error(first_row + nan_cell, f"NaN, a missing cell ({where}): pandas fills a missing cell of a "
                                              f"column of arrays with NaN; drop or fill the missing rows")
    for i, a in enumerate(arrays):
        if not _fits(col, a, reference):
            where = _mismatch(col, shapes, i, reference, source)
            raise col.error(first_row + i, f"{_described(col, cells[i], a)} {where}; every row of an input has one "
                                           f"shape")
    if len({a.dtype for a in arrays}) > 1 and col.dtype is not None:  # each row converted apart: no promotion first
        arrays = [_cast(col, a, first_row + i, rows_axis=False) for i, a in enumerate(arrays)]
    stacked = np.stack([a.reshape(reference) for a in arrays])
    return _cast(col, stacked, first_row)


def _stacked_arrays(values: Any) -> Any:
    """The rows stacked in one numpy call where every cell is a numpy array of one dtype and shape (what Arrow
    gives a Spark or Ray column of arrays: 4x faster than checking cell by cell), else None (the cells are checked
    one by one, and a bad one is named)."""
    import numpy as np

    if not len(values) or type(values[0]) is not np.ndarray:
        return None
    first = values[0]
    dtype, shape = first.dtype, first.shape
    if dtype.kind == "O" or not all(type(c) is np.ndarray and c.dtype == dtype and c.shape == shape for c in values):
        return None
    return np.stack(values)


def _numeric(array: Any, col: Column, first_row: int) -> Any:
    """A column that numpy already holds as one array: its dtype checked and converted, Spark's flat rows
    reshaped, its rows' shape checked against the input's (row ``first_row`` named: every row has that shape)."""
    import math

    import numpy as np

    if array.ndim == 0:
        raise InputError(f"{col.where}: a single value ({_short(array.item())}), not a column with one value per "
                         f"row.")
    if array.dtype.kind in "USMm" or array.dtype.fields is not None:
        held = "strings" if array.dtype.kind == "U" else "bytes" if array.dtype.kind == "S" else \
            f"values of dtype {array.dtype}"
        first = f" ({col.row.format(first_row)}: {_short(array[0].tolist())})" if len(array) else ""
        raise InputError(f"{col.where}: the column holds {held}{first}, not numbers.")
    rest = tuple(array.shape[1:])
    if col.fixed is not None and rest != col.fixed and (
            not len(array) or col.flat and math.prod(rest) == math.prod(col.fixed)):
        array = array.reshape([len(array), *col.fixed])  # Spark's flat rows, or an empty column
    elif col.dtype is not None and col.row_shape is not None and len(array) and (
            len(rest) != len(col.row_shape) or any(d is not None and d != r for d, r in zip(col.row_shape, rest))):
        where = _mismatch(col, [], 0, col.fixed, True) if col.fixed is not None else \
            f"where the input's rows have {len(col.row_shape)} ax{'i' if len(col.row_shape) == 1 else 'e'}s"
        raise col.error(first_row, f"{_described(col, None, np.asarray(array[0]))} {where}; every row of an input "
                                   f"has one shape")
    return _cast(col, np.asarray(array), first_row)


def example_columns(examples: Sequence[Any], inputs: Sequence[Input]) -> dict[str, Any]:
    """Beam's examples (each one row: an array for a function of one input, a dict of arrays by input name) as
    one array per input; InputError naming the example and the key that is missing or unknown."""
    names = [i.name for i in inputs]
    rows = list(examples)
    if not rows:
        return {}
    by_name = any(isinstance(r, Mapping) for r in rows)
    if not by_name and len(names) != 1:
        raise InputError(f"the function takes {len(names)} inputs ({', '.join(names)}); give each example as a "
                         f"dict of arrays by input name.")
    if not by_name:
        return {names[0]: stack_column(rows, column_of(inputs[0], f"input {names[0]!r}",
                                                       row="example {} of the batch"))}
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            first = next(k for k, e in enumerate(rows) if isinstance(e, Mapping))
            raise InputError(f"example {i} of the batch is of type {type(r).__name__}, and example {first} a dict: "
                             f"give every example as a dict of arrays by input name.")
        missing = [n for n in names if n not in r]
        if missing:
            raise InputError(f"example {i} of the batch has no {', '.join(map(repr, missing))} (it has "
                             f"{', '.join(map(_short, r)) or 'nothing'}); give every input by name.")
        unknown = [k for k in r if k not in names]
        if unknown:
            raise InputError(f"example {i} of the batch has {', '.join(map(_short, unknown))}, which the function "
                             f"does not take (its inputs: {', '.join(names)}); give only inputs (carry other values "
                             f"in a KeyedModelHandler's key).")
    return {i.name: stack_column([r[i.name] for r in rows], column_of(i, f"input {i.name!r}",
                                                                     row="example {} of the batch"))
            for i in inputs}


def batch_columns(columns: Mapping[str, Any], inputs: Sequence[Input],
                  renamed: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A batch given as columns (Ray's numpy or pandas batches) as one array per input: input ``name`` from column
    ``renamed.get(name, name)``; InputError naming a missing column, or the column and row of a bad cell."""
    out = {}
    for inp in inputs:
        name = inp.name
        column = (renamed or {}).get(name, name)
        if column not in columns:
            have = ", ".join(map(_short, list(columns)[:12])) or "none"
            raise InputError(f"the batch has no column {column!r} for input {name!r} (it has {have}); name the "
                             f"column after the input, or map it (columns={{{name!r}: 'COLUMN'}}).")
        where = f"column {column!r}" + (f" (input {name!r})" if column != name else "")
        out[name] = stack_column(columns[column], column_of(inp, where, row="row {} of the batch"))
    return out
