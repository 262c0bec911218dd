"""Inputs of ``call``: the arrays that ``--inputs`` names, matched to a function's inputs, and random inputs
generated from the signature. The files are read by :mod:`.npyio`, which trusts none of them. No JAX, except for
typed PRNG key inputs, which :mod:`.keys` makes from a seed or from the key data a file holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import dimexpr, dtypes
from ..._fsio import open_for_reading
from ...arrayfiles.npy import check_size
from ...artifact.contract import ArrayInfo, check, concrete_shape, input_names, parsed_shape, unknown_input_error
from ...artifact.model import Function, Input
from ...artifact.summary import array_type
from ...errors import FormatError, InputError
from . import keys, treefiles
from .npyio import (
    Expected,
    check_fits,
    final_dtype,
    physical_memory,
    read_header,
    read_named_arrays,
    read_npy,
    read_npz,
)
from .numbers import as_dtype, python_scalar, value_array
from .ranges import check_range, check_ranges, draw, resolved

__all__ = ["as_dtype", "cast_inputs", "check_files", "check_ranges", "classify", "first_changed", "gather",
           "missing_error", "python_scalar", "random_inputs", "value_array", "weak_inputs", "weak_value"]

#: The kinds of dtype a weakly typed input takes an array of (converted to its own where every value is kept).
_NUMBER_KINDS = ("int", "uint", "float")


def _typed(inp: Input) -> str:
    """``f32[batch, 784]``: an input's type, as messages show it."""
    return array_type(inp)


def _expected(fn: Function) -> dict[str, Expected]:
    """What each input's file should hold, for ``npyio.check_fits``: a key input holds its key data
    (``keys.data_input``)."""
    bounds = fn.bounds
    return {i.name: Expected(keys.data_input(i) if keys.is_key_input(i) else i, bounds) for i in fn.inputs}


# --- matching files to inputs ----------------------------------------------------------------------------------


def missing_error(fn: Function, missing: list[str]) -> InputError:
    """The error for inputs that ``--inputs`` left out, saying how to give them."""
    by_name = {i.name: i for i in fn.inputs}
    listed = ", ".join(f"{n!r} ({_typed(by_name[n])})" for n in missing)
    if len(missing) == 1:
        seed = f" (a PRNG key: {missing[0]}=seed:N makes it from a seed)" if keys.is_key_input(by_name[missing[0]]) \
            else ""
        return InputError(f"missing input {listed}: give it with --inputs {missing[0]}=FILE.npy{seed}, or use "
                          f"--random.")
    trees = [t for t, below in treefiles.tree_inputs(fn).items()
             if all(f"{t}/{k}" in missing for k in below) and "/" not in t]
    whole = f"; a pytree argument at once with --inputs {trees[0]}=FILE.npz (keyed by the leaf paths below " \
        f"{trees[0]!r}, as jaxport.save_inputs writes it)" if trees else ""
    return InputError(f"missing inputs {listed}: give each with --inputs NAME=FILE.npy (or all in one .npz){whole}, "
                      f"or use --random.")


def classify(fn: Function, items: list[str], *, trees: bool = False) -> tuple[list[str], dict[str, str], list[str]]:
    """Split ``--inputs`` values into positional files, ``NAME=FILE`` pairs and files keyed by input name (``.npz``,
    and ``.safetensors`` with ``trees``).

    ``NAME=FILE`` is recognised when NAME is an input name (with ``trees``, also a pytree argument's name:
    ``treefiles``), or when the text has an ``=`` and is not an existing file; a file whose name contains ``=`` can
    be given as ``./a=b.npy``.
    """
    names = input_names(fn)
    known = [*names, *treefiles.tree_inputs(fn)] if trees else names
    positional: list[str] = []
    named: dict[str, str] = {}
    npz: list[str] = []
    for text in items:
        name, eq, file = text.partition("=")
        if eq and (name in known or not Path(text).exists()):
            if name not in known:
                raise unknown_input_error(name, names, f" (in --inputs {text})")
            if name in named:
                raise InputError(f"input {name!r} is given twice: {named[name]} and {file}.")
            named[name] = file
        elif text.lower().endswith((".npz", ".safetensors") if trees else ".npz"):
            npz.append(text)
        else:
            positional.append(text)
    return positional, named, npz


def _locate(fn: Function, items: list[str]
            ) -> tuple[dict[str, str], dict[str, Any], dict[str, str], dict[str, int]]:
    """The ``--inputs`` values matched to inputs: the ``.npy`` file of each input given one (not read yet), the arrays
    of the ``.npz`` files (read: each member's header is checked before its data), every source, and the key inputs
    given as ``seed:N``. Raises what does not fit: an input given twice, too many files, an unknown name."""
    positional, named, npz = classify(fn, items, trees=True)
    trees = treefiles.tree_inputs(fn)
    expect = _expected(fn)
    # a key input's file holds uint32 key data
    declared = {i.name: "uint32" if keys.is_key_input(i) else i.dtype for i in fn.inputs}
    by_name = {i.name: i for i in fn.inputs}
    names = list(declared)
    seeds: dict[str, int] = {}

    def seeded(name: str, text: str, literal: bool) -> bool:
        """Whether ``text`` gives input ``name`` as ``seed:N``: always for a key input given by name, else when no
        file has that name (``./seed:1`` names the file)."""
        seed = keys.seed_of(text)
        is_key = keys.is_key_input(by_name[name])
        if seed is None or ((literal or not is_key) and Path(text).exists()):
            return False
        if not is_key:
            raise InputError(f"--inputs {name}={text}: a seed makes PRNG keys, but input {name!r} is "
                             f"{_typed(by_name[name])}; give it a file.")
        seeds[name] = seed
        return True

    if positional and (named or npz):
        raise InputError("give --inputs either all by position (FILE.npy, in the order 'inspect' lists the "
                         "inputs) or all by name (NAME=FILE.npy, or an .npz keyed by input names), not both.")
    files: dict[str, str] = {}
    arrays: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if positional:
        if len(positional) > len(names):
            shown = ", ".join(names) or "none"
            raise InputError(f"too many inputs: {len(positional)} files given, but the function takes "
                             f"{len(names)} input{'s' if len(names) != 1 else ''} ({shown}); "
                             f"'{positional[len(names)]}' has no input to go to.")
        for name, file in zip(names, positional):
            if not seeded(name, file, literal=True):
                files[name] = sources[name] = file
    def add(found: Mapping[str, Any], where: Mapping[str, str]) -> None:
        for name, arr in found.items():
            if name in sources:
                raise InputError(f"input {name!r} is given twice: {sources[name]} and {where[name]}.")
            arrays[name] = arr
            sources[name] = where[name]

    for file in npz:
        found = read_npz(file, declared, expect) if file.lower().endswith(".npz") else _named_file(file, declared)
        add(found, {name: f"{file}[{name}]" for name in found})
    for name, file in named.items():
        if name in trees:
            add(*treefiles.read_tree_file(name, file, trees[name]))
    for name, file in named.items():
        if name in trees:
            continue
        if name in sources:
            raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
        if not seeded(name, file, literal=False):
            files[name] = sources[name] = file
    return files, arrays, sources, seeds


def _named_file(path: str, declared: Mapping[str, str]) -> dict[str, Any]:
    """The arrays of a ``.safetensors`` file keyed by input names (``declared``: name -> dtype), every key an input."""
    arrays = read_named_arrays(path, declared=declared)
    for key in arrays:
        if key not in declared:
            raise unknown_input_error(key, declared, f" (a key of {path})")
    return arrays


def gather(fn: Function, items: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Read the arrays that ``--inputs`` values name; returns ``{input name: array}`` and each array's source."""
    files, arrays, sources, seeds = _locate(fn, items)
    expect = _expected(fn)
    by_name = {i.name: i for i in fn.inputs}
    for name, file in files.items():
        inp = by_name[name]
        arrays[name] = read_npy(file, "uint32" if keys.is_key_input(inp) else inp.dtype, name, expect[name])
    for name, arr in arrays.items():
        if keys.is_key_input(by_name[name]):
            arrays[name] = keys.wrap(arr, by_name[name], sources[name])
    if seeds:
        _seed_keys(fn, arrays, sources, seeds)
    names = list(by_name)
    missing = [n for n in names if n not in arrays]
    if missing:
        raise missing_error(fn, missing)
    return {n: arrays[n] for n in names}, {n: sources[n] for n in names}


def check_files(fn: Function, items: list[str], *, cast: bool = False) -> None:
    """Check the arrays that ``--inputs`` values name against the signature (``contract.check``: structure, rank,
    dtype, dimensions, bounds, constraints) from the ``.npy`` headers, before any ``.npy`` data is read, and without
    JAX; an ``.npz`` is read (each member's header checked before its data). With ``cast``, an array of another
    dtype passes as the input's dtype: ``cast_inputs`` converts it, or says why not, once it is read.

    Raises the ``InputError`` that ``gather`` and the call's own check would raise later. Inputs whose shape only
    the other inputs give (a PRNG key made from ``seed:N``), and key data of the wrong layout, are left to those
    later checks: this one then checks nothing. A ``.npy`` whose size disagrees with its header is refused here."""
    files, arrays, sources, seeds = _locate(fn, items)
    if seeds:
        return
    expect = _expected(fn)
    missing = [i.name for i in fn.inputs if i.name not in files and i.name not in arrays]
    if missing:
        raise missing_error(fn, missing)
    infos = []
    for inp in fn.inputs:
        name = inp.name
        if name in files:
            shape, dtype = _described(files[name], name, "uint32" if keys.is_key_input(inp) else inp.dtype,
                                      expect[name])
        else:
            shape, dtype = tuple(int(d) for d in arrays[name].shape), str(arrays[name].dtype)
        if keys.is_key_input(inp):
            data = tuple(dtypes.KEYS[inp.dtype].data_shape)
            if dtype != "uint32" or len(shape) < len(data) or shape[len(shape) - len(data):] != data:
                return  # keys.wrap names the layout key data must have
            shape, dtype = shape[:len(shape) - len(data)], inp.dtype
        elif dtype != inp.dtype and dtype in dtypes.BY_NAME and \
                (cast or inp.weak and dtypes.BY_NAME[dtype].kind in _NUMBER_KINDS):
            dtype = inp.dtype  # converted once read (cast_inputs, weak_value), or refused naming the value
        infos.append(ArrayInfo(name, shape, dtype, sources[name]))
    check(fn, infos)


def _described(path: str, name: str, declared: str, expect: Expected) -> tuple[tuple[int, ...], str]:
    """The shape and dtype a ``.npy`` file's header declares (as ``read_npy`` would read it), refusing what
    ``read_npy`` refuses from the header alone, and a file whose size disagrees with its header (truncated or
    damaged) with ``read_npy``'s words: before JAX is imported, not after."""
    with open_for_reading(path, InputError, directory="a .npy file") as f:
        size = os.fstat(f.fileno()).st_size
        header = read_header(f, path)
        dtype = final_dtype(header, declared, name, path)
        check_size(header, size, path)
        check_fits(header, expect, path)
    return tuple(int(d) for d in header.shape), str(dtype)


def _seed_keys(fn: Function, arrays: dict[str, Any], sources: dict[str, str], seeds: Mapping[str, int]) -> None:
    """Make the key inputs given as ``seed:N`` (in place), at the shape the other inputs' dimensions give them."""
    shapes = [(i.name, parsed_shape(i), list(arrays[i.name].shape)) for i in fn.inputs if i.name in arrays]
    env, _, _ = dimexpr.solve(shapes)  # conflicts are the signature check's to report
    for inp in fn.inputs:
        name = inp.name
        if name not in seeds:
            continue
        unknown = sorted({v for d in parsed_shape(inp) if not isinstance(d, int) for v in dimexpr.variables(d)}
                         - env.keys())
        if unknown:
            raise InputError(f"--inputs {name}=seed:{seeds[name]}: the shape of input {name!r} "
                             f"({_typed(inp)}) names {', '.join(map(repr, unknown))}, which no other input "
                             f"gives; give the keys' data in a file instead.")
        try:
            shape = concrete_shape(inp, env)
        except dimexpr.DimExprError as e:
            raise InputError(f"--inputs {name}=seed:{seeds[name]}: the shape of input {name!r} cannot be evaluated: "
                             f"{e}.") from None
        arrays[name] = keys.from_seed(inp, shape, seeds[name])
        sources[name] = f"seed {seeds[name]}"


# --- random inputs ---------------------------------------------------------------------------------------------


def random_inputs(fn: Function, dims: Mapping[str, int], seed: int = 0, *, nonnegative: bool = False,
                  ranges: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Deterministic random arrays for a function's inputs at the given dimension values, in manifest order.

    Each input is drawn from ``ranges[name]`` (``(LO, HI)``, half-open) when given, else from the ``range`` its
    manifest entry declares (a spec's ``range:``), else from the defaults: floats standard normal, integers
    (signed or not) uniform in [0, 8), bools fair coin flips. A float range is uniform, an integer range gives
    LO..HI-1; see :mod:`.ranges` for what is refused (``UsageError`` for ``ranges``, ``FormatError`` for a manifest
    range). A typed PRNG key input gets keys made from ``seed + K`` (``K`` counting the key inputs before it), as
    ``keys.from_seed`` makes them, and draws nothing from the generator. ``nonnegative`` is kept for callers that
    asked for non-negative integers, which every integer default now is: valid indices into any axis of at least 8,
    whose pairwise products fit in int8.
    """
    import numpy as np

    del nonnegative  # every default integer is non-negative
    check_ranges(fn, ranges)
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    made_keys = 0
    for inp in fn.inputs:
        shape = concrete_shape(inp, dims)
        if keys.is_key_input(inp):
            out[inp.name] = keys.from_seed(inp, shape, seed + made_keys)
            made_keys += 1
            continue
        count = 1
        for n in shape:
            count *= n
        total = physical_memory()
        if any(n < 0 for n in shape) or (total and count * 16 > total):  # generated as 64-bit, then converted
            raise InputError(f"a random input {inp.name!r} of shape {shape} would not fit in this machine's "
                             f"memory; choose smaller dimensions with --dim NAME=VALUE.")
        # a bound may be a dimension expression ([0, nodes]): its value at these dimensions
        if ranges and inp.name in ranges:
            bounds = check_range(inp, resolved(ranges[inp.name], dims), "--range")
        elif inp.range is not None:
            bounds = check_range(inp, resolved(list(inp.range), dims), "the artifact's manifest", FormatError)
        else:
            bounds = None
        try:
            arr = draw(rng, inp, shape, bounds)
        except (MemoryError, ValueError, OverflowError):
            raise InputError(f"not enough memory for a random input {inp.name!r} of shape {shape}.") from None
        out[inp.name] = arr
    return out


# --- --cast ----------------------------------------------------------------------------------------------------


def cast_inputs(fn: Function, arrays: Mapping[str, Any], sources: Mapping[str, str]
                ) -> tuple[dict[str, Any], dict[str, str]]:
    """``call --cast``: each array whose dtype differs from its input's, converted to it when every value of the
    array is kept exactly. Where the dtypes guarantee it (``dtypes.safe_cast``: ``float16 -> float32``,
    ``int8 -> int32``) nothing is checked; otherwise each value is converted and back, and must come back equal
    (NaN as NaN): ``int64`` token ids below 2**31 go to ``int32``, a ``float64`` array whose values are all
    ``float32`` values goes to ``float32``, and ``0.1`` in ``float64`` does not. An ``InputError`` names the first
    value that would change. Sources say what was converted. Arrays of a dtype jaxport does not know, and PRNG keys,
    are left to the signature check."""
    declared = {i.name: i.dtype for i in fn.inputs}
    out, said = dict(arrays), dict(sources)
    for name, arr in arrays.items():
        have, want = str(arr.dtype), declared.get(name)
        if want is None or have == want or have not in dtypes.BY_NAME or dtypes.is_key(have) or dtypes.is_key(want):
            continue
        converted = as_dtype(arr, want)
        if not dtypes.safe_cast(have, want):
            changed = first_changed(arr, converted)
            if changed is not None:
                index, before, after = changed
                where = f"{name}{list(index)}" if index else name
                raise InputError(f"input {name!r} has dtype {have}, and --cast converts only where every value is "
                                 f"kept: {where} = {before} would become {after} as {want}. Convert the array "
                                 f"yourself into a new file if that is what you mean.")
        out[name] = converted
        said[name] = f"{sources.get(name, 'given')} (cast from {have})"
    return out, said


def first_changed(arr: Any, converted: Any) -> tuple[tuple[int, ...], str, str] | None:
    """The index of the first element (in C order) that the conversion changes, its value and the value it would
    become (both in the array's own dtype), or None: an element is kept when converting it back gives it again
    (NaN giving NaN)."""
    import numpy as np

    back = as_dtype(converted, str(arr.dtype))
    with np.errstate(all="ignore"):
        same = np.asarray(back == arr)
        if np.dtype(arr.dtype).kind in "fc" or str(arr.dtype) in dtypes.BY_NAME and \
                dtypes.BY_NAME[str(arr.dtype)].kind in ("float", "complex"):
            same = same | (np.isnan(arr) & np.isnan(back))
    if same.all():
        return _wrapped(arr, converted)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmin(same.reshape(-1))), arr.shape))
    return index, str(arr[index]), str(back[index])


def _wrapped(a: Any, converted: Any) -> tuple[tuple[int, ...], str, str] | None:
    """What a round trip misses: the first integer outside an integer dtype that wraps back to itself
    (2**64 - 1 of a uint64 is -1 as int32, and 2**64 - 1 again as uint64), its value and the value it would
    become; or None."""
    import numpy as np

    if a.dtype.kind not in "iu" or converted.dtype.kind not in "iu" or not a.size:
        return None
    try:
        info = np.iinfo(converted.dtype)
    except ValueError:  # an integer dtype numpy does not describe (ml_dtypes' int4): the round trip judged it
        return None
    bad = a > info.max if a.dtype.kind == "u" else (a > info.max) | (a < info.min)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad.reshape(-1))), a.shape))
    return index, str(a[index]), str(converted[index])



# --- weakly typed inputs ---------------------------------------------------------------------------------------


def weak_value(inp: Input, value: Any, source: str | None = None) -> Any:
    """An array given for the weakly typed input ``inp`` (a Python number at export: ``jax.jit`` takes any integer
    or float there), as the input's dtype when it is of another integer or float dtype and every value is kept (as
    ``--cast`` judges it: ``int64`` step counts to ``int32``, a ``float64`` learning rate that is a ``float32``
    value to ``float32``); an ``InputError`` names the first value that would change (``source``: where it came
    from). Any other value comes back as it is, for the signature check to judge."""
    import numpy as np

    have, want = dtypes.from_numpy(getattr(value, "dtype", None)), dtypes.BY_NAME[inp.dtype]
    if not inp.weak or have is None or have.name == want.name or have.kind not in _NUMBER_KINDS or \
            want.kind not in _NUMBER_KINDS:
        return value
    arr = np.asarray(value)
    converted = as_dtype(arr, want.name)
    changed = None if dtypes.safe_cast(have.name, want.name) else first_changed(arr, converted)
    if changed is not None:
        index, before, after = changed
        where = f"{inp.name}{list(index)}" if index else inp.name
        raise InputError(f"input {inp.name!r} is weakly typed {want.name} (a Python number at export), which takes "
                         f"an array of any integer or float dtype whose values it keeps; {where} = {before} "
                         f"({have.name}{f', from {source}' if source else ''}) would become {after}. Give values "
                         f"{want.name} holds.")
    return converted


def weak_inputs(fn: Function, arrays: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The arrays with each weakly typed input's converted by :func:`weak_value`; the others as they are."""
    by_name = {i.name: i for i in fn.inputs}
    return {name: weak_value(by_name[name], value, (sources or {}).get(name)) if name in by_name else value
            for name, value in arrays.items()}
