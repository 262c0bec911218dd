"""What an artifact records for ``verify`` to follow (entry points, the spec, bound sources, an imported module),
resolved under a root the user controls.

Trust model: the manifest is written by whoever wrote the artifact, and ``verify`` acts on four things it records:
each function's entry point (imported: it runs code), the spec (read), the sources of bound weights (read, or
imported when they name a Python attribute) and, for an imported artifact, the foreign module (parsed and lowered).
So an artifact must not be able to choose what ``verify`` imports or reads. A recorded path is followed only when it
is relative, has no ``..`` component and no backslash, holds no control character (a NUL, a line break), names a
file (``model.py:NAME``, never ``package.module:NAME``, which imports from Python's path), and still lies under
the root once symlinks are resolved. The root is the current directory unless the user gives another (``--root``).
What the user names (``--against``, ``--shapes``, ``--bind``) is taken as given: that is the user's decision.
jaxport's exporter records exactly such paths (relative to the current directory, ``/``-separated), so an artifact
it wrote and verified from its project directory never meets these refusals.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from ..errors import EntrypointError, UsageError

#: Recorded paths longer than this are refused before any file system call.
MAX_RECORDED_PATH = 4096
#: Suffixes of the foreign modules an imported artifact records as its entry point.
MODULE_SUFFIXES = (".mlir", ".mlirbc")
#: Suffixes of the data files a ``bind:`` names (anything else with a ``:`` is a Python attribute).
BIND_FILE_SUFFIXES = (".npz", ".npy", ".safetensors")


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
    """Refuse a recorded entry point that is not a file under ``root`` (EntrypointError, exit code 4)."""
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
