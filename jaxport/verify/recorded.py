"""What an artifact records for ``verify`` to follow (entry points, the spec, bound sources, an imported module),
resolved under a root the user controls.

Trust model: the manifest is written by whoever wrote the artifact, and ``verify`` acts on four things it records:
each function's entry point (imported: it runs code), the spec (read), the sources of bound weights (read, or
imported when they name a Python attribute) and, for an imported artifact, the foreign module (parsed and lowered).
So an artifact must not be able to choose what ``verify`` imports or reads. A recorded path is followed only when it
is relative, has no ``..`` component and no backslash, holds no control character (a NUL, a line break), names a
file (``model.py:NAME``, never ``package.module:NAME``, which imports from Python's path), and still lies under
the root once symlinks are resolved. What the user names (``--against``, ``--shapes``, ``--bind``) is taken as
given: that is the user's decision. jaxport's exporter records exactly such paths (relative to its export root,
``/``-separated; see ``export.entry.paths``), so an artifact verified from that root never meets these refusals. What an
export took from memory (``jaxport.export`` of a lambda or a closure, weights bound as a pytree) is recorded as
``<in-memory>:NAME`` or ``<in-memory>`` and never followed: ``verify`` asks for ``--against`` or ``--bind`` instead.

The root (:func:`find_root`) is ``--root`` when given; else the current directory when the recorded paths resolve
there (the recorded spec is there, with the sha256 the manifest records in ``source.spec_sha256``); else the
directory of ``--shapes``; else the directory below the current one where a bounded search finds the recorded spec
by its sha256 (symbolic links not followed, hidden directories, ``.venv``, ``node_modules`` and ``__pycache__``
skipped, at most ``SEARCH_ENTRIES`` entries and ``SEARCH_DEPTH`` levels); else the current directory. A note says
which root was used when it is not the current directory (or that the search stopped at its cap); a recorded file
that is then not found is refused with a message naming ``--root``.

:func:`as_exported` gives the spec as the export used it, so that ``verify`` compares it with the artifact: its bound
sources relative to the root, and the command-line binds the manifest records (``source.binds``) applied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import deque
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from .._fsio import open_regular, read_at_most
from ..artifact.model import Manifest
from ..errors import EntrypointError, JaxportError, UsageError
from ..export.entry.paths import IN_MEMORY, RootPaths, is_in_memory
from ..export.weights.binding import placed_binds
from ..spec import MAX_SPEC_BYTES, BindLeaf, ShapeSpec
from ..spec.tree import map_leaves

#: Recorded paths longer than this are refused before any file system call.
MAX_RECORDED_PATH = 4096
#: Suffixes of the foreign modules an imported artifact records as its entry point.
MODULE_SUFFIXES = (".mlir", ".mlirbc", ".jaxexport")
#: Suffixes of the data files a ``bind:`` names (anything else with a ``:`` is a Python attribute).
BIND_FILE_SUFFIXES = (".npz", ".npy", ".safetensors")
#: The search for the recorded spec below the current directory looks at no more directory entries than this, and
#: descends no deeper.
SEARCH_ENTRIES = 20_000
SEARCH_DEPTH = 6
#: Directories the search never enters (besides hidden ones, whose names start with '.').
SEARCH_SKIPPED = frozenset({"node_modules", "__pycache__", "site-packages", ".venv", "venv"})


def path_problem(text: object) -> str | None:
    """Why a recorded path cannot be followed, judged from its text alone (see the module docstring), or None."""
    if not isinstance(text, str):
        return "is not a path"
    if not text:
        return "is empty"
    if len(text) > MAX_RECORDED_PATH:
        return f"is longer than {MAX_RECORDED_PATH} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return "contains control characters (a NUL or a line break)"
    if "\\" in text:
        return "contains a backslash (jaxport records '/'-separated paths)"
    if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute() or PureWindowsPath(text).drive:
        return "is an absolute path"
    if ".." in text.split("/"):
        return "climbs out of its directory with '..'"
    return None


def resolve_under(text: str, base: Path, roots: list[Path]) -> tuple[Path | None, str | None]:
    """``base / text`` and None when it resolves (symlinks followed) under one of ``roots``; else None and why."""
    problem = path_problem(text)
    if problem is not None:
        return None, problem
    try:
        resolved = (base / text).resolve()
        inside = any(resolved.is_relative_to(r.resolve()) for r in roots)
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, a name the OS refuses
        return None, f"cannot be resolved ({type(e).__name__})"
    if not inside:
        return None, "leads outside the root (through a symbolic link)"
    return base / text, None


def is_module_style(target: str) -> bool:
    """Whether the file part of ``target:NAME`` is a module imported from Python's path rather than a file."""
    return not (target.endswith(".py") or "/" in target or target.lower().endswith(MODULE_SUFFIXES))


def shown_root(root: Path) -> str:
    return "the current directory" if root.resolve() == Path.cwd().resolve() else f"the root {root}"


def entry_point(text: str, root: Path, where: str) -> None:
    """Refuse a recorded entry point that is not a file under ``root`` (EntrypointError, exit code 4), and the
    ``<in-memory>:NAME`` of a function exported from a Python object (UsageError, exit code 2)."""
    if isinstance(text, str) and is_in_memory(text):
        raise UsageError(f"{where}: the artifact was exported from a Python object that has no importable module "
                         f"and name (a lambda, a closure, a functools.partial, a bound method, or code in __main__ "
                         f"or a notebook), so it records {text!r} as its entry point; give the live function with "
                         f"--against FILE.py:NAME.")
    target, sep, attribute = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    problem = path_problem(text)
    if problem is None and (not sep or not target or not attribute):
        problem = "is not FILE.py:NAME"
    if problem is None and is_module_style(target):
        problem = "names a module imported from Python's path (package.module:NAME), not a file"
    if problem is None:
        _, problem = resolve_under(target, root, [root])
    if problem is not None:
        raise EntrypointError(
            f"{where}: the entry point the artifact records ({text!r}) {problem}. verify imports a recorded entry "
            f"point only from a file under {shown_root(root)}, so that an artifact cannot choose the code it runs; "
            f"if you trust the code, give the live function yourself with --against FILE.py:NAME (or choose the "
            f"directory with --root DIR).")


def spec_path(text: str, root: Path) -> Path:
    """The recorded spec, under ``root``; refuse one that is not (UsageError, exit code 2)."""
    path, problem = resolve_under(text, root, [root])
    if path is None:
        raise UsageError(f"the spec the artifact records ({text!r}) {problem}. verify reads a recorded spec only "
                         f"under {shown_root(root)}; give the spec yourself with --shapes FILE (or choose the "
                         f"directory with --root DIR).")
    return path


def bind_source(source: str, base: Path, roots: list[Path], where: str) -> None:
    """Refuse a recorded bound source that is not a file under one of ``roots`` (a data file: UsageError, exit code
    2; a Python attribute, which imports code: EntrypointError, exit code 4)."""
    if isinstance(source, str) and is_in_memory(source):
        name = where.rpartition(": ")[2] or "NAME"
        raise UsageError(f"{where}: the artifact records {IN_MEMORY!r} as the bound source (the value was bound from "
                         f"memory, by jaxport.export(..., bind=...) or jaxport.rebind); give it with --bind "
                         f"{name}=SOURCE (a .npz, .safetensors or .npy file, or model.py:NAME).")
    is_file = source.lower().endswith(BIND_FILE_SUFFIXES) if isinstance(source, str) else False
    attribute = isinstance(source, str) and not is_file and ":" in source
    target = source.rpartition(":")[0] if attribute else source
    problem = path_problem(source)
    if problem is None and attribute and is_module_style(target):
        problem = "names a module imported from Python's path (package.module:NAME), not a file"
    if problem is None:
        _, problem = resolve_under(target, base, roots)
    if problem is None:
        return
    fix = (f"verify reads recorded bound sources only under {shown_root(roots[0])}, so that an artifact cannot "
           f"choose what it reads or imports; if you trust the source, give it yourself with --bind NAME=SOURCE "
           f"(or choose the directory with --root DIR).")
    error = EntrypointError if attribute else UsageError
    raise error(f"{where}: the bound source the artifact records ({source!r}) {problem}. {fix}")


# --- the root ------------------------------------------------------------------------------------------------------


def find_root(given: str | Path | None, manifest: Manifest | None, shapes: str | Path | None,
              notes: list[str]) -> Path:
    """The directory the recorded paths are followed under (see the module docstring); notes go to ``notes``."""
    if given is not None:
        path = Path(given)
        if not path.is_dir():
            raise UsageError(f"--root {given}: not a directory; give the directory the artifact's recorded entry "
                             f"point, spec and bound sources are relative to.")
        return path
    cwd = Path(".")  # relative, so that messages name recorded files as the manifest does
    if manifest is None:
        return cwd
    spec_text = manifest.source.spec if path_problem(manifest.source.spec) is None else None
    digest = manifest.source.spec_sha256
    entries = _entry_files(manifest)
    if spec_text is None and not entries:
        return cwd
    if _holds(cwd, spec_text, digest, entries):
        return cwd
    if shapes is not None:
        root = _shapes_root(Path(shapes), spec_text)
        if root.resolve() != cwd.resolve():
            notes.append(f"recorded paths are followed under {root}, the directory of --shapes (choose another with "
                         f"--root DIR)")
        return root
    if spec_text is not None and digest is not None:
        found, stopped = _search(cwd, spec_text, digest, entries)
        if found is not None:
            notes.append(f"recorded paths are followed under {found}, where the spec the artifact was exported "
                         f"from ({spec_text}) was found by its sha256 (choose another root with --root DIR)")
            return found
        if stopped:
            notes.append(f"the search for the spec the artifact was exported from ({spec_text}) stopped after "
                         f"{SEARCH_ENTRIES} entries below the current directory; give the directory the recorded "
                         f"paths are relative to with --root DIR")
    return cwd


def _entry_files(manifest: Manifest) -> list[str]:
    """The files of the recorded entry points that verify may follow (``model.py`` of ``model.py:NAME``)."""
    out: list[str] = []
    for f in manifest.functions.values():
        target, sep, _ = f.entrypoint.rpartition(":") if f.entrypoint is not None else ("", "", "")
        if sep and target and path_problem(target) is None and not is_module_style(target) and target not in out:
            out.append(target)
    return out


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _sha256(path: Path) -> str | None:
    """The sha256 of a regular file of at most a spec's size (None otherwise, or when it cannot be read)."""
    try:
        fd = open_regular(path, lambda m: JaxportError(m))
    except JaxportError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            data = read_at_most(f, MAX_SPEC_BYTES + 1)
        except OSError:
            return None
    return hashlib.sha256(data).hexdigest() if len(data) <= MAX_SPEC_BYTES else None


def _holds(root: Path, spec_text: str | None, digest: str | None, entries: list[str]) -> bool:
    """Whether the recorded paths resolve under ``root``: the recorded spec is there (with the recorded sha256,
    when there is one), or, without a spec, every recorded entry point's file is."""
    if spec_text is not None:
        path, _ = resolve_under(spec_text, root, [root])  # never a file outside the root, even to hash it
        if path is None:
            return False
        return _is_file(path) if digest is None else _sha256(path) == digest
    return all(_is_file(root / e) for e in entries)


def _shapes_root(shapes: Path, spec_text: str | None) -> Path:
    """The directory of ``--shapes``, or the one above it that the recorded spec's path is relative to
    (``x`` for ``x/specs/s.yaml`` when the artifact records ``specs/s.yaml``)."""
    parts = PurePosixPath(spec_text).parts if spec_text is not None else ()
    if len(parts) > 1:
        if len(shapes.parts) <= len(parts):
            shapes = Path(os.path.abspath(shapes))
        if shapes.parts[-len(parts):] == parts:
            return Path(*shapes.parts[:-len(parts)])
    return shapes.parent


def _search(start: Path, spec_text: str, digest: str, entries: list[str]) -> tuple[Path | None, bool]:
    """The shallowest directory below ``start`` (breadth first, names sorted) holding ``spec_text`` with the sha256
    ``digest`` (one whose recorded entry points are there too preferred); and whether the search stopped at its
    caps. Symbolic links are not followed, skipped directories not entered."""
    queue: deque[tuple[Path, int]] = deque([(start, 0)])
    seen = 0
    matches: list[Path] = []
    while queue:
        directory, depth = queue.popleft()
        if depth > 0 and _holds(directory, spec_text, digest, []):
            if all(_is_file(directory / e) for e in entries):
                return directory, False
            matches.append(directory)
        if depth >= SEARCH_DEPTH:
            continue
        try:
            with os.scandir(directory) as it:
                children = []
                for entry in it:
                    seen += 1
                    if seen > SEARCH_ENTRIES:
                        return (matches[0] if matches else None), True
                    if entry.name.startswith(".") or entry.name in SEARCH_SKIPPED:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        children.append(entry.name)
        except OSError:
            continue
        queue.extend((directory / name, depth + 1) for name in sorted(children))
    return (matches[0] if matches else None), False


# --- the spec as the export used it ---------------------------------------------------------------------------------


def as_exported(spec: ShapeSpec, manifest: Manifest, root: Path) -> ShapeSpec:
    """``spec`` as the export that wrote ``manifest`` used it: each ``bind:`` source recorded relative to ``root``
    (as ``export.entry.paths`` records it), and the command-line binds of ``source.binds`` applied to every function (a
    positional argument of that name in the artifact's signature, else a keyword), so that comparing it with the
    artifact finds what the export did."""
    paths = RootPaths(root)
    base = spec.base_dir or Path.cwd()

    def rewrite(leaf: Any) -> Any:
        if not isinstance(leaf, BindLeaf):
            return leaf
        return dataclasses.replace(leaf, source=paths.source(leaf.source, leaf.base_dir or base, ""))

    binds = manifest.source.binds or {}
    functions = manifest.functions
    out = {}
    for key, fspec in spec.functions.items():
        args = map_leaves(rewrite, fspec.args)
        kwargs = map_leaves(rewrite, fspec.kwargs)
        f = functions.get(key) if key is not None else (next(iter(functions.values())) if len(functions) == 1
                                                          else None)
        names = [a.name for a in f.signature.args] if f is not None else []
        out[key] = placed_binds(dataclasses.replace(fspec, args=args, kwargs=kwargs), binds, names)
    return dataclasses.replace(spec, functions=out)
