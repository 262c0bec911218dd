"""Where an operation of a JAX program comes from: its MLIR location read as the user's source line.

JAX gives every operation a location (``Operation.location``; printed ``loc(...)``). A program lowered now, with
full tracebacks, says ``"jit(f)/dot_general"(callsite("helper"("/abs/model.py":4:11) at callsite("f"(...) at ...)))``:
the name stack and the JAX primitive, then the Python frames, innermost first, each a function name around a file
location. An exported program keeps one frame, its path relative to the export root and without a function name:
``"add"("jit(predict)"("model.py":23:20))``. An operation of an inlined function (a nested ``jax.jit``) is a call
site: ``callsite("max" at "jit(f)/jit(relu)"(...))``, the callee's location at the caller's.

:func:`parse` reads the printed location (its text: the Python bindings of the JAX releases jaxport supports do not
all expose a location's parts) into a :class:`Where`: the innermost frame that is not jaxport's or JAX's own, the
function (from the frame, else from the source file when it is at hand, see :func:`enclosing_function`), the JAX
primitive and the name stack. No JAX.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: Directories whose frames are never the user's: jaxport's own package (the live function is called through it),
#: and JAX's (whose frames JAX itself filters out of locations already).
_JAXPORT_DIR = str(Path(__file__).resolve().parents[2])
_INTERNAL_PARTS = ("/site-packages/jax/", "/site-packages/jaxlib/", "/dist-packages/jax/", "/dist-packages/jaxlib/")
#: Where installed libraries live: a frame there (flax, equinox) is passed over for one of the user's own files.
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/")
_PRIMITIVE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Frame:
    """One Python frame of a location: the file as the program records it, the line and column, and the function
    when the location names it."""

    file: str
    line: int
    column: int
    function: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "column": self.column, "function": self.function}


@dataclass(frozen=True)
class Where:
    """Where an operation comes from: the user's frame (``frame``; None when the program records none), the frames
    around it (innermost first), the JAX primitive (``dot_general``) and the name stack (``jit(f)/jit(relu)``)."""

    frame: Frame | None = None
    primitive: str | None = None
    name_stack: str | None = None
    frames: tuple[Frame, ...] = field(default=())

    @property
    def file(self) -> str | None:
        return self.frame.file if self.frame else None

    @property
    def line(self) -> int | None:
        return self.frame.line if self.frame else None

    @property
    def function(self) -> str | None:
        return self.frame.function if self.frame else None

    def shown(self) -> str:
        """``model.py:42 (encode)``, ``model.py:42``, or ``(no source location)``."""
        if self.frame is None:
            return "(no source location)"
        text = f"{self.frame.file}:{self.frame.line}"
        return f"{text} ({self.frame.function})" if self.frame.function else text

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "column": self.frame.column if self.frame else None,
                "function": self.function, "primitive": self.primitive, "name_stack": self.name_stack,
                "shown": self.shown(), "frames": [f.to_json() for f in self.frames]}

    def relative(self, roots: list[Path]) -> Where:
        """The same location with absolute paths under one of ``roots`` made relative to it (a live function's
        frames are absolute; an exported program's are relative to its export root already), and the function filled
        in from the source file when the location does not name it and the file is there (else it stays unknown: the
        name stack's ``jit(NAME)`` is the function jitted, not necessarily the one whose line this is)."""

        def rel(frame: Frame) -> Frame:
            path = Path(frame.file)
            shown = frame.file
            for root in roots:
                if path.is_absolute():
                    try:
                        shown = str(path.resolve().relative_to(root.resolve()))
                        break
                    except (ValueError, OSError):
                        continue
            else:
                if path.is_absolute():  # a library's file: as Python imports it, no path of this machine
                    shown = _importable(path) or shown
            function = frame.function
            if function is None:
                for root in roots:
                    source = path if path.is_absolute() else root / path
                    function = enclosing_function(source, frame.line)
                    if function is not None:
                        break
            return replace(frame, file=shown, function=function)

        frames = tuple(rel(f) for f in self.frames)
        frame = rel(self.frame) if self.frame is not None else None
        return replace(self, frame=frame, frames=frames)


def _importable(path: Path) -> str | None:
    """``path`` relative to the deepest entry of ``sys.path`` it lies under (``flax/linen/linear.py``: how Python
    imports it), or None when it lies under none."""
    import sys

    return _under(str(path), tuple(sys.path))


@functools.lru_cache(maxsize=1024)
def _under(path: str, entries: tuple[str, ...]) -> str | None:
    """:func:`_importable` of one path, once per path and ``sys.path`` (a program's operations share a few files)."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return None
    best: Path | None = None
    for entry in _resolved(entries):
        try:
            under = resolved.relative_to(entry)
        except ValueError:
            continue
        if under.parts and (best is None or len(under.parts) < len(best.parts)):
            best = under
    return str(best) if best is not None else None


@functools.lru_cache(maxsize=8)
def _resolved(entries: tuple[str, ...]) -> tuple[Path, ...]:
    out = []
    for entry in filter(None, entries):  # "" (the working directory) is a root already
        try:
            out.append(Path(entry).resolve())
        except (OSError, RuntimeError):
            continue
    return tuple(out)


# --- reading a printed location -------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(\d+)|([A-Za-z_][A-Za-z0-9_.$]*)|(.))')


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        string, number, word, punct = m.groups()
        if string is not None:
            out.append(("str", _unquote(string[1:-1])))
        elif number is not None:
            out.append(("int", number))
        elif word is not None:
            out.append(("word", word))
        elif punct is not None and not punct.isspace():
            out.append(("punct", punct))
    return out


def _unquote(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: m.group(1), s)


class _Parser:
    """A recursive reader of MLIR's location syntax (file, name, call site, fused, unknown)."""

    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("end", "")

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        if self.take()[1] != value:
            raise ValueError(value)

    def loc(self) -> Any:
        kind, value = self.peek()
        if kind == "word" and value == "loc":
            self.take()
            self.expect("(")
            inner = self.loc()
            self.expect(")")
            return inner
        if kind == "word" and value == "unknown":
            self.take()
            return None
        if kind == "word" and value == "callsite":
            self.take()
            self.expect("(")
            callee = self.loc()
            self.expect("at")
            caller = self.loc()
            self.expect(")")
            return ("call", callee, caller)
        if kind == "word" and value == "fused":
            self.take()
            if self.peek()[1] == "<":  # fused<metadata>[...]: the metadata is skipped
                depth = 0
                while True:
                    v = self.take()[1]
                    depth += (v == "<") - (v == ">")
                    if depth == 0 or self.peek()[0] == "end":
                        break
            self.expect("[")
            items = [self.loc()]
            while self.peek()[1] == ",":
                self.take()
                items.append(self.loc())
            self.expect("]")
            return ("fused", items)
        if kind == "str":
            self.take()
            if self.peek()[1] == ":" and self.peek(1)[0] == "int":
                self.take()
                line = int(self.take()[1])
                column = 0
                if self.peek()[1] == ":" and self.peek(1)[0] == "int":
                    self.take()
                    column = int(self.take()[1])
                if self.peek() == ("word", "to"):  # a range: "to :C" or "to L:C"
                    self.take()
                    while self.peek()[0] in ("int",) or self.peek()[1] == ":":
                        self.take()
                return ("file", value, line, column)
            if self.peek()[1] == "(":
                self.take()
                child = self.loc()
                self.expect(")")
                return ("name", value, child)
            return ("name", value, None)
        raise ValueError(f"unexpected {value!r}")


def _is_function_name(name: str) -> bool:
    """A frame's function (``f``, ``<module>``, ``Model.__call__``), not a name stack (``jit(f)/add``)."""
    return bool(name) and "(" not in name and "/" not in name


def _walk(node: Any, events: list[tuple[str, Frame | None]]) -> None:
    """The names and file locations of a location tree, callee first: ``(name, frame it wraps or None)``, and
    ``("", frame)`` for a file location wrapped by no name."""
    if node is None:
        return
    kind = node[0]
    if kind == "file":
        events.append(("", Frame(node[1], node[2], node[3])))
    elif kind == "name":
        _, name, child = node
        if child is not None and child[0] == "file":
            events.append((name, Frame(child[1], child[2], child[3])))
            return
        if name:
            events.append((name, None))
        _walk(child, events)
    elif kind == "call":
        _walk(node[1], events)
        _walk(node[2], events)
    elif kind == "fused":
        for item in node[1]:
            _walk(item, events)


def internal(path: str) -> bool:
    """Whether a frame's file is jaxport's or JAX's own (never the user's line)."""
    return path.startswith(_JAXPORT_DIR + "/") or any(p in path for p in _INTERNAL_PARTS) or \
        path.startswith("<frozen")


def parse(text: str) -> Where:
    """The :class:`Where` of a printed MLIR location (see the module docstring); an unreadable one gives an empty
    ``Where`` rather than an error: a location is a help, never a reason to stop."""
    try:
        tree = _Parser(text).loc()
    except (ValueError, IndexError):
        return Where()
    events: list[tuple[str, Frame | None]] = []
    _walk(tree, events)
    # The first name is the operation's: the primitive (``add``; exported programs wrap the file in it), or the name
    # stack and the primitive (``jit(f)/add``), or the name stack alone (an operation JAX made for no primitive).
    named = [(k, name) for k, (name, _) in enumerate(events) if name]
    primitive = stack = None
    first = named[0][0] if named else -1
    if named:
        head = named[0][1]
        last = head.rsplit("/", 1)[-1]
        if _PRIMITIVE.fullmatch(last):
            primitive = last
            stack = head.rsplit("/", 1)[0] if "/" in head else None
    for _, name in named:
        if stack is None and ("(" in name or "/" in name):
            stack = name.rsplit("/", 1)[0] if primitive and name.endswith("/" + primitive) else name
            break
    frames = []
    for k, (name, frame) in enumerate(events):
        if frame is None:
            continue
        function = name if _is_function_name(name) and k != first else None
        frames.append(replace(frame, function=function))
    user = tuple(f for f in frames if not internal(f.file))
    own = [f for f in user if not any(p in f.file for p in _LIBRARY_PARTS)]
    return Where(own[0] if own else user[0] if user else None, primitive, stack, user)


def enclosing_function(path: Path, line: int) -> str | None:
    """The innermost ``def`` of a Python source file that holds ``line`` (``Class.method`` inside a class), or None
    when the file is not there or not Python."""
    try:
        tree = _read_tree(path)
    except (OSError, SyntaxError, ValueError):
        return None
    best: tuple[int, str] | None = None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                end = getattr(child, "end_lineno", None) or child.lineno
                name = f"{prefix}{child.name}"
                if child.lineno <= line <= end:
                    if not isinstance(child, ast.ClassDef) and (best is None or child.lineno >= best[0]):
                        best = (child.lineno, name)
                    visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return best[1] if best else None


_TREES: dict[str, ast.Module] = {}


def _read_tree(path: Path) -> ast.Module:
    key = str(path.resolve())
    if key not in _TREES:
        if path.suffix != ".py":
            raise ValueError(path)
        _TREES[key] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return _TREES[key]
