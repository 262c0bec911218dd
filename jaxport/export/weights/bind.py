"""Weights bound at export: loading them and naming their leaves (``artifact.tensors`` stores them).

A ``bind:`` in a spec names a file (``.npz``, ``.safetensors``, ``.npy``, relative to the spec), an orbax checkpoint
directory (``orbax_source``), or a Python attribute (``model.py:PARAMS``, or a zero-argument callable returning the
value); a value that holds no arrays (a generator, a number) is refused when it is read. The value may be any JAX
pytree; its array leaves become named tensors (``params/dense/kernel``) stored raw, little-endian, 64-byte aligned, in
one artifact member, and the exported program takes them as flat arguments, so custom pytree node types (flax, equinox)
never need to be serialized. Non-array leaves (Python numbers and strings inside a module) are baked into the program as
constants.

A file's keys are the paths inside the bound argument (``dense/kernel``), never prefixed with the argument's name,
and bind never strips one (a file may genuinely nest under a key equal to the argument's name, as flax's
``{"params": ...}`` bound to an argument named ``params``). ``jaxport extract --weights`` writes its keys the same
way, so an extracted file binds again to the same tensor names.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import numpy as np

from ... import dtypes
from ..._fsio import open_for_reading
from ..._text import human_bytes, plural
from ...arrayfiles import safetensors
from ...arrayfiles.npy import NpzRules, read_header, read_npz_file, size_text
from ...artifact.calltree import key_name
from ...artifact.pathtree import check_argument
from ...artifact.summary import type_text
from ...artifact.tensors import Tensor, prepare
from ...errors import EntrypointError, SpecError
from ...sharding import indivisible
from ...spec import MAX_DEPTH, BindLeaf, FunctionSpec, ShapeSpec
from ...spec.tree import leaves
from ..entry.entrypoint import load_attribute, split_entrypoint
from .orbax_source import SOURCES, load_directory

MAX_BIND_FILE_MEMBERS = 1 << 16
#: A bound ``.npz`` member over ``arrayfiles.npy.BOMB_FLOOR`` bytes may inflate at most this many times its compressed
#: size.
MAX_BIND_RATIO = 100


@dataclass
class BoundTree:
    """A bound argument: the tree structure, which leaves are tensors, and the baked non-array leaves."""

    treedef: Any
    #: One entry per leaf of ``treedef``: the tensor name, or None for a baked leaf.
    leaf_names: list[str | None]
    baked: dict[int, Any]
    #: PRNG key leaves (stored as their ``uint32`` key data): leaf index -> key implementation.
    key_impls: dict[int, Any] = field(default_factory=dict)

    def rebuild(self, tensors: dict[str, Any]) -> Any:
        from jax import random, tree_util

        leaves = []
        for i, n in enumerate(self.leaf_names):
            if n is None:
                leaves.append(self.baked[i])
            elif i in self.key_impls:
                leaves.append(random.wrap_key_data(tensors[n], impl=self.key_impls[i]))
            else:
                leaves.append(tensors[n])
        return tree_util.tree_unflatten(self.treedef, leaves)


def _nest(flat: dict[str, Any], where: str) -> dict[str, Any]:
    """``{"a/b": x, "a/c": y}`` -> ``{"a": {"b": x, "c": y}}``."""
    root: dict[str, Any] = {}
    for key in sorted(flat):
        parts = key.split("/")
        if any(not p for p in parts):
            raise SpecError(f"{where}: key {key!r} has an empty path component.")
        node = root
        for p in parts[:-1]:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise SpecError(f"{where}: key {key!r} nests below {p!r}, which is itself an array.")
            node = child
        if parts[-1] in node:
            raise SpecError(f"{where}: key {key!r} is both an array and a group of arrays.")
        node[parts[-1]] = flat[key]
    return root


def load_bind_source(source: str, base_dir: Path, where: str,
                     modules: Mapping[Path, ModuleType] | None = None) -> Any:
    """The value a ``bind:`` names. Files are read without pickle; attributes are imported (the user's code).

    ``modules`` maps a resolved ``.py`` path to a module already loaded from it (the entry point's): an attribute
    of that file is read from that module, so the function and its bound value share classes and objects (an
    equinox ``eqx.combine(params, STATIC)`` needs the same class on both sides), and the file runs once.
    """
    if not _is_file(source):
        return _load_attribute(source, base_dir, where, modules or {})
    path = (base_dir / source) if not Path(source).is_absolute() else Path(source)
    if not path.exists():
        if path.is_symlink():
            raise SpecError(f"{where}: bound file {source} is a symbolic link that leads nowhere (to a missing file, "
                            f"or around a loop).")
        raise SpecError(f"{where}: bound file {source} not found (paths are relative to the spec file's "
                        f"directory).")
    if path.is_dir():
        return load_directory(path, source, where)
    suffix = path.suffix.lower()
    if suffix not in _FILE_MAGIC:
        raise SpecError(f"{where}: bound file {source} has an unsupported extension {suffix!r}: use .npz, "
                        f".safetensors or .npy, or a Python attribute 'model.py:NAME'.")
    magic, kind = _FILE_MAGIC[suffix]
    here = f"{where}: bound file {source}"
    # one opening, checked to be a regular file (never a FIFO or a device), read by jaxport's own bounded readers
    with open_for_reading(path, lambda m: SpecError(f"{where}: bound file {m}"), directory="a weights file") as f:
        if magic:
            head = f.read(len(magic[0]))
            if not head.startswith(magic):
                raise SpecError(f"{here} is not {kind}.")
            f.seek(0)
        try:
            if suffix == ".npy":
                return _map_npy(f, here)
            if suffix == ".npz":
                return _nest(read_npz_file(f, here, NpzRules(SpecError, MAX_BIND_FILE_MEMBERS, holds="only arrays",
                                                                 numeric_only=False, max_ratio=MAX_BIND_RATIO)),
                             f"{where}: {source}")
            return _nest(safetensors.read(f, here, SpecError, mmap=True, max_tensors=MAX_BIND_FILE_MEMBERS),
                         f"{where}: {source}")
        except SpecError:
            raise
        except Exception as e:  # noqa: BLE001 - numpy and zipfile raise many kinds on bad files
            raise SpecError(f"{where}: cannot read bound file {source}: {type(e).__name__}: {e}") from None


def _map_npy(f: BinaryIO, where: str) -> np.ndarray:
    """A bound ``.npy`` as a read-only memory map of the open file ``f``, its header checked by ``arrayfiles.npy``."""
    size = os.fstat(f.fileno()).st_size
    header = read_header(f, where, SpecError, numeric_only=False)
    if size - header.header_bytes != header.nbytes:
        raise SpecError(f"{where}: the header declares {size_text(header)}, but {size - header.header_bytes} "
                        f"bytes follow it; the file is truncated or damaged.")
    if not header.nbytes:
        return np.zeros(header.shape, header.dtype)
    return np.memmap(f, dtype=header.dtype, mode="r", offset=header.header_bytes, shape=header.shape,
                     order="F" if header.fortran_order else "C")


#: Extension -> (accepted leading bytes, what the file must be), checked before any parser sees the file.
_FILE_MAGIC: dict[str, tuple[tuple[bytes, ...], str]] = {
    ".npy": ((b"\x93NUMPY",), "a .npy file (it does not start with numpy's magic bytes)"),
    ".npz": ((b"PK\x03\x04", b"PK\x05\x06"), "an .npz file (a zip archive of .npy arrays)"),
    ".safetensors": ((), "a .safetensors file"),
}


def _load_attribute(source: str, base_dir: Path, where: str, modules: Mapping[Path, ModuleType]) -> Any:
    """``model.py:NAME`` or ``package.module:NAME``, called when it is a zero-argument callable."""
    import traceback

    target, attribute = split_entrypoint(source)
    value: Any = _MISSING
    if target.endswith(".py") or "/" in target:
        path = Path(target) if Path(target).is_absolute() else base_dir / target
        if not path.is_file():
            raise SpecError(f"{where}: bound module {target} not found (paths are relative to the spec file's "
                            f"directory).")
        module = modules.get(path.resolve())
        if module is not None:
            value = module
            for part in attribute.split("."):
                value = getattr(value, part, _MISSING)
                if value is _MISSING:
                    break
    if value is _MISSING:
        try:
            value = load_attribute(source, base_dir)
        except EntrypointError as e:
            message = str(e).removeprefix(f"entry point {source!r}: ")
            raise EntrypointError(f"{where}: bound value {source}: {message}") from e.__cause__
    if callable(value) and _is_zero_arg(value):
        try:
            return value()
        except Exception as e:  # noqa: BLE001 - the user's code
            frames = "".join(traceback.format_exception_only(type(e), e)).rstrip()
            raise EntrypointError(f"{where}: bound value {source}: calling {attribute}() raised {frames}") from e
    return value


_MISSING = object()


def _is_zero_arg(fn: Any) -> bool:
    if isinstance(fn, type):
        return False
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _as_array(leaf: Any) -> np.ndarray | None:
    if isinstance(leaf, np.ndarray):  # a subclass (np.matrix, a memmap) as the plain array of its buffer
        return leaf if type(leaf) is np.ndarray else np.asarray(leaf)
    if isinstance(leaf, np.generic):
        return np.asarray(leaf)
    if hasattr(leaf, "__array__") and hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return np.asarray(leaf)
    return None


def _key_impl(leaf: Any) -> Any:
    """The PRNG implementation of a typed key array (``jax.random.key``), else None."""
    dtype = getattr(leaf, "dtype", None)
    if dtype is None or isinstance(leaf, (np.ndarray, np.generic)):
        return None
    import jax

    if not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    return jax.random.key_impl(leaf)


def keras_variable_path(leaf: Any) -> str | None:
    """The path of a Keras variable (``sequential/dense/kernel``), else None: a bound list of Keras variables
    (``model.trainable_variables``) names its tensors by the variables' paths rather than by list index."""
    path = getattr(leaf, "path", None)
    if not isinstance(path, str) or not path or not type(leaf).__module__.startswith("keras"):
        return None
    parts = path.split("/")
    return path if all(parts) else None


def flatten_bound(value: Any, prefix: str, where: str) -> tuple[BoundTree, list[Tensor]]:
    """Name the array leaves of a bound pytree ``prefix/path/to/leaf``; other leaves are baked. A Keras variable is
    named by its own path (``prefix/sequential/dense/kernel``) unless another leaf already has that name."""
    from jax import tree_util

    # walked first: JAX's flatten recurses natively, and a value that holds itself through a custom node left the
    # interpreter unable to run anything after it (its recursion count spent)
    check_argument(value, f"bound value {prefix!r}", lambda message: SpecError(f"{where}: {message}"),
                   depth_limit=MAX_DEPTH, why="which the spec language does not take (it nests at most 64 levels)")
    with warnings.catch_warnings():  # JAX warns of a generator leaf, refused below
        warnings.filterwarnings("ignore", "Python iterable type", DeprecationWarning)
        flat, treedef = tree_util.tree_flatten_with_path(value)
    names: list[str | None] = []
    baked: dict[int, Any] = {}
    tensors: list[Tensor] = []
    key_impls: dict[int, Any] = {}
    taken: set[str] = set()
    for i, (path, leaf) in enumerate(flat):
        if inspect.isgenerator(leaf) or inspect.isasyncgen(leaf) or inspect.iscoroutine(leaf):
            shown = "/".join([prefix, *(key_name(k) for k in path)])
            raise SpecError(f"{where}: bound leaf {shown!r} is a {type(leaf).__name__}, which a program cannot hold "
                            f"(it is consumed once; JAX takes it as a leaf only until a future version refuses it). "
                            f"Give its values as a list or an array.")
        variable_path = keras_variable_path(leaf)
        impl = _key_impl(leaf)
        if impl is not None:  # a typed PRNG key (an nnx Rngs stream, say): store its raw key data
            from jax import random

            key_impls[i] = impl
            leaf = random.key_data(leaf)
        if isinstance(leaf, np.ma.MaskedArray):
            shown = "/".join([prefix, *(key_name(k) for k in path)])
            raise SpecError(f"{where}: bound leaf {shown!r} is a masked array, whose mask the artifact cannot store "
                            f"(its data alone would be bound, masked values included). Bind leaf.filled(VALUE), or "
                            f"the data and the mask as two arrays.")
        arr = _as_array(leaf)
        if arr is None:
            names.append(None)
            baked[i] = leaf
            continue
        name = "/".join([prefix, *(key_name(k) for k in path)]) if path else prefix
        if variable_path is not None and f"{prefix}/{variable_path}" not in taken:
            name = f"{prefix}/{variable_path}"  # a Keras variable is named by its path, not its list index
        taken.add(name)
        if dtypes.from_numpy(arr.dtype) is None and arr.dtype.kind == "V" and not arr.dtype.fields and \
                dtypes.raw_void(arr.dtype.itemsize):  # plain void bytes, not an ml_dtypes type (also kind 'V')
            kinds = dtypes.raw_void(arr.dtype.itemsize)
            raise SpecError(f"{where}: bound leaf {name!r} has the raw void dtype {arr.dtype.str!r}, as numpy saves "
                            f"{', '.join(kinds[:-1])}{' or ' if len(kinds) > 1 else ''}{kinds[-1]}, which does not "
                            f"say which. Bind a .safetensors file (it records "
                            f"{', '.join(d.name for d in dtypes.TABLE if d.ml_dtypes and d.safetensors)} by name), "
                            f"an orbax checkpoint or a Python attribute 'model.py:NAME' instead.")
        if dtypes.from_numpy(arr.dtype) is None:
            raise SpecError(f"{where}: bound leaf {name!r} has dtype {arr.dtype}, which jaxport does not store. "
                            f"Convert it, e.g. to float32.")
        if not arr.flags.c_contiguous:  # not np.ascontiguousarray, which turns a scalar into shape (1,)
            arr = arr.copy(order="C")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        names.append(name)
        tensors.append(Tensor(name, arr))
    return BoundTree(treedef, names, baked, key_impls), tensors


# --- the binds of one function of a spec -------------------------------------------------------------------------


@dataclass(frozen=True)
class BoundArgument:
    """One ``bind:`` of a function's spec, loaded: where it is bound and the keys of its tensors."""

    leaf: BindLeaf
    prefix: str
    keys: list[str]
    #: ``key: f32[784, 32]`` per tensor, for messages.
    types: list[str] = field(default_factory=list)
    #: The bytes of its tensors.
    nbytes: int = 0


def entry_modules(fn: Callable[..., Any]) -> dict[Path, Any]:
    """The module the entry point was loaded from, by resolved file path (binds of that file read from it)."""
    module = sys.modules.get(getattr(inspect.unwrap(fn), "__module__", None) or "")
    file = getattr(module, "__file__", None)
    return {Path(file).resolve(): module} if isinstance(file, str) else {}


def load_binds(fspec: FunctionSpec, arg_names: list[str], spec: ShapeSpec, modules: dict[Path, Any] | None = None
               ) -> tuple[dict[int, BoundTree], list[Tensor], list[BoundArgument]]:
    """Load every bound subtree of the spec: ``{id(BindLeaf): BoundTree}``, the tensors sorted by name, and what
    was bound (for messages). ``modules``: see ``load_bind_source``."""
    tops = [*((arg_names[i], a) for i, a in enumerate(fspec.args)), *fspec.kwargs.items()]
    found = [(leaf, "/".join(map(str, (top, *path)))) for top, tree in tops for path, leaf in leaves(tree)
             if isinstance(leaf, BindLeaf)]
    bound: dict[int, BoundTree] = {}
    tensors: dict[str, Tensor] = {}
    binds: list[BoundArgument] = []
    for leaf, prefix in found:
        base = leaf.base_dir or spec.base_dir or Path.cwd()
        value = load_bind_source(leaf.source, base, str(leaf.where), modules)
        if _what(value, flattened=False) is not None:  # a generator, a number: before JAX flattens it
            raise _no_arrays(leaf, value)
        tree, leaf_tensors = flatten_bound(value, prefix, str(leaf.where))
        if not leaf_tensors and (_is_file(leaf.source) or not _empty_container(value)):
            raise _no_arrays(leaf, value)  # but a Python [] (a model's empty list of variables) binds as itself
        bound[id(leaf)] = tree
        for t in leaf_tensors:
            tensors[t.name] = t
        keys = [t.name[len(prefix) + 1:] for t in leaf_tensors]
        types = [f"{k or prefix}: {type_text(str(t.array.dtype), t.array.shape)}"
                 for k, t in zip(keys, leaf_tensors)]
        binds.append(BoundArgument(leaf, prefix, keys, types, sum(int(t.array.nbytes) for t in leaf_tensors)))
    ordered = [tensors[n] for n in sorted(tensors)]
    prepare(ordered)  # their digests are computed in the background while the program is traced
    return bound, ordered, binds


def _what(value: Any, flattened: bool = True) -> str | None:
    """What a bound value that holds no arrays is, for messages: ``a generator``, ``the int 3``; with
    ``flattened`` (its pytree held no array leaf) ``a dict with no array leaves`` for any other value, else None."""
    if inspect.isgenerator(value) or inspect.isasyncgen(value):
        return "a generator (its values are produced one at a time and cannot be stored)"
    if inspect.iscoroutine(value):
        return "a coroutine"
    # an equinox module is a callable pytree of arrays: only a plain function is judged before flattening
    if callable(value) and not isinstance(value, type) and (flattened or inspect.isroutine(value)):
        name = getattr(value, "__qualname__", None) or type(value).__name__
        if _is_zero_arg(value):  # the one a bind names is called: this one is what calling it returned
            return (f"the callable {name}, which calling the bound function returned (a bind calls only the one it "
                    f"names)")
        return f"the callable {name}, which takes arguments (only a zero-argument one is called)"
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        text = repr(value)
        return f"the {type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
    return f"a {type(value).__name__} with no array leaves" if flattened else None


def _is_file(source: Any) -> bool:
    """Whether a bind source names a file or directory (else it is a Python attribute ``model.py:NAME``)."""
    return not isinstance(source, str) or source.lower().endswith((".npz", ".npy", ".safetensors")) or ":" not in source


def _empty_container(value: Any) -> bool:
    """Whether a bound value is a list, tuple or dict with no leaves at all (Keras's ``non_trainable_variables`` of
    a model that has none): bound as the empty pytree it is, where one holding only other values is refused."""
    from jax import tree_util

    return isinstance(value, (list, tuple, dict)) and not tree_util.tree_leaves(value)


def _no_arrays(leaf: BindLeaf, value: Any) -> SpecError:
    """The error for a bound value that holds no arrays, naming its source and what it is."""
    return SpecError(f"{leaf.where}: bound value {leaf.source} holds no arrays: it is {_what(value)}. A bind stores "
                     f"weights: {SOURCES.removeprefix('a bind source is ')} holding a pytree of arrays (or a "
                     f"zero-argument function returning one).")


def weight_partition_specs(binds: list[BoundArgument], tensors: list[Tensor], mesh: Mapping[str, int]
                           ) -> dict[str, Any]:
    """The PartitionSpec of each bound tensor that a ``bind``'s ``sharding`` names, by tensor name (refused at the
    ``bind:`` line when it splits an axis into parts that do not divide it)."""
    out: dict[str, Any] = {}
    ranks = {t.name: len(t.array.shape) for t in tensors}
    tensor_shapes = {t.name: tuple(int(n) for n in t.array.shape) for t in tensors}
    for b in binds:
        for key, spec in b.leaf.sharding or ():
            name = f"{b.prefix}/{key}" if key else b.prefix
            if name not in ranks:
                shown = ", ".join(b.keys[:12]) + (", ..." if len(b.keys) > 12 else "")
                hint = difflib.get_close_matches(key, b.keys, n=1)
                raise SpecError(f"{b.leaf.where}: the sharding of '{b.prefix}' names {key!r}, which is not a tensor "
                                f"of {b.leaf.source}{f' (did you mean {hint[0]!r}?)' if hint else ''}; its keys: "
                                f"{shown or '(a single array: give one list)'}.")
            if len(spec) > ranks[name]:
                raise SpecError(f"{b.leaf.where}: the sharding of '{name}' has "
                                f"{plural(len(spec), 'entry', 'entries')}, but the tensor has "
                                f"{plural(ranks[name], 'axis', 'axes')}.")
            indivisible(tensor_shapes[name], spec, mesh, f"{b.leaf.where}: the sharding of '{name}'",
                        lambda msg: SpecError(msg))
            out[name] = spec
    return out


def bound_note(binds: list[BoundArgument]) -> str:
    """What was bound, in short (a failure may come from a bound value's shape or dtype): per bind its source, and
    its tensors with their types when there are at most ``NOTE_TENSORS``, else their count, total size and the first
    ``NOTE_TENSORS`` as examples; at most ``NOTE_BINDS`` binds, then how many more."""
    if not binds:
        return ""
    parts = []
    for b in binds[:NOTE_BINDS]:
        if not b.types:
            shown = "no arrays"
        elif len(b.types) <= NOTE_TENSORS:
            shown = ", ".join(b.types)
        else:
            shown = (f"{len(b.types)} tensors, {human_bytes(b.nbytes)}; e.g. "
                     f"{', '.join(b.types[:NOTE_TENSORS])}, ...")
        parts.append(f"{b.leaf.where}: '{b.prefix}' is bound to {b.leaf.source} ({shown})")
    more = len(binds) - NOTE_BINDS
    if more > 0:
        parts.append(f"and {plural(more, 'more bound value')}")
    return " [bound values: " + "; ".join(parts) + "]"


#: ``bound_note`` lists at most this many tensors of a bind (all of them when there are no more), and binds.
NOTE_TENSORS = 3
NOTE_BINDS = 3


#: flax.linen's errors for a variable its ``apply`` looks for and does not find, and how to name the variable.
_FLAX_MISSING = [
    ("ScopeParamNotFoundError", r'Could not find parameter named "(?P<name>[^"]*)" in scope "(?P<scope>[^"]*)"',
     "params"),
    ("ScopeVariableNotFoundError", r'No Variable named "(?P<name>[^"]*)" for collection "(?P<col>[^"]*)" exists in '
     r'"(?P<scope>[^"]*)"', None),
    ("ScopeCollectionNotFound", r'Tried to access "(?P<name>[^"]*)" from collection "(?P<col>[^"]*)" in '
     r'"(?P<scope>[^"]*)"', None),
]


def missing_bound_key(e: BaseException) -> Any:
    """The key the function looked up and did not find: a ``KeyError``'s, or the variable path of flax.linen's
    not-found errors (``params/Dense_1/bias``); None for any other error."""
    if isinstance(e, KeyError):
        return e.args[0] if e.args else "?"
    for cls, pattern, collection in _FLAX_MISSING:
        if type(e).__name__ == cls:
            match = re.search(pattern, str(e))
            if match:
                parts = [collection or match["col"], *match["scope"].split("/"), match["name"]]
                return "/".join(p for p in parts if p)
    return None


def missing_key_error(key: Any, binds: list[BoundArgument]) -> SpecError:
    """The error for a key the function reads and no bound value has, with the keys each bind does have."""
    parts = []
    for b in binds:
        pool = b.keys if "/" in str(key) else [k.split("/")[-1] for k in b.keys]
        close = difflib.get_close_matches(str(key), pool, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown = ", ".join(b.keys[:12]) + (", ..." if len(b.keys) > 12 else "")
        doubled = ""
        if b.keys and all(k.startswith(f"{b.prefix}/") for k in b.keys):
            doubled = (f" (every key starts with '{b.prefix}/', the argument's own name: the file holds the "
                       f"artifact's full tensor names, as 'jaxport extract --weights --full-names' writes them; "
                       f"extract without --full-names for names relative to '{b.prefix}')")
        parts.append(f"{b.leaf.where}: '{b.prefix}' is bound to {b.leaf.source} with keys: {shown}{hint}{doubled}")
    return SpecError(f"the function reads key {key!r} from a bound argument, and the bound value has no such key. "
                     f"Missing: {key!r}. " + "; ".join(parts) + ". Make the bound file's keys match what the "
                     "function reads.")
