"""Loading the user's function from ``path/to/model.py:NAME`` or ``package.module:NAME``.

Loading an entry point runs the user's code: that is the point of ``export``, and the only place jaxport executes
anything it did not ship. Artifacts and specs are never executed.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import collection
from ..._fsio import nearby, open_regular, shown_path
from ...errors import EntrypointError
from .paths import IN_MEMORY


@dataclass(frozen=True)
class Entrypoint:
    """A loaded entry point."""

    function: Callable[..., Any]
    #: The entry point as written, with a file path made relative to ``root`` (what the manifest records).
    spec: str
    #: The attribute path (``predict`` or ``Model.apply``); its last part names the function in the artifact.
    attribute: str
    #: Directory the entry point resolves in: the file's directory, or the current directory for a module.
    root: Path
    #: The function's name in the artifact when the attribute path's last part is not one (a lambda's).
    artifact_name: str | None = None

    @property
    def name(self) -> str:
        return self.artifact_name or self.attribute.rsplit(".", 1)[-1]


#: The name an entry point's file ``model.py`` is imported under: ``ENTRY_MODULE_PREFIX + "model"`` (not ``model``,
#: so that it cannot shadow a module of that name).
ENTRY_MODULE_PREFIX = "_jaxport_entry_"


def _user_traceback(exc: BaseException, user_file: str | None) -> str:
    """The frames of ``exc`` that belong to the user's code, formatted as Python does."""
    frames = traceback.extract_tb(exc.__traceback__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the export package, this room's parent
    keep = [f for f in frames if not f.filename.startswith(here) and "importlib" not in f.filename
            and not f.filename.startswith("<frozen")]
    lines = traceback.format_list(keep)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


#: Directories entry points were loaded from, in this process.
_ROOTS: list[Path] = []


def _module_dir(module: Any) -> str | None:
    """The directory a top-level module was imported from (a package's parent directory), or None."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    here = os.path.dirname(file)
    return os.path.dirname(here) if os.path.basename(file) == "__init__.py" else here


def _enter_root(root: Path) -> None:
    """Put ``root`` first on ``sys.path``, and forget modules that an earlier entry point's directory provided under a
    name ``root`` also provides: ``import helper`` must find this model's ``helper.py``, not the one cached from the
    model exported before it in the same process."""
    others = {str(r) for r in _ROOTS if r != root}
    for name, module in list(sys.modules.items()):
        if "." in name or _module_dir(module) not in others:
            continue
        if (root / f"{name}.py").is_file() or (root / name / "__init__.py").is_file():
            for sub in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                del sys.modules[sub]
    if root not in _ROOTS:
        _ROOTS.append(root)
    if str(root) in sys.path:
        sys.path.remove(str(root))
    sys.path.insert(0, str(root))


def _callables(owner: Any, module: Any) -> list[str]:
    """Public callables defined by ``owner`` itself (not imported into it), for "no attribute" hints."""
    out = []
    for n, v in vars(owner).items() if hasattr(owner, "__dict__") else ():
        if n.startswith("_") or not callable(v):
            continue
        if owner is module and getattr(v, "__module__", None) != module.__name__:
            continue
        out.append(n)
    return sorted(out)


def split_entrypoint(text: str) -> tuple[str, str]:
    if ":" not in text:
        raise EntrypointError(f"entry point {text!r}: expected 'path/to/model.py:NAME' or 'package.module:NAME'.")
    target, _, attribute = text.rpartition(":")
    if not target or not attribute:
        raise EntrypointError(f"entry point {text!r}: expected 'path/to/model.py:NAME' or 'package.module:NAME'.")
    return target, attribute


def load_entrypoint(text: str, base_dir: str | Path | None = None) -> Entrypoint:
    """Import the module and look up the attribute path of ``text`` (``file.py:NAME`` or ``pkg.mod:obj.method``).

    A file path is resolved against ``base_dir`` (default: the current directory); the file's directory is put at
    the front of ``sys.path`` while it loads and stays importable afterwards, so the function's own lazy imports
    keep working.
    """
    return _load(text, base_dir, require_callable=True)


def load_attribute(text: str, base_dir: str | Path | None = None) -> Any:
    """The value of ``file.py:NAME`` or ``package.module:NAME`` (any object, e.g. bound parameters); for
    ``<in-memory>:NAME``, while ``in_memory_values`` holds it, a zero-argument function returning it."""
    target, _, attribute = text.rpartition(":")
    if target == IN_MEMORY:
        values = _IN_MEMORY_VALUES.get() or {}
        if attribute not in values:
            raise EntrypointError(f"entry point {text!r}: no value from memory named {attribute!r}; {IN_MEMORY} "
                                  f"marks a value given to jaxport.export(..., bind={{NAME: value}}) in Python. Give "
                                  f"a file or a Python attribute (model.py:NAME) instead.")
        value = values[attribute]
        return lambda: value  # a zero-argument callable, which the binder calls (the value itself may be callable)
    return _load(text, base_dir, require_callable=False).function


#: Values bound from memory, by name, for ``load_attribute`` of ``<in-memory>:NAME`` (one mapping per thread or
#: task: concurrent exports do not see each other's values).
_IN_MEMORY_VALUES: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar("jaxport_in_memory",
                                                                                              default=None)


@contextlib.contextmanager
def in_memory_values(values: Mapping[str, Any]) -> Iterator[None]:
    """Make ``values`` loadable as ``<in-memory>:NAME`` (a bound source) while the block runs."""
    token = _IN_MEMORY_VALUES.set({**(_IN_MEMORY_VALUES.get() or {}), **values})
    try:
        yield
    finally:
        _IN_MEMORY_VALUES.reset(token)


def _load(text: str, base_dir: str | Path | None, require_callable: bool) -> Entrypoint:
    target, attribute = split_entrypoint(text)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    is_file = target.endswith(".py") or os.sep in target or "/" in target
    if is_file:
        try:
            path = (base / target).resolve() if not os.path.isabs(target) else Path(target).resolve()
            exists = path.exists()
        except (OSError, ValueError) as e:  # a NUL byte, a name too long, a symbolic-link loop
            reason = e.strerror if isinstance(e, OSError) and e.strerror else "the path contains a NUL byte"
            raise EntrypointError(f"entry point {text!r}: cannot read {shown_path(target)}: {reason}.") from None
        if not exists:
            raise EntrypointError(f"entry point {text!r}: file {target} not found"
                                  f"{'' if path.parent.is_dir() else ' (its directory does not exist)'}."
                                  f"{nearby(target, base) if not os.path.isabs(target) else nearby(target)}")
        # Python's importer opens the file itself: it must be a regular file (a FIFO would block the import)
        os.close(open_regular(path, lambda m: EntrypointError(f"entry point {text!r}: {m}"),
                              directory="a Python file"))
        root = path.parent
        module_name = ENTRY_MODULE_PREFIX + re.sub(r"\W", "_", path.stem)
        _enter_root(root)
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise EntrypointError(f"entry point {text!r}: cannot load {target} as a Python module.")
        collection.user_code()  # the user's module imports with the collector on, as in plain Python
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001 - any failure of the user's module is reported as theirs
            sys.modules.pop(module_name, None)
            if isinstance(e, KeyboardInterrupt):
                raise
            raise EntrypointError(f"entry point {text!r}: importing {target} raised an exception:\n"
                                  f"{_user_traceback(e, str(path))}") from e
        recorded = f"{path.name}:{attribute}"
        user_file: str | None = str(path)
    else:
        root = base.resolve()
        _enter_root(root)
        collection.user_code()
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name and (target == e.name or target.startswith(e.name + ".")):
                raise EntrypointError(f"entry point {text!r}: no module named {e.name!r}. Check the spelling, or "
                                      f"give a file path such as 'model.py:{attribute}'.") from None
            raise EntrypointError(f"entry point {text!r}: importing {target} raised an exception:\n"
                                  f"{_user_traceback(e, None)}") from e
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            raise EntrypointError(f"entry point {text!r}: importing {target} raised an exception:\n"
                                  f"{_user_traceback(e, None)}") from e
        recorded = text
        user_file = getattr(module, "__file__", None)

    obj: Any = module
    walked: list[str] = []
    for part in attribute.split("."):
        if not part.isidentifier():
            raise EntrypointError(f"entry point {text!r}: {attribute!r} is not an attribute path.")
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if not n.startswith("__")]
            close = difflib.get_close_matches(part, names, n=3)
            owner = ".".join(walked) or target
            if close:
                quoted = [repr(c) for c in close]
                either = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
                hint = f" Did you mean {either}?"
            else:
                defined = _callables(obj, module)
                hint = f" It defines: {', '.join(defined[:10])}{', ...' if len(defined) > 10 else ''}." \
                    if defined else ""
            raise EntrypointError(f"entry point {text!r}: {owner} has no attribute {part!r}.{hint}") from None
        except Exception as e:  # noqa: BLE001 - a property of the user's object raised
            raise EntrypointError(f"entry point {text!r}: reading {part!r} raised:\n"
                                  f"{_user_traceback(e, user_file)}") from e
        walked.append(part)
    if require_callable and not callable(obj):
        kind = type(obj).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise EntrypointError(f"entry point {text!r}: {attribute} is {article} {kind}, not a function. "
                              f"Point at a function (or any callable).")
    return Entrypoint(obj, recorded, attribute, root)
