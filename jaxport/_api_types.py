"""The public functions' argument checks: a wrong type is a ``TypeError`` (``ArgumentTypeError``, also a
``UsageError``) naming the parameter and the types it takes, a malformed value a :class:`JaxportError`, never
another exception (``AttributeError`` from deep inside, ``RecursionError`` for a spec dict that contains itself).

:func:`checked` wraps a function of the public API (``jaxport/__init__.py``). The accepted types are read from the
function's own annotations (``str | Path | None``), so that they cannot drift from what the function documents:
``str``, ``Path`` (any ``os.PathLike``), ``bool``, ``int`` (never a bool), ``float`` (an int too), ``None``,
``Mapping``, ``Sequence``/``list``/``tuple``/``Iterable`` (never a string or bytes), ``Callable``, and the package's
own classes; a name the check does not know (``Any``) accepts anything. Values inside containers are the function's
to check. A function that takes a request's fields lists each as a parameter of its own (``jaxport.export(fn, spec,
name=..., ...)``), checked as every other, and builds the request once (:func:`record_of`); :func:`check_fields`
checks a request's fields by the same rules where it is built. An error that escapes the function without being a
``JaxportError`` (a value of the right type but of the wrong shape: a mapping without a key it needs, a structure
nested without end) becomes the function's error class (``ERRORS``), its message naming the function and the
exception. That mapping is for reading the arguments only: an exception raised while a program is compiled or run
(through a function marked :func:`runs_program`, such as a backend's ``compile`` and ``execute``) is the program's
failure, whatever its type (XLA reports a bounds check as an ``IndexError``), and becomes a ``PlatformError`` saying
so.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from .errors import FormatError, JaxportError, PlatformError, PolicyFileError, SpecError, UsageError

#: The error class a malformed value of each function becomes (default ``UsageError``).
ERRORS: dict[str, type[JaxportError]] = {
    "parse_spec": SpecError, "load_spec": SpecError, "load_policy": PolicyFileError, "check": PolicyFileError,
    "compare_manifests": FormatError, "open_artifact": FormatError,
}
#: Exceptions that a malformed value (of an accepted type) makes escape from deep inside; anything else (an error of
#: the user's own code at export, KeyboardInterrupt, MemoryError) passes as it is.
MALFORMED = (RecursionError, AttributeError, KeyError, IndexError, TypeError, ValueError, OverflowError)


#: The code of the functions that compile or run a program (:func:`runs_program`).
_PROGRAM_CODE: set[object] = set()
_F = TypeVar("_F", bound=Callable[..., Any])
R = TypeVar("R")


def runs_program(fn: _F) -> _F:
    """Mark ``fn`` (a backend's ``compile``, ``execute``, ``trace``) as compiling or running a program: an exception
    that escapes a public function through it is the program's failure, never a malformed argument."""
    _PROGRAM_CODE.add(fn.__code__)
    return fn


def raised_running(e: BaseException) -> bool:
    """Whether ``e`` was raised inside a function marked :func:`runs_program` (one of its traceback's frames)."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in _PROGRAM_CODE:
            return True
        tb = tb.tb_next
    return False


#: The error class of a malformed value, by parameter name, where it is not the function's.
PARAMETER_ERRORS: dict[str, type[JaxportError]] = {"spec": SpecError, "text": SpecError, "policy": PolicyFileError}
#: Containers looked into by the self-containment check, at most (a larger structure is the function's to read).
_WALK_LIMIT = 1_000_000


def _contains_itself(value: object) -> bool:
    """Whether a tree of dicts, lists and tuples holds one of its own ancestors (iteratively: it may be deep)."""
    on_path: set[int] = set()
    stack: list[tuple[object, Iterator[object] | None]] = [(value, None)]
    seen = 0
    while stack:
        node, children = stack[-1]
        if children is None:
            if id(node) in on_path:
                return True
            on_path.add(id(node))
            items = node.values() if isinstance(node, Mapping) else node
            stack[-1] = (node, iter(items))  # type: ignore[call-overload]
            continue
        child = next(children, _END)
        if child is _END:
            stack.pop()
            on_path.discard(id(node))
            continue
        if isinstance(child, (Mapping, list, tuple)):
            seen += 1
            if seen > _WALK_LIMIT:
                return False
            stack.append((child, None))
    return False


_END = object()


class ArgumentTypeError(UsageError, TypeError):
    """A public function's argument of a type it does not take: a ``TypeError`` (Python's convention) that is also
    a ``UsageError`` (the package's, which callers catching ``JaxportError`` see)."""


def _never_text(value: object) -> bool:
    return not isinstance(value, (str, bytes, bytearray))


#: Annotation names -> (predicate, the words of the message).
_KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "str"),
    "Path": (lambda v: isinstance(v, (str, os.PathLike)), "os.PathLike"),
    "bool": (lambda v: isinstance(v, bool), "bool"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "int"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "float"),
    "None": (lambda v: v is None, "None"),
    "Mapping": (lambda v: isinstance(v, Mapping), "a mapping (dict)"),
    "dict": (lambda v: isinstance(v, Mapping), "a mapping (dict)"),
    "Sequence": (lambda v: isinstance(v, Sequence) and _never_text(v), "a sequence (list or tuple)"),
    "list": (lambda v: isinstance(v, (list, tuple)), "a list"),
    "tuple": (lambda v: isinstance(v, (list, tuple)), "a tuple"),
    "Iterable": (lambda v: isinstance(v, Iterable) and _never_text(v), "an iterable (list or tuple)"),
    "Callable": (callable, "a callable"),
}


def _alternatives(annotation: str) -> list[str]:
    """The top-level alternatives of an annotation string: ``str | Path | None`` -> ``[str, Path, None]``, the
    parameters of a generic dropped (``Mapping[str, int]`` -> ``Mapping``)."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for c in annotation:
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append("".join(current).strip())
            current = []
            continue
        if depth == 0 and c not in "[]":
            current.append(c)
    out.append("".join(current).strip())
    return [a.rsplit(".", 1)[-1] for a in out]


def _is_instance(value: object, cls: type) -> bool:
    return isinstance(value, cls)


def _checker(annotation: Any, classes: Mapping[str, type]) -> tuple[Callable[[object], bool], str] | None:
    """A predicate and the accepted types' words for one parameter; None where any value is accepted."""
    if annotation is inspect.Parameter.empty or not isinstance(annotation, str):
        return None
    preds, words = [], []
    for name in _alternatives(annotation):
        if name in _KINDS:
            pred, word = _KINDS[name]
        elif name in classes:
            cls = classes[name]
            pred, word = functools.partial(_is_instance, cls=cls), name
        else:
            return None  # Any, or a type this check does not know: the function decides
        preds.append(pred)
        words.append(word)
    return (lambda v: any(p(v) for p in preds)), " or ".join(dict.fromkeys(words))


def _type_error(owner: str, param: str, value: object, check: tuple[Callable[[object], bool], str] | None
                ) -> ArgumentTypeError | None:
    """The error of an argument ``value`` of a type ``check`` refuses; None where it takes it."""
    if check is None or check[0](value):
        return None
    return ArgumentTypeError(f"jaxport.{owner}(): {param} must be {check[1]}, not {type(value).__name__}")


def check_fields(record: Any) -> None:
    """Refuse a field of the dataclass instance ``record`` (a request such as ``ExportRequest``, built by its
    ``__post_init__``) of a type its annotation does not name, as :func:`checked` refuses an argument."""
    for f in dataclasses.fields(record):
        error = _type_error(type(record).__name__, f.name, getattr(record, f.name), _checker(f.type, {}))
        if error is not None:
            raise error


def record_of(cls: type[R], given: R | None, keywords: Mapping[str, Any], parameter: str) -> R:
    """The record a public function builds once from its arguments: ``given`` (the record passed as ``parameter``;
    default: ``cls()``, every field's default), with each of the record's fields in ``keywords`` that is not its
    default replacing the field (:func:`changed`). The function lists every field as a parameter of its own, with the
    field's default, so that its signature shows them (``help``, an IDE) and nothing beyond the facade takes a record's
    fields as keywords (``scripts/check_layers.py``, rule 7), and hands its parameters here (``locals()``: the names
    that are no field of ``cls`` are left out, so that a field added to the record is one parameter added, not also one
    more entry in a list at each caller). A ``given`` that is no ``cls`` is a ``UsageError`` naming ``parameter``."""
    if given is not None and not isinstance(given, cls):
        raise UsageError(f"{parameter} must be a jaxport.{cls.__name__}, not {type(given).__name__}.")
    record = given if given is not None else cls()
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    replaced = changed(cls, {k: v for k, v in keywords.items() if k in names})
    return dataclasses.replace(record, **replaced) if replaced else record  # type: ignore[type-var]


def changed(cls: type, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """The ``keywords`` (fields of the dataclass ``cls``, by name) whose values are not their fields' defaults: what
    a keyword given to a public function changes in a record given with it. A value equal to the default (a bool,
    number, string or tuple of the default's own type) or the default itself leaves the record's field as it is."""
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING
                for f in dataclasses.fields(cls)}
    return {k: v for k, v in keywords.items() if not _is_default(v, defaults[k])}


def _is_default(value: object, default: object) -> bool:
    return value is default or (type(value) is type(default) and isinstance(value, (bool, int, float, str, tuple))
                                 and value == default)


def checked(name: str, fn: Callable[..., Any], classes: Callable[[], Mapping[str, type]]) -> Callable[..., Any]:
    """``fn`` with its arguments' types checked and its malformed-value errors made ``JaxportError``s (see the module
    docstring). ``classes`` gives the package's classes an annotation may name (``ShapeSpec``, ``Artifact``,
    ``ExportRequest``, ...), called at the first call (importing them is not free)."""
    found: list[tuple[inspect.Signature, dict[str, tuple[Callable[[object], bool], str]]]] = []
    error = ERRORS.get(name, UsageError)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not found:
            known: Mapping[str, type] = classes()  # looked up by name: only the classes named are imported
            signature = inspect.signature(fn)
            found.append((signature, {p.name: c for p in signature.parameters.values()
                                      if (c := _checker(p.annotation, known)) is not None}))
        signature, checks = found[0]
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentTypeError(f"jaxport.{name}(): {e}") from None
        for param, value in bound.arguments.items():
            type_error = _type_error(name, param, value, checks.get(param))
            if type_error is not None:
                raise type_error
            if isinstance(value, (Mapping, list, tuple)) and _contains_itself(value):
                raise PARAMETER_ERRORS.get(param, error)(
                    f"jaxport.{name}(): {param} contains itself (a dict or list that holds itself, directly or "
                    f"not); give a tree of plain values.")
        try:
            return fn(*args, **kwargs)
        except JaxportError:
            raise
        except MALFORMED as e:
            if isinstance(e.__cause__ or e.__context__, MemoryError):
                raise  # raised while memory ran short: the out-of-memory crash, whatever the argument
            if raised_running(e):
                raise PlatformError(f"jaxport.{name}(): the program failed while it was compiled or run "
                                    f"({type(e).__name__}: {str(e).strip()[:200]}): the program is damaged or "
                                    f"hostile, or this platform cannot run it; 'jaxport call --isolate' runs it in "
                                    f"a child process that contains what it does.") from e
            if isinstance(e, RecursionError):
                what = "an argument nests too deep, or contains itself"
            else:
                what = f"{type(e).__name__}: {str(e)[:200]}"
            raise error(f"jaxport.{name}(): a malformed argument ({what}). Check the values given against "
                        f"the function's documentation.") from e

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper
