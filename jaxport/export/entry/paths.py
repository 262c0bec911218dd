"""The paths an export records, relative to the export root, so that the artifact's bytes do not depend on the
directory export ran in.

The root is ``export --root DIR`` when given, else the spec file's directory. The manifest records the spec
(``source.spec``), each entry point's file and each bound source's file (a spec's ``bind:`` or ``--bind``) relative
to it, ``/``-separated; a module entry point or bound attribute (``package.module:NAME``) is recorded as written. A
file outside the root is recorded by its base name only, as an absolute path always was: an artifact holds no path
outside its root, and its bytes do not depend on where such a file lies (``../../data/w.npz`` would change with
the depth of the checkout). Each such file draws one warning naming it and the ``--root`` that would hold them all,
since ``verify`` looks for the base name under its root. A value bound from memory is recorded as ``<in-memory>``
(``IN_MEMORY``), and a function exported from a Python object without an importable name as ``<in-memory>:NAME``
(see ``live``).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

#: Suffixes of the data files a bound source names (anything else with a ``:`` is a Python attribute).
BIND_FILE_SUFFIXES = (".npz", ".npy", ".safetensors")
#: What the manifest records as the source of a value bound from memory (``jaxport.export(..., bind={NAME: tree})``,
#: ``jaxport.rebind``), and, as ``<in-memory>:NAME``, as the entry point of a function exported from a Python object
#: that has no importable module and name: ``verify`` then needs ``--bind NAME=SOURCE`` or ``--against FILE.py:NAME``.
IN_MEMORY = "<in-memory>"


def is_in_memory(source: str) -> bool:
    """Whether a source or entry point is ``<in-memory>`` or ``<in-memory>:NAME`` (a value or function from memory)."""
    return source == IN_MEMORY or source.startswith(IN_MEMORY + ":")


def _absolute(path: str | Path, base: Path) -> str:
    """``path`` (relative to ``base``) as a normalized absolute path; symbolic links are kept as the user wrote
    them, so that the recorded paths are the ones a user sees."""
    return os.path.normpath(os.path.join(os.path.abspath(base), os.fspath(path)))


def is_file_target(target: str) -> bool:
    """Whether the part before ``:NAME`` names a file (``model.py``, ``sub/m``) rather than a module."""
    return target.endswith(".py") or "/" in target or os.sep in target


class RootPaths:
    """Paths made relative to one export root, remembering those that fall outside it."""

    def __init__(self, root: str | Path):
        self.root = _absolute(root, Path.cwd())
        #: ``(what, recorded path, absolute path)`` of every recorded path outside the root, in recording order.
        self.outside: list[tuple[str, str, str]] = []
        #: For each ``what`` of ``outside``: the option ``verify`` then needs to be given the file.
        self.instead: dict[str, str] = {}

    def path(self, path: str | Path, base: Path, what: str, instead: str = "--shapes SPEC") -> str:
        """``base / path`` relative to the root, ``/``-separated; outside the root its base name (noted, with the
        option ``instead`` that ``verify`` then needs)."""
        absolute = _absolute(path, base)
        try:
            relative = os.path.relpath(absolute, self.root)
            outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
        except ValueError:  # on another drive (Windows): no relative path exists
            outside = True
        if outside:
            relative = os.path.basename(absolute)
        recorded = PurePosixPath(*Path(relative).parts).as_posix()
        if outside and what not in self.instead:
            self.outside.append((what, recorded, absolute))
            self.instead[what] = instead
        return recorded

    def entrypoint(self, text: str, base: Path) -> str:
        """An entry point ``file.py:NAME`` (relative to ``base``) as recorded; ``package.module:NAME`` as written."""
        target, _, attribute = text.rpartition(":")
        if not is_file_target(target):
            return text
        return f"{self.path(target, base, f'the entry point {text}', '--against FILE.py:NAME')}:{attribute}"

    def source(self, source: str, base: Path, what: str) -> str:
        """A bound source (a data file, or ``file.py:NAME``, relative to ``base``) as recorded; a module attribute
        ``package.module:NAME`` as written; a value from memory as ``IN_MEMORY``."""
        if is_in_memory(source):
            return IN_MEMORY
        if source.lower().endswith(BIND_FILE_SUFFIXES) or ":" not in source:
            return self.path(source, base, what, "--bind NAME=SOURCE")
        target, _, attribute = source.rpartition(":")
        if not is_file_target(target):
            return source
        return f"{self.path(target, base, what, '--bind NAME=SOURCE')}:{attribute}"

    def warnings(self) -> list[str]:
        """One warning per recorded path outside the root, with the ``--root`` that would hold every path."""
        if not self.outside:
            return []
        try:
            common = os.path.commonpath([self.root] + [o[2] for o in self.outside])
        except ValueError:  # paths on several drives
            common = ""
        if common and os.path.dirname(common) != common:
            fix = (f"export with --root {_shown(common)} (a directory holding the spec and every file the export "
                   f"reads)")
        else:
            fix = "put the spec and the files the export reads under one directory and export with --root DIR"
        return [f"{what} lies outside the export root {_shown(self.root)}, so the artifact records only its name "
                f"{recorded}, which 'jaxport verify' looks for under its root (else give it {self.instead[what]}); "
                f"{fix}." for what, recorded, _ in self.outside]


def _shown(path: str) -> str:
    """A directory as warnings show it: relative to the current directory when under it, else absolute."""
    relative = os.path.relpath(path)
    return path if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative
