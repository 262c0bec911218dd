"""Strict JSON for files that may be hostile: the artifact's manifest and a ``.safetensors`` header.

UTF-8 only, no duplicate keys, no NaN or Infinity, numbers in range, nesting at most 64 deep (the bound is checked
before :mod:`json` recurses); anything else is a ``ValueError`` (``UnicodeDecodeError`` included).
"""

from __future__ import annotations

import itertools
import json
import re

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

#: A JSON string, to its closing quote or, unterminated, to the end (a dangling backslash included); what is left
#: once strings are removed, but brackets; and how each bracket changes the nesting depth.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}


def strict_json(data: bytes) -> Any:
    """Parse JSON bytes as the artifact reader does: UTF-8, no duplicate keys, no NaN or Infinity, numbers in range,
    nesting at most 64 deep; ``ValueError`` (``UnicodeDecodeError`` included) for anything else."""
    def no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"duplicate key {k!r}")
            out[k] = v
        return out

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"the number {text[:20]}{'...' if len(text) > 20 else ''} is out of range")
        return value

    def bounded_int(text: str) -> int:
        if len(text.lstrip("-")) > 40:  # far beyond any field's range; int() of thousands of digits is slow
            raise ValueError(f"an integer of {len(text.lstrip('-'))} digits is out of range")
        return int(text)

    text = data.decode("utf-8")
    # The json module recurses per nesting level: bound it before parsing, counting the brackets outside strings.
    brackets = _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text))
    if max(itertools.accumulate(map(_NESTING.__getitem__, brackets)), default=0) > 64:
        raise ValueError("nesting deeper than 64 levels")
    return json.loads(text, object_pairs_hook=no_dupes, parse_constant=no_constant, parse_float=finite,
                      parse_int=bounded_int)
