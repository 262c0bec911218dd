"""Weights bound at export: loading them, naming their leaves, and storing them as aligned tensors.

A ``bind:`` in a spec names a file (``.npz``, ``.safetensors``, ``.npy``, relative to the spec) or a Python
attribute (``model.py:PARAMS``, or a zero-argument callable returning the value). The value may be any JAX pytree;
its array leaves become named tensors (``params/dense/kernel``) stored raw, little-endian, 64-byte aligned, in one
artifact member, and the exported program takes them as flat arguments, so custom pytree node types (flax, equinox)
never need to be serialized. Non-array leaves (Python numbers and strings inside a module) are baked into the
program as constants.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import dtypes
from .container import ALIGNMENT  # every tensor starts at a multiple of it
from .errors import FormatError, SpecError

MAX_BIND_FILE_MEMBERS = 1 << 16


@dataclass(frozen=True)
class Tensor:
    name: str
    array: np.ndarray  # C-contiguous, little-endian

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)


@dataclass
class BoundTree:
    """A bound argument: the tree structure, which leaves are tensors, and the baked non-array leaves."""

    treedef: Any
    #: One entry per leaf of ``treedef``: the tensor name, or None for a baked leaf.
    leaf_names: list[str | None]
    baked: dict[int, Any]

    def rebuild(self, tensors: dict[str, Any]) -> Any:
        from jax import tree_util

        leaves = [tensors[n] if n is not None else self.baked[i] for i, n in enumerate(self.leaf_names)]
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


def load_bind_source(source: str, base_dir: Path, where: str) -> Any:
    """The value a ``bind:`` names. Files are read without pickle; attributes are imported (the user's code)."""
    if not source.lower().endswith((".npz", ".npy", ".safetensors")) and ":" in source:
        from .entrypoint import load_attribute

        value = load_attribute(source, base_dir)
        return value() if callable(value) and _is_zero_arg(value) else value
    path = (base_dir / source) if not Path(source).is_absolute() else Path(source)
    if not path.is_file():
        raise SpecError(f"{where}: bound file {source} not found (paths are relative to the spec file's "
                        f"directory).")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False, mmap_mode="r")
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if len(z.files) > MAX_BIND_FILE_MEMBERS:
                    raise SpecError(f"{where}: {source} has {len(z.files)} arrays; at most "
                                    f"{MAX_BIND_FILE_MEMBERS} are allowed.")
                return _nest({k: z[k] for k in z.files}, f"{where}: {source}")
        if suffix == ".safetensors":
            from safetensors.numpy import load_file

            return _nest(load_file(str(path)), f"{where}: {source}")
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - numpy, zipfile and safetensors raise many kinds on bad files
        raise SpecError(f"{where}: cannot read bound file {source}: {type(e).__name__}: {e}") from None
    raise SpecError(f"{where}: bound file {source} has an unsupported extension {suffix!r}: use .npz, "
                    f".safetensors or .npy, or a Python attribute 'model.py:NAME'.")


def _is_zero_arg(fn: Any) -> bool:
    import inspect

    if isinstance(fn, type):
        return False
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _key_name(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _as_array(leaf: Any) -> np.ndarray | None:
    if isinstance(leaf, np.ndarray):
        return leaf
    if isinstance(leaf, np.generic):
        return np.asarray(leaf)
    if hasattr(leaf, "__array__") and hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return np.asarray(leaf)
    return None


def flatten_bound(value: Any, prefix: str, where: str) -> tuple[BoundTree, list[Tensor]]:
    """Name the array leaves of a bound pytree ``prefix/path/to/leaf``; other leaves are baked."""
    from jax import tree_util

    flat, treedef = tree_util.tree_flatten_with_path(value)
    names: list[str | None] = []
    baked: dict[int, Any] = {}
    tensors: list[Tensor] = []
    for i, (path, leaf) in enumerate(flat):
        arr = _as_array(leaf)
        if arr is None:
            names.append(None)
            baked[i] = leaf
            continue
        name = "/".join([prefix, *(_key_name(k) for k in path)]) if path else prefix
        if dtypes.from_numpy(arr.dtype) is None:
            raise SpecError(f"{where}: bound leaf {name!r} has dtype {arr.dtype}, which jaxport does not store. "
                            f"Convert it, e.g. to float32.")
        arr = np.ascontiguousarray(arr)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        names.append(name)
        tensors.append(Tensor(name, arr))
    return BoundTree(treedef, names, baked), tensors


# --- storage ----------------------------------------------------------------------------------------------------


@dataclass
class PackedWeights:
    """The weights member to write: its index for the manifest, its size and digest, and how to write it."""

    index: dict[str, dict[str, Any]]
    size: int
    sha256: str
    tensors: list[Tensor]

    def chunks(self) -> Iterator[bytes | memoryview]:
        pos = 0
        for t in self.tensors:
            start = self.index[t.name]["offset"]
            if start > pos:
                yield b"\0" * (start - pos)
            yield memoryview(t.array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
            pos = start + t.nbytes
        if self.size > pos:
            yield b"\0" * (self.size - pos)


def pack(tensors: list[Tensor]) -> PackedWeights:
    """Lay out tensors (deduplicated by name) and compute every digest in one pass."""
    unique: dict[str, Tensor] = {}
    for t in tensors:
        if t.name in unique:
            if not np.array_equal(unique[t.name].array, t.array) or unique[t.name].array.dtype != t.array.dtype:
                raise SpecError(f"two bound values are both named {t.name!r} but differ; rename one argument.")
            continue
        unique[t.name] = t
    ordered = [unique[n] for n in sorted(unique)]
    index: dict[str, dict[str, Any]] = {}
    whole = hashlib.sha256()
    pos = 0
    for t in ordered:
        pad = (-pos) % ALIGNMENT
        if pad:
            whole.update(b"\0" * pad)
            pos += pad
        data = memoryview(t.array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
        whole.update(data)
        d = dtypes.from_numpy(t.array.dtype)
        assert d is not None
        index[t.name] = {"dtype": d.name, "shape": list(t.array.shape), "offset": pos, "nbytes": t.nbytes,
                         "sha256": hashlib.sha256(data).hexdigest()}
        pos += t.nbytes
    return PackedWeights(index, pos, whole.hexdigest(), ordered)


def tensor_views(buffer: memoryview, index: dict[str, dict[str, Any]], where: str) -> dict[str, np.ndarray]:
    """Zero-copy numpy views of every tensor in the weights member (read-only, backed by the file's mmap)."""
    out: dict[str, np.ndarray] = {}
    size = len(buffer)
    for name, t in index.items():
        d = dtypes.BY_NAME[t["dtype"]]
        count = 1
        for n in t["shape"]:
            count *= n
        nbytes, offset = count * d.itemsize, t["offset"]
        if nbytes != t["nbytes"] or offset < 0 or offset + nbytes > size:
            raise FormatError(f"{where}: tensor {name!r}: shape {t['shape']} x {d.name} is {nbytes} bytes at "
                              f"offset {offset}, which does not fit the {size}-byte weights member as declared "
                              f"({t['nbytes']} bytes).")
        arr = np.frombuffer(buffer, dtype=dtypes.to_numpy(d.name), count=count, offset=offset)
        out[name] = arr.reshape(t["shape"])
    return out
