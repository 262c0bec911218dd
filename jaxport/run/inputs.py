"""Inputs of ``call``: the arrays that ``--inputs`` names, matched to a function's inputs, and random inputs
generated from the signature. The files are read by :mod:`.npyio`, which trusts none of them. No JAX, except for
typed PRNG key inputs, which :mod:`.keys` makes from a seed or from the key data a file holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import dimexpr, dtypes
from ..artifact.contract import concrete_shape, input_names, parsed_shape, unknown_input_error
from ..artifact.summary import array_type
from ..errors import FormatError, InputError
from . import keys
from .npyio import physical_memory, read_npy, read_npz
from .ranges import check_range, check_ranges, draw, resolved

__all__ = ["cast_inputs", "check_ranges", "classify", "gather", "missing_error", "random_inputs"]


def _expected(fn: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each input's manifest entry, with the function's dimension bounds, for ``check_fits``; a key input as the key
    data its file holds (``keys.data_entry``)."""
    return {i["name"]: {**(keys.data_entry(i) if keys.is_key_input(i) else i), "_dims": fn.get("dims") or {}}
            for i in fn["inputs"]}


# --- matching files to inputs ----------------------------------------------------------------------------------


def missing_error(fn: Mapping[str, Any], missing: list[str]) -> InputError:
    """The error for inputs that ``--inputs`` left out, saying how to give them."""
    by_name = {i["name"]: i for i in fn["inputs"]}
    listed = ", ".join(f"{n!r} ({array_type(by_name[n])})" for n in missing)
    if len(missing) == 1:
        seed = f" (a PRNG key: {missing[0]}=seed:N makes it from a seed)" if keys.is_key_input(by_name[missing[0]]) \
            else ""
        return InputError(f"missing input {listed}: give it with --inputs {missing[0]}=FILE.npy{seed}, or use "
                          f"--random.")
    return InputError(f"missing inputs {listed}: give each with --inputs NAME=FILE.npy (or all in one .npz), or "
                      f"use --random.")


def classify(fn: Mapping[str, Any], items: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """Split ``--inputs`` values into positional files, ``NAME=FILE`` pairs and ``.npz`` files.

    ``NAME=FILE`` is recognised when NAME is an input name, or when the text has an ``=`` and is not an existing
    file; a file whose name contains ``=`` can be given as ``./a=b.npy``.
    """
    names = input_names(fn)
    positional: list[str] = []
    named: dict[str, str] = {}
    npz: list[str] = []
    for text in items:
        name, eq, file = text.partition("=")
        if eq and (name in names or not Path(text).exists()):
            if name not in names:
                raise unknown_input_error(name, names, f" (in --inputs {text})")
            if name in named:
                raise InputError(f"input {name!r} is given twice: {named[name]} and {file}.")
            named[name] = file
        elif text.lower().endswith(".npz"):
            npz.append(text)
        else:
            positional.append(text)
    return positional, named, npz


def gather(fn: Mapping[str, Any], items: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Read the arrays that ``--inputs`` values name; returns ``{input name: array}`` and each array's source."""
    positional, named, npz = classify(fn, items)
    expect = _expected(fn)
    declared = {name: e["dtype"] for name, e in expect.items()}  # a key input's file holds uint32 key data
    by_name = {i["name"]: i for i in fn["inputs"]}
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
                             f"{array_type(by_name[name])}; give it a file.")
        seeds[name] = seed
        return True

    if positional and (named or npz):
        raise InputError("give --inputs either all by position (FILE.npy, in the order 'inspect' lists the "
                         "inputs) or all by name (NAME=FILE.npy, or an .npz keyed by input names), not both.")
    arrays: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if positional:
        if len(positional) > len(names):
            shown = ", ".join(names) or "none"
            raise InputError(f"too many inputs: {len(positional)} files given, but the function takes "
                             f"{len(names)} input{'s' if len(names) != 1 else ''} ({shown}); "
                             f"'{positional[len(names)]}' has no input to go to.")
        for name, file in zip(names, positional):
            if seeded(name, file, literal=True):
                continue
            arrays[name] = read_npy(file, declared[name], name, expect[name])
            sources[name] = file
    for file in npz:
        for name, arr in read_npz(file, declared, expect).items():
            if name in sources:
                raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
            arrays[name] = arr
            sources[name] = f"{file}[{name}]"
    for name, file in named.items():
        if name in sources:
            raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
        if seeded(name, file, literal=False):
            continue
        arrays[name] = read_npy(file, declared[name], name, expect[name])
        sources[name] = file
    for name, arr in arrays.items():
        if keys.is_key_input(by_name[name]):
            arrays[name] = keys.wrap(arr, by_name[name], sources[name])
    if seeds:
        _seed_keys(fn, arrays, sources, seeds)
    missing = [n for n in names if n not in arrays]
    if missing:
        raise missing_error(fn, missing)
    return {n: arrays[n] for n in names}, {n: sources[n] for n in names}


def _seed_keys(fn: Mapping[str, Any], arrays: dict[str, Any], sources: dict[str, str], seeds: Mapping[str, int]
               ) -> None:
    """Make the key inputs given as ``seed:N`` (in place), at the shape the other inputs' dimensions give them."""
    shapes = [(i["name"], parsed_shape(i), list(arrays[i["name"]].shape)) for i in fn["inputs"] if i["name"] in arrays]
    env, _, _ = dimexpr.solve(shapes)  # conflicts are the signature check's to report
    for inp in fn["inputs"]:
        name = inp["name"]
        if name not in seeds:
            continue
        unknown = sorted({v for d in parsed_shape(inp) if not isinstance(d, int) for v in dimexpr.variables(d)}
                         - env.keys())
        if unknown:
            raise InputError(f"--inputs {name}=seed:{seeds[name]}: the shape of input {name!r} "
                             f"({array_type(inp)}) names {', '.join(map(repr, unknown))}, which no other input "
                             f"gives; give the keys' data in a file instead.")
        try:
            shape = concrete_shape(inp, env)
        except dimexpr.DimExprError as e:
            raise InputError(f"--inputs {name}=seed:{seeds[name]}: the shape of input {name!r} cannot be evaluated: "
                             f"{e}.") from None
        arrays[name] = keys.from_seed(inp, shape, seeds[name])
        sources[name] = f"seed {seeds[name]}"


# --- random inputs ---------------------------------------------------------------------------------------------


def random_inputs(fn: Mapping[str, Any], dims: Mapping[str, int], seed: int = 0, *, nonnegative: bool = False,
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
    for inp in fn["inputs"]:
        shape = concrete_shape(inp, dims)
        if keys.is_key_input(inp):
            out[inp["name"]] = keys.from_seed(inp, shape, seed + made_keys)
            made_keys += 1
            continue
        count = 1
        for n in shape:
            count *= n
        total = physical_memory()
        if any(n < 0 for n in shape) or (total and count * 16 > total):  # generated as 64-bit, then converted
            raise InputError(f"a random input {inp['name']!r} of shape {shape} would not fit in this machine's "
                             f"memory; choose smaller dimensions with --dim NAME=VALUE.")
        # a bound may be a dimension expression ([0, nodes]): its value at these dimensions
        if ranges and inp["name"] in ranges:
            bounds = check_range(inp, resolved(ranges[inp["name"]], dims), "--range")
        elif inp.get("range") is not None:
            bounds = check_range(inp, resolved(inp["range"], dims), "the artifact's manifest", FormatError)
        else:
            bounds = None
        try:
            arr = draw(rng, inp, shape, bounds)
        except (MemoryError, ValueError, OverflowError):
            raise InputError(f"not enough memory for a random input {inp['name']!r} of shape {shape}.") from None
        out[inp["name"]] = arr
    return out


# --- --cast ----------------------------------------------------------------------------------------------------


def cast_inputs(fn: Mapping[str, Any], arrays: Mapping[str, Any], sources: Mapping[str, str]
                ) -> tuple[dict[str, Any], dict[str, str]]:
    """``call --cast``: each array whose dtype differs from its input's, converted to it when the conversion keeps
    every value (``dtypes.safe_cast``); an ``InputError`` for one that would not. Sources say what was converted.
    Arrays of a dtype jaxport does not know are left to the signature check."""
    declared = {i["name"]: i["dtype"] for i in fn["inputs"]}
    out, said = dict(arrays), dict(sources)
    for name, arr in arrays.items():
        have, want = str(arr.dtype), declared.get(name)
        if want is None or have == want or have not in dtypes.BY_NAME:
            continue
        if not dtypes.safe_cast(have, want):
            raise InputError(f"input {name!r} has dtype {have}, and --cast converts only where every value is kept; "
                             f"{have} -> {want} is not such a conversion. Convert the array yourself into a new file "
                             f"if that is what you mean.")
        out[name] = arr.astype(dtypes.to_numpy(want))
        said[name] = f"{sources.get(name, 'given')} (cast from {have})"
    return out, said
