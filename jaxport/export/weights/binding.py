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

from ...artifact.model import Function
from ...artifact.summary import signature
from ...errors import SpecError
from ...spec import ArrayLeaf, BindLeaf, FunctionSpec, StaticLeaf, Where


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
    leaves = {name: BindLeaf(bind[name], Where(f"--bind {name}", 0), Path.cwd()) for name in bind}
    kwargs = dict(fspec.kwargs)
    at_position: list[str] = []  # bound positional parameters the spec's positional arguments reach, in order
    for name in sorted(bind, key=lambda n: positional.index(n) if n in positional else len(positional)):
        if name in kwargs:
            kwargs[name] = _replacing(kwargs[name], leaves[name])
        elif name in positional:
            at_position.append(name)
        elif name in params or any_keyword:
            kwargs[name] = leaves[name]
        else:
            close = difflib.get_close_matches(name, list(params), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{fspec.where}: --bind {name}: {label}{sig} has no parameter {name!r}{hint}; "
                            f"{_parameters(params, fspec)}. Bind one of the function's parameters.")
    args, kwargs, reason = _placed(sig, positional, list(fspec.args), kwargs, at_position, leaves)
    if reason is not None:
        unbound = [n for n in positional if n not in bind and n not in kwargs]
        if reason.startswith("missing a required argument"):
            raise SpecError(f"{fspec.where}: with --bind {', '.join(bind)}, the spec's arguments do not fit "
                            f"{label}{sig}: {reason}; {_parameters(params, fspec)}. The spec's 'args' give the "
                            f"parameters that are not bound, in order ({', '.join(unbound) or 'none'}): add an "
                            f"entry for each, or give it under 'kwargs'.")
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


def _placed(sig: inspect.Signature | None, positional: list[str], spec_args: list[Any], kwargs: dict[str, Any],
            bound: list[str], leaves: Mapping[str, BindLeaf]) -> tuple[list[Any], dict[str, Any], str | None]:
    """The positional arguments with the ``bound`` parameters (in order) placed among the spec's ``spec_args``, the
    keyword arguments, and why they do not fit (None: they do).

    Each bound parameter either is listed by the spec (the spec's entry at its position is replaced) or is not (the
    bound argument is inserted there); one reached after the spec's entries are used up is bound by keyword. A
    ``bind:`` entry at a bound parameter's position is always replaced. Of the other choices, the first that fits
    the function is taken, fewest replacements first (so the spec lists only the parameters that are not bound)."""
    import itertools

    def place(replaced: frozenset[str]) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        by_keyword = dict(kwargs)
        rest = iter(spec_args)
        left = len(spec_args)
        for name in positional:
            if name not in bound:
                if left:
                    args.append(next(rest))
                    left -= 1
            elif left == 0:
                by_keyword[name] = leaves[name]
            elif name in replaced:
                args.append(_replacing(next(rest), leaves[name]))
                left -= 1
            else:
                args.append(leaves[name])
        args.extend(rest)
        return args, by_keyword

    # bound parameters whose position (counting the inserted ones before it) holds a spec's own bind: replaced
    forced: set[str] = set()
    offset = 0
    for name in bound:
        i = positional.index(name) - offset
        if i < len(spec_args) and isinstance(spec_args[i], BindLeaf):
            forced.add(name)
        else:
            offset += 1
    free = [n for n in bound if n not in forced]
    first: tuple[list[Any], dict[str, Any], str | None] | None = None
    for count in range(len(free) + 1):
        for extra in itertools.combinations(free, count):
            args, by_keyword = place(frozenset(forced | set(extra)))
            reason = _misfit(sig, args, by_keyword)
            if reason is None:
                return args, by_keyword, None
            if first is None:
                first = (args, by_keyword, reason)
    assert first is not None
    return first


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


def bound_only_warning(fname: str, fn: Function, bind: Mapping[str, str]) -> str | None:
    """The warning for a function that ``--bind`` left without inputs (``predict() -> f32[4, 10]``): its output is
    then fixed at export, almost always a mistake (the data to feed at call time was bound). None when no
    ``--bind`` was given or the function still takes an input; a spec's own ``bind:`` of weights beside static
    arguments (no ``--bind``) draws nothing."""
    if not bind or fn.inputs:
        return None
    given = ", ".join(f"{name}={source}" for name, source in bind.items())
    names = ", ".join(bind)
    shape = "it a shape" if len(bind) == 1 else "each a shape"
    return (f"function {fname!r} takes no inputs once --bind {given} is applied: {signature(fname, fn)}, so every "
            f"call returns the same value, fixed at export. --bind stores weights in the artifact; to feed "
            f"{names} at call time instead, leave {names} out of --bind, give {shape} in the spec's 'args' and call "
            f"the artifact with 'jaxport call ART --inputs {next(iter(bind.values()))}'.")
