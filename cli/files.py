"""Which options name files: the ones a command writes (:class:`OutputPath`) and, every other path and the texts
that hold paths (:class:`NamesFiles`), the ones it reads, none of which an output may replace.

A command's outputs are checked against the files it read (``jaxport.frontend.check_output``): each file jaxport
opens is remembered as it is opened, but some are read by other libraries (model signing reads the certificates and
the chain), some only after an output was written, and a library may read a file jaxport never opens. So before a
command's body runs, :func:`note_read_files` records every file its options name, and an output that is one of
them (the same file, also through a link) is refused with exit 11 before anything is written. A new option is in
that set unless its type says it is an output: the rule needs no list to keep up to date.

By the same types, an empty path (``-o ''``, ``--cache-dir ''``) is refused as a usage error, naming the option
(:func:`refuse_empty_paths`): click takes it, and each command would make something of it that no one asked for.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import click

from jaxport.frontend import note_input


class OutputPath(click.Path):
    """The type of an option or argument naming a file the command writes (``-o``, ``--weights``,
    ``--save-inputs``, ``sign --signature``). Every other ``click.Path`` names a file the command reads."""


class NamesFiles(click.types.StringParamType):
    """The type of a text option or argument holding the paths of files the command reads: ``NAME=FILE``
    (``--inputs``, ``--bind``), ``model.py:NAME`` (an entry point, ``--against``), a path (``import MODULE``,
    ``serve``'s artifacts)."""


def _texts(value: Any) -> Iterator[str]:
    """The strings in a parameter's value (a string, a path, a tuple of them, a dict a callback made of them)."""
    if isinstance(value, (str, os.PathLike)):
        yield os.fsdecode(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


def _paths(text: str) -> Iterator[str]:
    """The paths a text may name: itself, what follows ``NAME=``, and what precedes ``:NAME`` in each."""
    for whole in (text, text.partition("=")[2]):
        if whole:
            yield whole
            if ":" in whole:
                yield whole.rpartition(":")[0]


def read_options(command: click.Command) -> list[click.Parameter]:
    """The parameters of ``command`` that name files it reads: its paths that are not outputs, and its texts that
    hold paths."""
    return [p for p in command.params
            if (isinstance(p.type, click.Path) and not isinstance(p.type, OutputPath))
            or isinstance(p.type, NamesFiles)]


def output_options(command: click.Command) -> list[click.Parameter]:
    """The parameters of ``command`` that name files it writes."""
    return [p for p in command.params if isinstance(p.type, OutputPath)]


def note_read_files(ctx: click.Context | None) -> None:
    """Record every file the running command's options name for reading (:func:`read_options`; a bound source
    also under ``--root``), so that no output replaces one. A text that names no file is ignored."""
    if ctx is None:
        return
    root = ctx.params.get("root")
    for param in read_options(ctx.command):
        for text in _texts(ctx.params.get(param.name or "")):
            for path in _paths(text):
                note_input(path)
                if isinstance(root, str) and not os.path.isabs(path):
                    note_input(os.path.join(root, path))


def nonempty_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A callback refusing an empty path among the option's values: ``''`` names no file."""
    if any(text == "" for text in _texts(value)):
        raise click.BadParameter("'' is an empty path, which names no file; give a path.", ctx, param)
    return value


#: The commands whose file options :func:`refuse_empty_paths` already guards.
_GUARDED: weakref.WeakSet[click.Command] = weakref.WeakSet()


def refuse_empty_paths(command: click.Command) -> click.Command:
    """``command``, each parameter of which that names a file (:func:`read_options`, :func:`output_options`) refuses
    an empty value (:func:`nonempty_path`) before its own callback runs; once per command."""
    if command not in _GUARDED:
        for param in (*read_options(command), *output_options(command)):
            param.callback = _then(param.callback)
        _GUARDED.add(command)
    return command


def _then(callback: Callable[..., Any] | None) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        value = nonempty_path(ctx, param, value)
        return callback(ctx, param, value) if callback is not None else value

    return check
