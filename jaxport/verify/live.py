"""The live function: the original function called as the export called it, for ``verify`` to compare with.

:func:`load_live` finds it (``--against``, or the entry point the artifact records); it runs under ``jax.jit``,
with the arguments the manifest's call tree describes: positional arguments in order with the static values put
back, keyword arguments by name, bound weights loaded again from their source (relative to the spec's directory,
else to the current directory; a recorded source only under the root, see ``recorded``, one the
user names with ``--bind`` as given). Imports JAX only when it builds or runs one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..artifact import calltree
from ..artifact.model import Function
from ..artifact.tensors import Tensor, digest
from ..errors import EntrypointError, JaxportError, VerificationError
from ..export.entry.entrypoint import load_entrypoint
from ..export.lowering import returns
from ..export.lowering.like import called_like
from ..export.weights.bind import entry_modules, flatten_bound, load_bind_source
from ..importer import module_function
from . import recorded


class LiveFunction:
    """The original function, called as the export called it (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], f: Function, bind_dir: Path, where: str, *,
                 roots: list[Path] | None = None, binds: Mapping[str, str] | None = None,
                 modules: Mapping[Path, ModuleType] | None = None, stored: Mapping[str, str] | None = None):
        """``roots``: the directories recorded bound sources must lie under (default: the current directory);
        ``binds``: sources the user names for bound arguments (``--bind NAME=SOURCE``, relative to the current
        directory), which replace the recorded ones; ``modules``: the entry point's module by its file, from which
        bound attributes of that file are read, as the export read them (``load_bind_source``); ``stored``: the
        sha256 of the tensors the artifact stores, by name, which the weights loaded again must match."""
        import jax

        self.f = f
        sig = f.signature
        trees: dict[str, Any] = {}
        weights: dict[str, Any] = {}
        for site in calltree.walk(sig):
            if site.kind == "bound":
                here = f"{where}: {site.name}"
                if binds and site.name in binds:
                    value = load_bind_source(binds[site.name], Path.cwd(), here, modules)
                else:
                    value = _load_bound(site.value, bind_dir, roots or [Path.cwd()], here, modules)
                tree, tensors = flatten_bound(value, site.name, here)
                same_weights(tensors, stored or {}, binds[site.name] if binds and site.name in binds else
                             site.value, here)
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

    def lowered(self, structs: list[Any]) -> tuple[bytes, list[str], list[Any]]:
        """The live function lowered by ``jax.jit`` for inputs of ``structs`` (``jax.ShapeDtypeStruct``s, in the
        manifest's order), as MLIR bytecode with its locations, its weights as the first arguments (in the manifest's
        order of bound tensors); and those weights' names and values. What ``verify --localize`` looks inside."""
        import io

        import jax

        names = [n for n in self.f.weights if n in self._weights]
        names += [n for n in self._weights if n not in names]
        weights = [self._weights[n] for n in names]
        inner = self._jit

        def program(tensors: list[Any], *flat: Any) -> Any:
            return inner(list(flat), dict(zip(names, tensors)))

        x64 = jax.enable_x64(True) if self.f.x64 else contextlib.nullcontext()
        with x64:
            lowered = jax.jit(program, keep_unused=True).lower(
                [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in weights], *structs)
        module = lowered.compiler_ir("stablehlo")
        assert module is not None
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
        return buffer.getvalue(), names, weights

    def __call__(self, arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Outputs ``(name, numpy array)`` named as the export names them."""
        import jax
        import numpy as np

        flat = [arrays[n] for n in self.f.input_names]
        x64 = jax.enable_x64(True) if self.f.x64 else contextlib.nullcontext()
        with x64:
            out = jax.block_until_ready(self.program(flat))
        leaves = jax.tree_util.tree_leaves(returns.plain(out))  # in the program's order, keys as their key data
        returned = returns.recorded(out)
        names, recorded_tree = returned.names, self.f.output_tree
        if recorded_tree is not None and returns.untyped(returned.tree) == returns.untyped(recorded_tree) and \
                len(names) == len(self.f.outputs):
            names = self.f.output_names  # the names the export gave (the spec's 'outputs:')
        return [(name, np.asarray(v)) for name, v in zip(names, leaves)]


def same_weights(tensors: Sequence[Tensor], stored: Mapping[str, str], source: Any, where: str) -> None:
    """Refuse live weights that are not those the artifact stores (``stored``: name -> sha256): outputs computed
    from other weights differ whatever the program does, and verify would blame the program. A source that draws
    its values anew on each import (an unseeded initialization) or that changed since the export does this."""
    for t in tensors:
        want = stored.get(t.name)
        if want is not None and digest(t) != want:
            raise VerificationError(
                f"{where}: the bound weights loaded again from {source} are not those stored in the artifact "
                f"(tensor {t.name!r} differs), so the live function cannot be compared with the artifact: the source "
                f"makes other values on each import (seed its initialization) or has changed since the export; "
                f"give the live function the weights the artifact was exported with (--bind NAME=SOURCE).")


def _load_bound(source: Any, bind_dir: Path, roots: list[Path], where: str,
                modules: Mapping[Path, ModuleType] | None) -> Any:
    """A bound value, from its recorded source relative to the spec's directory (as the spec wrote it), else to the
    root (as ``export --bind`` took it, relative to the current directory); only under ``roots``."""
    recorded.bind_source(source, bind_dir, roots, where)
    try:
        return load_bind_source(source, bind_dir, where, modules)
    except JaxportError:
        if bind_dir.resolve() == roots[0].resolve():
            raise
        try:
            recorded.bind_source(source, roots[0], roots, where)
            return load_bind_source(source, roots[0], where, modules)
        except JaxportError:
            pass
        raise


@dataclass(frozen=True)
class Sources:
    """Where a live function and its bound weights may come from: ``root``, the directory the recorded entry point
    and bound sources are relative to (as export records them, ``export.entry.paths``); ``roots``, the directories
    recorded bound sources must lie under; ``binds``, the sources the user names (``--bind NAME=SOURCE``);
    ``allowed``, the custom-call targets an imported artifact's module may call."""

    root: Path
    roots: list[Path]
    binds: Mapping[str, str]
    allowed: frozenset[str]
    #: The sha256 of each bound tensor the artifact stores, by name: the live side's weights, loaded again from
    #: their source, must be those (:func:`same_weights`).
    stored: Mapping[str, str] = field(default_factory=dict)


def load_live(text: str, defaulted: bool, f: Function, where: str, sources: Sources, *, spec: Any = None,
              fspec: Any = None) -> LiveFunction:
    """The live function of ``text``: ``--against``, or the entry point the artifact records when ``defaulted``
    (followed only under ``sources.root``). ``spec``/``fspec``: the spec and its entry for the function, whose
    ``like:`` arguments reach the live function as the artifact records them."""
    root = sources.root
    if defaulted:
        recorded.entry_point(text, root, where)
    base = root if defaulted else Path(".")
    module_file = text.rpartition(":")[0]
    if module_file.lower().endswith(recorded.MODULE_SUFFIXES):
        # An imported artifact: its live function is the foreign module's main, imported afresh.
        module_path = base / module_file
        if not module_path.is_file():
            raise EntrypointError(f"{where}: the module {module_file} the artifact was imported from is not in "
                                  f"{recorded.shown_root(base)}; give it with --against MODULE.mlir:main.")
        # the importer still reads a function's JSON
        return LiveFunction(module_function(module_path, f, allow_custom_calls=sorted(sources.allowed)),
                            f, root, where, roots=sources.roots, binds=sources.binds, stored=sources.stored)
    try:
        entry = load_entrypoint(text, base)
    except EntrypointError as e:
        if defaulted:
            raise EntrypointError(f"{e} (the entry point recorded in the artifact, relative to "
                                  f"{recorded.shown_root(root)}; give the live function with --against "
                                  f"FILE.py:NAME, or the directory it is relative to with --root DIR)") from None
        raise
    function = called_like(entry.function, fspec, spec) if fspec is not None else entry.function
    return LiveFunction(function, f, root, where, roots=sources.roots, binds=sources.binds,
                        modules=entry_modules(entry.function), stored=sources.stored)
