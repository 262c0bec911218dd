"""Pytree arguments fed from one file: ``call --inputs state=state.npz``, and ``save_inputs``, which writes such
files from live pytrees. No JAX, except to flatten the pytrees ``save_inputs`` is given.

An argument whose call tree is a dict or list of inputs (a ``like:`` value: an optax state, a flax ``TrainState``)
has inputs named by the key paths of its leaves, ``state/opt/0/mu/w1``. ``--inputs state=FILE`` takes all of them
from an ``.npz`` or ``.safetensors`` whose keys are the leaf paths *below* ``state`` (``opt/0/mu/w1``); keys that
are the full input names (``state/opt/0/mu/w1``, as ``--save-inputs`` and ``save_inputs`` write them) are read as
well. ``FILE:PATH`` reads the arrays below ``PATH`` of the file and ignores the rest: the output file of ``call -o``
of a train step returning ``(state, loss)`` names the state's leaves ``0/opt/0/mu/w1``, so ``--inputs
state=out.npz:0`` feeds the returned state back. The file must hold every leaf, and nothing else (below ``PATH``):
a key no leaf has, or a leaf the file lacks, is refused naming both and listing the keys expected.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import dtypes
from ..._text import plural
from ...artifact.calltree import key_name, walk
from ...artifact.model import Function, Input
from ...artifact.pathtree import check_argument
from ...errors import InputError, UsageError
from . import keys
from .npyio import read_named_arrays
from .numbers import python_scalar
from .outputs import save_arrays, save_outputs

__all__ = ["TREE_SUFFIXES", "read_tree_file", "save_inputs", "tree_inputs"]

#: The files a pytree argument is read from.
TREE_SUFFIXES = (".npz", ".safetensors")
#: Expected keys listed in a message, at most.
SHOWN_KEYS = 20


def tree_inputs(fn: Function) -> dict[str, dict[str, Input]]:
    """Each node of ``fn``'s call tree that is a dict or list holding inputs, by its ``/``-joined name (``state``,
    ``state/opt``): its inputs by their paths below it (``opt/0/mu/w1``), in the manifest's order."""
    sites = list(walk(fn.signature))
    leaves = [(s.name, fn.inputs[s.value]) for s in sites if s.kind == "input"]
    out: dict[str, dict[str, Input]] = {}
    for site in sites:
        if site.kind not in ("dict", "list"):
            continue
        below = {name[len(site.name) + 1:]: inp for name, inp in leaves if name.startswith(f"{site.name}/")}
        if below:
            out[site.name] = dict(sorted(below.items(), key=lambda kv: fn.inputs.index(kv[1])))
    return out


def split_source(name: str, text: str) -> tuple[str, str | None]:
    """``FILE`` or ``FILE:PATH`` of ``--inputs NAME=TEXT`` for a pytree argument: the file and the path below which
    its keys are read (None: the whole file)."""
    if text.lower().endswith(TREE_SUFFIXES) or Path(text).exists():
        return text, None
    file, colon, path = text.rpartition(":")
    if colon and file.lower().endswith(TREE_SUFFIXES):
        return file, path.strip("/") or None
    raise InputError(f"--inputs {name}={text}: {name!r} is a pytree argument; give it an .npz or .safetensors file "
                     f"keyed by the leaf paths below {name!r} (as jaxport.save_inputs writes it), optionally as "
                     f"FILE:PATH to read the arrays below PATH of the file.")


def read_tree_file(name: str, text: str, leaves: Mapping[str, Input]) -> tuple[dict[str, Any], dict[str, str]]:
    """The arrays of the pytree argument ``name`` (its inputs by path below it: ``leaves``) from ``--inputs
    NAME=TEXT`` (see the module docstring), by input name, and each one's source. A key input's file holds its key
    data (``uint32``), which ``gather`` wraps. Raises ``InputError``."""
    file, below = split_source(name, text)
    declared = {k: "uint32" if keys.is_key_input(i) else i.dtype for k, i in leaves.items()}
    spellings = {**declared, **{f"{name}/{k}": d for k, d in declared.items()}}
    if below:
        spellings = {f"{below}/{k}": d for k, d in spellings.items()}
    arrays = read_named_arrays(file, f"--inputs {name}={text}", declared=spellings)
    # leaf path -> the file's own key
    found = {k: k for k in arrays}
    if below:
        found = {k[len(below) + 1:]: k for k in arrays if k.startswith(f"{below}/")}
        if not found:
            raise InputError(f"--inputs {name}={text}: {file} has no keys below {below!r}; its keys: "
                             f"{_listed(sorted(arrays))}.")
    if all(k.startswith(f"{name}/") for k in found):  # keyed by the full input names, as --save-inputs writes them
        stripped = {k[len(name) + 1:]: v for k, v in found.items()}
        if len(stripped.keys() & leaves.keys()) > len(found.keys() & leaves.keys()):
            found = stripped
    if set(found) != set(leaves):
        raise _mismatch(name, text, file, below, found, leaves, sorted(arrays))
    full = {k: f"{name}/{k}" if k else name for k in leaves}
    return {full[k]: arrays[found[k]] for k in leaves}, {full[k]: f"{file}[{found[k]}]" for k in leaves}


def _mismatch(name: str, text: str, file: str, below: str | None, found: Mapping[str, str],
              leaves: Mapping[str, Input], every: list[str]) -> InputError:
    """The error for a file whose keys are not the leaf paths below ``name``: the ``FILE:PATH`` that fits, if one
    does; else the keys no leaf has (``found``: leaf path -> the file's key; each with the leaf it is closest to),
    the leaves it lacks and the keys expected."""
    expected = list(leaves)
    where = f"--inputs {name}={text}: the keys of {file}{f' below {below!r}' if below else ''}"
    prefix = _fitting_prefix(every, expected) if below is None else None
    if prefix is not None:
        return InputError(f"{where} are not the leaf paths below {name!r}, but the arrays below {prefix!r} are (an "
                          f"output file names the leaves of each returned value below its position): give --inputs "
                          f"{name}={file}:{prefix}.")
    unknown = [k for k in sorted(found) if k not in leaves]
    missing = [k for k in expected if k not in found]
    parts = []
    if unknown:
        hints = []
        for k in unknown[:5]:
            close = difflib.get_close_matches(k, missing or expected, n=1)
            hints.append(f"{found[k]!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        parts.append(f"the file has {'keys' if len(unknown) > 1 else 'key'} {', '.join(hints)}{more}, which no leaf "
                     f"of {name!r} has")
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        parts.append(f"it lacks {'leaves' if len(missing) > 1 else 'leaf'} {', '.join(map(repr, missing[:5]))}{more}")
    return InputError(f"{where} are not the leaf paths of input {name!r} ({plural(len(expected), 'input')}): "
                      f"{'; '.join(parts)}. Expected keys: {_listed(expected)}.")


def _fitting_prefix(keys_: list[str], expected: list[str]) -> str | None:
    """The one path of a file whose keys below it are exactly ``expected`` (an output file's ``0`` for the state a
    train step returns first), else None."""
    want = set(expected)
    prefixes = {k.rsplit("/", n)[0] for k in keys_ for n in range(1, k.count("/") + 1)}
    fits = [p for p in sorted(prefixes) if {k[len(p) + 1:] for k in keys_ if k.startswith(f"{p}/")} == want]
    return fits[0] if len(fits) == 1 else None


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_KEYS])
    return shown + (f", ... ({len(names)} in all; 'jaxport inspect' lists the inputs)" if len(names) > SHOWN_KEYS
                    else "") if names else "(none)"


# --- writing: jaxport.save_inputs ------------------------------------------------------------------------------


def save_inputs(path: str | Path, **pytrees: Any) -> list[str]:
    """Write live pytrees to ``path`` (``.npz``, or ``.safetensors``, which keeps ``bfloat16``) as ``call
    --inputs`` reads them: each leaf keyed by the argument's name and the leaf's key path, joined with ``/`` as
    jaxport names inputs (``state/opt/0/mu/w1``; a single array ``x`` as ``x``). So ``jaxport.save_inputs("s.npz",
    state=state)`` feeds ``jaxport call ART --inputs state=s.npz``, and ``save_inputs("in.npz", state=state, x=x)``
    every input of ``f(state, x)`` with ``--inputs in.npz``.

    Leaves: JAX and numpy arrays; Python numbers, typed as ``jax.jit`` types them (``int`` as ``int32``, ``float``
    as ``float32``, ``bool``, ``complex`` as ``complex64``); typed PRNG keys as their key data (``uint32``). Custom
    pytree nodes (a flax ``TrainState``, optax states, namedtuples) are flattened by ``jax.tree_util`` with their key
    paths; ``None`` holds no leaf, and other leaves (strings, functions), which an export bakes into the program,
    are left out. Returns the keys written, in order. Raises ``UsageError`` for a path that is not ``.npz`` or a
    pytree with no array, a leaf with no values (``jax.ShapeDtypeStruct``) or of a dtype no input has (object,
    strings), and a Python number its dtype cannot hold; ``OutputError`` when the file cannot be written."""
    suffix = Path(path).suffix.lower()
    if suffix not in TREE_SUFFIXES:
        raise UsageError(f"save_inputs({str(path)!r}): inputs are saved as an .npz or .safetensors file keyed by "
                         f"input name; give a path ending in one of these.")
    if not pytrees:
        raise UsageError("save_inputs() needs at least one pytree, given by its argument's name: "
                         "save_inputs('s.npz', state=state).")
    arrays: dict[str, Any] = {}
    for name, tree in pytrees.items():
        found = _leaves(name, tree)
        if not found:
            raise UsageError(f"save_inputs(): {name}= holds no array (a {type(tree).__name__}); give the pytree "
                             f"of arrays the artifact takes as argument {name!r}.")
        for key, leaf in found:
            if key in arrays:
                raise UsageError(f"save_inputs(): two leaves are named {key!r}; rename one argument.")
            arrays[key] = leaf
    if suffix == ".npz":
        save_arrays(path, arrays)
    else:  # .safetensors keeps bfloat16 and float8 as themselves
        save_outputs(path, [(k, keys.key_data(v)) for k, v in arrays.items()])
    return list(arrays)


def _leaves(name: str, tree: Any) -> list[tuple[str, Any]]:
    """The array leaves of ``tree`` (numbers as arrays, see ``save_inputs``), named ``name/key/path``."""

    if dtypes.python_number(tree) is not None or (hasattr(tree, "shape") and hasattr(tree, "dtype")):
        flat: list[tuple[tuple[Any, ...], Any]] = [((), tree)]
    else:
        from jax import tree_util

        # walked first: JAX's flatten recurses natively, and a tree nested 5000 deep ended in jaxlib's SystemError
        check_argument(tree, name, lambda message: UsageError(f"save_inputs(): {message}"))
        flat = tree_util.tree_flatten_with_path(tree)[0]
    out = []
    for path, leaf in flat:
        key = "/".join([name, *(key_name(k) for k in path)])
        typed = dtypes.python_number(leaf)
        if typed is not None:  # as jax.jit types it, and as like: makes it an input
            try:
                leaf = python_scalar(key, leaf, typed[0].name, subject="leaf")
            except InputError as e:
                raise UsageError(f"save_inputs(): {e}") from None
        elif not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            continue  # baked at export: not an input
        elif not hasattr(leaf, "__array__"):
            raise UsageError(f"save_inputs(): leaf {key!r} is a {type(leaf).__name__} {leaf.dtype}"
                             f"{list(leaf.shape)}, which holds no values; give an array.")
        elif dtypes.from_numpy(leaf.dtype) is None:
            raise UsageError(f"save_inputs(): leaf {key!r} has dtype {leaf.dtype}, which no input of an artifact "
                             f"has; give an array of numbers, booleans or PRNG keys.")
        out.append((key, leaf))
    return out
