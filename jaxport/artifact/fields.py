"""Reading an untrusted JSON document (the manifest) one object at a time: each field checked as the kind of value
it must be where it is taken (:class:`Fields`), and the first wrong one a ``FormatError`` naming its path in
``manifest.json`` (:func:`fail`). ``manifest.validate`` reads the manifest with these, field by field, into its
records. No imports beyond the standard library's ``re``: it is on the path that reads an artifact.
"""

from __future__ import annotations

import re

from ..errors import FormatError
from .layout import MAX_NAME

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

#: A sha256 digest as the manifest writes it.
SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: A field's default that says it is required (:meth:`Fields.value`).
REQUIRED = object()


def fail(path: str, msg: str) -> FormatError:
    return FormatError(f"manifest.json: {path}: {msg}")


def as_object(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise fail(path, f"expected an object, found {type(v).__name__}")
    return v


def as_list(v: Any, path: str, limit: int = 1 << 20) -> list[Any]:
    if not isinstance(v, list):
        raise fail(path, f"expected a list, found {type(v).__name__}")
    if len(v) > limit:
        raise fail(path, f"has {len(v)} entries; at most {limit} are allowed")
    return v


def as_string(v: Any, path: str, limit: int = MAX_NAME) -> str:
    if not isinstance(v, str):
        raise fail(path, f"expected a string, found {type(v).__name__}")
    if len(v) > limit:
        raise fail(path, f"string is {len(v)} characters; at most {limit} are allowed")
    return v


def as_integer(v: Any, path: str, lo: int = 0, hi: int = (1 << 63) - 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise fail(path, f"expected an integer, found {type(v).__name__}")
    if not lo <= v <= hi:
        raise fail(path, f"{v} is out of range [{lo}, {hi}]")
    return v


def as_digest(v: Any, path: str) -> str:
    if not SHA256.match(as_string(v, path, 64)):
        raise fail(path, "expected 64 lowercase hex digits")
    return v


def peek(v: Any, key: str) -> Any:
    """``v[key]`` of a value not yet checked, or None when ``v`` is no object or lacks the key."""
    return v.get(key) if isinstance(v, dict) else None


class Fields:
    """One object of the manifest being read: its fields by name, each checked as it is taken. ``path`` names the
    object in messages; ``at(key)`` names a field."""

    __slots__ = ("raw", "path", "prefix")

    def __init__(self, raw: Any, path: str, prefix: str | None = None) -> None:
        self.raw = as_object(raw, path)
        self.path = path
        self.prefix = f"{path}." if prefix is None else prefix

    def at(self, key: str) -> str:
        return self.prefix + key

    def has(self, key: str) -> bool:
        return key in self.raw

    def value(self, key: str, default: Any = REQUIRED) -> Any:
        """The field's JSON value; a missing one is ``default``, or an error when the field is required."""
        if key in self.raw:
            return self.raw[key]
        if default is REQUIRED:
            raise fail(self.path, f"missing required field {key!r}")
        return default

    def fields(self, key: str, default: Any = REQUIRED) -> Fields:
        return Fields(self.value(key, default), self.at(key))

    def string(self, key: str, limit: int = MAX_NAME, default: Any = REQUIRED) -> str:
        return as_string(self.value(key, default), self.at(key), limit)

    def optional_string(self, key: str, limit: int = MAX_NAME) -> str | None:
        """A string, or None when the field is missing or null."""
        v = self.value(key, None)
        return None if v is None else as_string(v, self.at(key), limit)

    def integer(self, key: str, lo: int = 0, hi: int = (1 << 63) - 1, default: Any = REQUIRED) -> int:
        return as_integer(self.value(key, default), self.at(key), lo, hi)

    def boolean(self, key: str, default: bool) -> bool:
        if not isinstance(v := self.value(key, default), bool):
            raise fail(self.at(key), f"expected true or false, found {type(v).__name__}")
        return v

    def optional_integer(self, key: str) -> int | None:
        """An integer when the field is there (null is no integer), else None."""
        return as_integer(self.raw[key], self.at(key)) if key in self.raw else None

    def list(self, key: str, limit: int = 1 << 20, default: Any = REQUIRED) -> list[Any]:
        return as_list(self.value(key, default), self.at(key), limit)

    def strings(self, key: str, limit: int = 1 << 16, length: int = MAX_NAME) -> tuple[str, ...]:
        """A list of strings, empty when the field is missing."""
        path = self.at(key)
        return tuple(as_string(s, f"{path}[{i}]", length) for i, s in enumerate(self.list(key, limit, [])))
