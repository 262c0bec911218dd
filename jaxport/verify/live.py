"""The live function: the original function called as the export called it, for ``verify`` to compare with.

It runs under ``jax.jit``, with the arguments the manifest's call tree describes: positional arguments in order with
the static values put back, keyword arguments by name, bound weights loaded again from their source (relative to the
spec's directory, else to the current directory; a recorded source only under the root, see ``recorded``, one the
user names with ``--bind`` as given). Imports JAX only when it builds or runs one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..artifact import calltree
from ..artifact.model import Function
from ..errors import JaxportError, VerificationError
from ..export.bind import flatten_bound, load_bind_source
from ..export.lower import output_structure
from . import recorded


class LiveFunction:
    """The original function, called as the export called it (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], f: Function, bind_dir: Path, where: str, *,
                 roots: list[Path] | None = None, binds: Mapping[str, str] | None = None):
        """``roots``: the directories recorded bound sources must lie under (default: the current directory);
        ``binds``: sources the user names for bound arguments (``--bind NAME=SOURCE``, relative to the current
        directory), which replace the recorded ones."""
        import jax

        self.f = f
        sig = f.signature
        trees: dict[str, Any] = {}
        weights: dict[str, Any] = {}
        for site in calltree.walk(sig):
            if site.kind == "bound":
                here = f"{where}: {site.name}"
                if binds and site.name in binds:
                    value = load_bind_source(binds[site.name], Path.cwd(), here)
                else:
                    value = _load_bound(site.value, bind_dir, roots or [Path.cwd()], here)
                tree, tensors = flatten_bound(value, site.name, here)
                trees[site.name] = tree
                weights.update({t.name: t.array for t in tensors})

        def unknown(name: str) -> Exception:
            return VerificationError(f"{where}: the manifest's signature has an unknown node at {name}.")

        def program(flat: list[Any], tensors: dict[str, Any]) -> Any:
            args, kwargs = calltree.rebuild(sig, flat, lambda name: trees[name].rebuild(tensors), unknown)
            return fn(*args, **kwargs)

        # The weights are an argument of the jitted program, not constants baked into it, as in the export.
        self._jit = jax.jit(program)
        self._weights = weights

    def program(self, flat: list[Any]) -> Any:
        """The output pytree for the flat inputs (in the manifest's order); traceable, so ``jax.vjp`` can
        differentiate it. The caller enables x64 when the function needs it."""
        return self._jit(flat, self._weights)

    def __call__(self, arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Outputs ``(name, numpy array)`` named as the export names them."""
        import jax
        import numpy as np

        flat = [arrays[n] for n in self.f.input_names]
        x64 = jax.enable_x64(True) if self.f.x64 else contextlib.nullcontext()
        with x64:
            out = jax.block_until_ready(self.program(flat))
        leaves = jax.tree_util.tree_leaves(out)
        names, _, tree = output_structure(out)
        recorded_tree = self.f.output_tree
        if recorded_tree is not None and tree == recorded_tree and len(names) == len(self.f.outputs):
            names = self.f.output_names  # the names the export gave (the spec's 'outputs:')
        return [(name, np.asarray(v)) for name, v in zip(names, leaves)]


def _load_bound(source: Any, bind_dir: Path, roots: list[Path], where: str) -> Any:
    """A bound value, from its recorded source relative to the spec's directory (as the spec wrote it), else to the
    root (as ``export --bind`` took it, relative to the current directory); only under ``roots``."""
    recorded.bind_source(source, bind_dir, roots, where)
    try:
        return load_bind_source(source, bind_dir, where)
    except JaxportError:
        if bind_dir.resolve() == roots[0].resolve():
            raise
        try:
            recorded.bind_source(source, roots[0], roots, where)
            return load_bind_source(source, roots[0], where)
        except JaxportError:
            pass
        raise
