"""Inputs of ``call``: the arrays that ``--inputs`` names, matched to a function's inputs, and random inputs
generated from the signature. The files are read by :mod:`.npyio`, which trusts none of them. No JAX.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import dtypes
from ..artifact.contract import concrete_shape, input_names, unknown_input_error
from ..artifact.summary import array_type
from ..errors import InputError
from .npyio import physical_memory, read_npy, read_npz


def _expected(fn: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each input's manifest entry, with the function's dimension bounds, for ``check_fits``."""
    return {i["name"]: {**i, "_dims": fn.get("dims") or {}} for i in fn["inputs"]}


# --- matching files to inputs ----------------------------------------------------------------------------------


def missing_error(fn: Mapping[str, Any], missing: list[str]) -> InputError:
    """The error for inputs that ``--inputs`` left out, saying how to give them."""
    by_name = {i["name"]: i for i in fn["inputs"]}
    listed = ", ".join(f"{n!r} ({array_type(by_name[n])})" for n in missing)
    if len(missing) == 1:
        return InputError(f"missing input {listed}: give it with --inputs {missing[0]}=FILE.npy, or use --random.")
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
    declared = {i["name"]: i["dtype"] for i in fn["inputs"]}
    expect = _expected(fn)
    names = list(declared)
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
        arrays[name] = read_npy(file, declared[name], name, expect[name])
        sources[name] = file
    missing = [n for n in names if n not in arrays]
    if missing:
        raise missing_error(fn, missing)
    return {n: arrays[n] for n in names}, {n: sources[n] for n in names}


# --- random inputs ---------------------------------------------------------------------------------------------


def random_inputs(fn: Mapping[str, Any], dims: Mapping[str, int], seed: int = 0, *,
                  nonnegative: bool = False) -> dict[str, Any]:
    """Deterministic random arrays for a function's inputs at the given dimension values, in manifest order.

    Floats are standard normal, signed integers uniform in [-8, 8), unsigned in [0, 8), bools fair coin flips.
    ``nonnegative`` draws signed integers from [0, 8) too: valid indices into any axis of at least 8, whose
    pairwise products fit in int8 (``verify`` compares functions that index with their inputs).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for inp in fn["inputs"]:
        shape = concrete_shape(inp, dims)
        kind = dtypes.BY_NAME[inp["dtype"]].kind
        target = dtypes.to_numpy(inp["dtype"])
        count = 1
        for n in shape:
            count *= n
        total = physical_memory()
        if any(n < 0 for n in shape) or (total and count * 16 > total):  # generated as 64-bit, then converted
            raise InputError(f"a random input {inp['name']!r} of shape {shape} would not fit in this machine's "
                             f"memory; choose smaller dimensions with --dim NAME=VALUE.")
        try:
            if kind == "float":
                arr = rng.standard_normal(shape).astype(target)
            elif kind == "complex":
                arr = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(target)
            elif kind == "int":
                arr = rng.integers(0 if nonnegative else -8, 8, size=shape).astype(target)
            elif kind == "uint":
                arr = rng.integers(0, 8, size=shape).astype(target)
            else:
                arr = rng.random(shape) < 0.5
        except (MemoryError, ValueError, OverflowError):
            raise InputError(f"not enough memory for a random input {inp['name']!r} of shape {shape}.") from None
        out[inp["name"]] = arr
    return out
