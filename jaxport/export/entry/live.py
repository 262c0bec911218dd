"""Exporting a Python object the caller holds (a function, a ``jax.jit`` of one, a bound method, a
``functools.partial``, a callable model) instead of an entry point string.

The manifest records an entry point for ``verify`` to import: a live callable's module file (relative to the export
root, as ``export.entry.paths`` records the command line's) and qualified name, ``model.py:predict``, when looking that
name up in that module gives the same object back (or, for ``jax.jit(f)``, gives ``f``: the same computation). A
lambda, a closure, a ``functools.partial``, a method bound to an instance, a callable instance, or anything defined
in ``__main__`` (a notebook, or a script that ``verify`` would run again from the top) has no such name: the manifest
records ``<in-memory>:NAME`` instead (``paths.IN_MEMORY``), and export warns that ``verify`` needs ``--against
FILE.py:NAME``.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .entrypoint import Entrypoint
from .paths import IN_MEMORY, RootPaths

#: A Python identifier (a function's name in an artifact must be one).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The artifact function's name when the Python name is not an identifier (a lambda's ``<lambda>``).
DEFAULT_NAME = "function"


@dataclass(frozen=True)
class LiveEntry:
    """A live callable as the pipeline exports it."""

    entry: Entrypoint
    #: ``model.py:predict`` (relative to the export root), or None when the object has no importable name.
    recorded: str | None
    #: Why it has none (``a lambda``), for the warning; None when ``recorded`` is set.
    reason: str | None

    def recorded_entry(self, fname: str) -> str:
        """The manifest's ``entrypoint``: ``recorded``, else ``<in-memory>:FNAME``."""
        return self.recorded if self.recorded is not None else f"{IN_MEMORY}:{fname}"

    def warning(self, fname: str) -> str | None:
        """What ``verify`` will need, when the manifest records no importable entry point."""
        if self.reason is None:
            return None
        return (f"function {fname!r} was exported from {self.reason}, which 'jaxport verify' cannot import: the "
                f"artifact records {IN_MEMORY}:{fname} as its entry point, so verify needs the function given with "
                f"--against FILE.py:NAME. Define it at the top level of a module file (not in __main__ or a "
                f"notebook) to have it recorded.")


def live_entry(fn: Callable[..., Any], paths: RootPaths) -> LiveEntry:
    """The ``Entrypoint`` of the live callable ``fn`` and what the manifest records for it (see the module
    docstring). Module files are recorded relative to ``paths``' root."""
    if not callable(fn):
        raise UsageError(f"jaxport.export: the function to export is {_article(type(fn).__name__)}, not a callable; "
                         f"give a function (or any callable) or an entry point 'model.py:NAME'.")
    python_name = _python_name(fn)
    name = python_name if _IDENTIFIER.match(python_name) else DEFAULT_NAME
    root = _source_dir(inspect.unwrap(_innermost(fn))) or Path.cwd()
    qualname = getattr(fn, "__qualname__", None)
    reason = _unnamed_reason(fn, qualname)
    if reason is None:
        assert isinstance(qualname, str)
        module_file, reason = _module_file(fn, qualname)
    if reason is not None:
        label = qualname if isinstance(qualname, str) else python_name
        return LiveEntry(Entrypoint(fn, f"{IN_MEMORY}:{name}", label, root, artifact_name=name), None, reason)
    recorded = paths.entrypoint(f"{module_file}:{qualname}", Path.cwd())
    return LiveEntry(Entrypoint(fn, recorded, str(qualname), root, artifact_name=name), recorded, None)


def _article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _innermost(fn: Any) -> Any:
    """The function under ``functools.partial`` layers and a bound method."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__func__", fn)


def _python_name(fn: Any) -> str:
    """The name Python gives ``fn`` (a partial's function's, a callable instance's class's)."""
    inner = _innermost(fn) if isinstance(fn, functools.partial) else fn
    name = getattr(inner, "__name__", None)
    return name if isinstance(name, str) else type(inner).__name__


def _source_dir(code: Any) -> Path | None:
    """The directory of the file ``code`` was defined in, as Python names it (source locations in the program are
    made relative to it, as for an entry point loaded from that file)."""
    if not (inspect.isfunction(code) or inspect.isclass(code)):
        code = type(code)  # a callable instance: its class's file
    try:
        file = inspect.getsourcefile(code)
    except (TypeError, OSError):
        return None
    return Path(os.path.dirname(os.path.abspath(file))) if file and os.path.isfile(file) else None


def _unnamed_reason(fn: Any, qualname: Any) -> str | None:
    """Why ``fn`` cannot be recorded as ``FILE.py:QUALNAME``, judged from the object alone, or None."""
    if isinstance(fn, functools.partial):
        return f"a functools.partial of {_python_name(fn)}"
    if inspect.ismethod(fn) and not inspect.isclass(fn.__self__):
        return f"a method bound to {_article(type(fn.__self__).__name__)} instance"
    if not isinstance(qualname, str):
        return f"{_article(type(fn).__name__)} instance (a callable object)"
    if qualname.endswith("<lambda>"):
        return "a lambda"
    if "<locals>" in qualname:
        return f"a closure (defined inside {qualname.split('.<locals>', 1)[0]})"
    if not all(part.isidentifier() for part in qualname.split(".")):
        return f"a function named {qualname!r} (not a Python name)"
    if getattr(fn, "__module__", None) == "__main__":
        return "a function defined in __main__ (a notebook, or the script being run)"
    return None


def _module_file(fn: Any, qualname: str) -> tuple[str, str | None]:
    """The file of ``fn``'s module, when ``qualname`` in that module is ``fn`` (or, for ``jax.jit(f)``, is ``f``);
    else why not."""
    module_name = getattr(fn, "__module__", None)
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    file = getattr(module, "__file__", None)
    if module is None or not isinstance(file, str) or not file.endswith(".py"):
        return "", f"a function whose module {module_name!r} has no Python file"
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    same = obj is fn or (inspect.ismethod(fn) and inspect.ismethod(obj) and obj == fn)  # a classmethod: equal
    if not same and not (_is_jit(fn) and obj is fn.__wrapped__):
        return "", f"a function that {module_name}.{qualname} no longer names (redefined, or decorated)"
    return os.path.abspath(file), None


def _is_jit(fn: Any) -> bool:
    """Whether ``fn`` is a ``jax.jit`` of a function (same computation as the function)."""
    return callable(getattr(fn, "lower", None)) and callable(getattr(fn, "__wrapped__", None))
