"""Where ``--bind NAME=SOURCE`` (``jaxport.export(..., bind={NAME: value})``) binds: the function's parameter NAME.

A spec need not list a parameter it binds from the command line: with ``apply(params, x)`` and a spec whose
``args`` give only ``x``, ``--bind params=w.npz`` inserts the bound argument at ``params``' position, before the
spec's positional arguments that follow it. When the spec lists the parameter (its ``args`` hold a ``bind:`` at that
position, or one more positional argument would not fit the function), the bind replaces that entry. A parameter
the spec's positional arguments do not reach, a keyword-only one, or a keyword the spec gives, is bound by keyword.
A NAME that is no parameter of a function without ``**kwargs``, or binds that leave the spec not fitting the
function, are refused with the function's parameters and what the spec lists.

``placed_binds`` is the same rule seen from an artifact (``verify``): the artifact's signature says where each bound
argument went.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..spec import ArrayLeaf, BindLeaf, FunctionSpec, StaticLeaf, Where


def apply_binds(fspec: FunctionSpec, fn: Callable[..., Any], bind: Mapping[str, str], label: str) -> FunctionSpec:
    """A copy of ``fspec`` with each ``bind`` (parameter name -> source) placed (see the module docstring).
    ``label`` names the function in messages (``apply``)."""
    try:
        sig: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    params = sig.parameters if sig is not None else {}
    positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    any_keyword = sig is None or any(p.kind == p.VAR_KEYWORD for p in params.values())
    args, kwargs = list(fspec.args), dict(fspec.kwargs)
    for name in sorted(bind, key=lambda n: positional.index(n) if n in positional else len(positional)):
        leaf = BindLeaf(bind[name], Where(f"--bind {name}", 0), Path.cwd())
        if name in kwargs:
            kwargs[name] = _replacing(kwargs[name], leaf)
        elif name in positional:
            i = positional.index(name)
            if i < len(args) and (isinstance(args[i], BindLeaf) or _misfit(sig, [*args[:i], leaf, *args[i:]],
                                                                           kwargs) is not None):
                args[i] = _replacing(args[i], leaf)
            elif i < len(args):
                args.insert(i, leaf)
            else:
                kwargs[name] = leaf
        elif name in params or any_keyword:
            kwargs[name] = leaf
        else:
            close = difflib.get_close_matches(name, list(params), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{fspec.where}: --bind {name}: {label}{sig} has no parameter {name!r}{hint}; "
                            f"{_parameters(params, fspec)}. Bind one of the function's parameters.")
    reason = _misfit(sig, args, kwargs)
    if reason is not None:
        raise SpecError(f"{fspec.where}: with --bind {', '.join(bind)}, the spec's arguments do not fit "
                        f"{label}{sig}: {reason}; {_parameters(params, fspec)}. Give the spec's 'args' and 'kwargs' "
                        f"for the parameters that are not bound.")
    return dataclasses.replace(fspec, args=args, kwargs=kwargs)


def placed_binds(fspec: FunctionSpec, binds: Mapping[str, Any], positional: list[Any]) -> FunctionSpec:
    """``fspec`` with the binds an artifact records (``source.binds``: name -> recorded source) placed where its
    signature has them: ``positional`` names the artifact's positional arguments in order. A bound name among them
    replaces the spec's entry at its position when that entry is a ``bind:`` or the spec's ``args`` are as many as
    the signature's, and is inserted there otherwise (as the export did); any other name is a keyword."""
    args, kwargs = list(fspec.args), dict(fspec.kwargs)
    for name in sorted(binds, key=lambda n: positional.index(n) if n in positional else len(positional)):
        text = binds[name]
        if not isinstance(text, str):
            continue
        leaf = BindLeaf(text, Where(f"--bind {name}", 0))
        i = positional.index(name) if name in positional and name not in kwargs else len(args)
        if i < len(args) and (isinstance(args[i], BindLeaf) or len(args) >= len(positional)):
            args[i] = _replacing(args[i], leaf)
        elif i < len(args):
            args.insert(i, leaf)
        else:
            kwargs[name] = _replacing(kwargs.get(name), leaf)
    return dataclasses.replace(fspec, args=args, kwargs=kwargs)


def _replacing(old: Any, leaf: BindLeaf) -> BindLeaf:
    """``leaf`` in place of the spec's ``old`` entry: a ``bind:`` it replaces keeps its ``sharding:`` (the new source
    binds other values of the same tree, laid out as the spec says)."""
    if isinstance(old, BindLeaf) and old.sharding is not None:
        return dataclasses.replace(leaf, sharding=old.sharding)
    return leaf


def _misfit(sig: inspect.Signature | None, args: list[Any], kwargs: Mapping[str, Any]) -> str | None:
    """Why ``args`` and ``kwargs`` cannot be passed to a function of signature ``sig`` (None: they can, or the
    signature is unknown)."""
    if sig is None:
        return None
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        return str(e)
    return None


def _parameters(params: Mapping[str, inspect.Parameter], fspec: FunctionSpec) -> str:
    """``the function's parameters: params, x; the spec lists: args[0] f32[batch, 16]``."""
    shown = [("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "") + n
             for n, p in params.items()]
    listed = [f"args[{i}] {_entry(a)}" for i, a in enumerate(fspec.args)]
    listed += [f"kwargs[{k!r}] {_entry(v)}" for k, v in fspec.kwargs.items()]
    return (f"the function's parameters: {', '.join(shown) or '(none)'}; the spec lists: "
            f"{', '.join(listed) or 'no arguments'}")


def _entry(tree: Any) -> str:
    """A spec entry as messages show it: ``f32[batch, 16]``, ``bind params.npz``, ``static``, ``{...}``."""
    if isinstance(tree, ArrayLeaf):
        return f"{tree.dtype}[{tree.shape_text()}]"
    if isinstance(tree, BindLeaf):
        return f"(bind {tree.source})"
    if isinstance(tree, StaticLeaf):
        return "(static)"
    return "{...}" if isinstance(tree, dict) else "[...]" if isinstance(tree, list) else type(tree).__name__
