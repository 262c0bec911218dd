"""The one YAML loader: bounded, tag-free, and keeping the line of every mapping key, mapping value and list item.

Specs (``jaxport.spec``) and policies (``jaxport.artifact.policy``) are YAML files a user writes; their parsers name
the file and line of every problem. This module reads such a document into plain values (``Map``, ``Seq``, str,
int, float, bool, None) that remember their lines.

Trust model: the text is data and may be hostile. It is read with PyYAML's composer, and only the plain YAML tags
(string, integer, float, boolean, null, sequence, mapping) are accepted, so ``!!python/...`` tags never construct
anything. The text's size, its nesting depth (on the event stream, before the recursive composer runs, and again
after alias expansion) and the number of nodes after alias expansion are capped by the ``Document`` given; mapping
keys must be unique strings; an integer Python refuses to convert (thousands of digits) is refused with its line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._fsio import open_for_reading, read_at_most

if TYPE_CHECKING:
    import yaml

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}


@dataclass(frozen=True)
class Document:
    """A kind of YAML document (a spec, a policy): its caps, and how its refusals read.

    The message templates are ``str.format`` strings over ``file``, ``line``, ``size`` and the caps
    (``max_bytes``, ``max_depth``, ``max_nodes``).
    """

    noun: str  # "spec": "the spec is empty", "not allowed in a spec"
    error: Callable[[str], Exception]
    #: The line a document starts with, suggested when it is empty.
    first_line: str
    max_bytes: int
    max_depth: int
    max_nodes: int
    too_big: str
    too_deep: str
    #: Nesting past ``max_depth`` found after alias expansion.
    too_deep_expanded: str
    too_many_nodes: str
    #: A file that is not UTF-8 text; also over ``offset`` and ``byte`` (the first byte that is not).
    not_utf8: str
    #: Whether a mapping key may be an integer (it is read as its text).
    integer_keys: bool = False

    def fail(self, template: str, file: str, line: int = 0, size: int = 0) -> Exception:
        return self.error(template.format(file=file, line=line, size=size, max_bytes=self.max_bytes,
                                          max_depth=self.max_depth, max_nodes=self.max_nodes))

    def check_size(self, size: int, file: str) -> None:
        """Refuse a document of ``size`` bytes over the cap (also called on a file's size before reading it)."""
        if size > self.max_bytes:
            raise self.fail(self.too_big, file, size=size)

    def read(self, path: Path) -> str:
        """The text of a document file: a regular file (``_fsio.open_for_reading``), at most ``max_bytes`` bytes
        actually read (the size a file reports is not a cap), UTF-8."""
        shown = str(path)
        with open_for_reading(path, self.error, missing=f"{self.noun} file", directory=f"a {self.noun} file",
                              reading=f"the {self.noun}") as f:
            self.check_size(os.fstat(f.fileno()).st_size, shown)
            data = read_at_most(f, self.max_bytes + 1)
        self.check_size(len(data), shown)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise self.error(self.not_utf8.format(file=shown, line=line, offset=e.start,
                                                  byte=data[e.start])) from None


class Map(dict):  # type: ignore[type-arg]
    """A YAML mapping: ``line`` it starts on, ``key_lines[k]`` and ``value_lines[k]`` of each entry."""

    line: int
    key_lines: dict[str, int]
    value_lines: dict[str, int]

    def line_of(self, key: str, default: int | None = None) -> int:
        """The line of ``key``; ``default`` (the mapping's own line when None) when the mapping lacks it."""
        return self.key_lines.get(key, self.line if default is None else default)

    def entry(self, key: str, default: Any = None) -> tuple[Any, int]:
        """``key``'s value and the line of the key; ``default`` and the mapping's own line when it lacks it."""
        return self.get(key, default), self.line_of(key)

    @classmethod
    def at(cls, line: int, entries: dict[str, Any] | None = None,
           key_lines: dict[str, int] | None = None) -> Map:
        """A mapping that starts on ``line``, with ``entries`` at ``key_lines`` (for a value a spec gives in another
        form, such as a list of dimension variables)."""
        m = cls(entries or {})
        m.line, m.key_lines, m.value_lines = line, dict(key_lines or {}), {}
        return m


class Seq(list):  # type: ignore[type-arg]
    """A YAML sequence: ``line`` it starts on, ``item_lines[i]`` of each item."""

    line: int
    item_lines: list[int]

    @classmethod
    def at(cls, line: int) -> Seq:
        """An empty sequence that starts on ``line`` (what a spec reads when it gives none)."""
        s = cls()
        s.line, s.item_lines = line, []
        return s

    def entries(self) -> list[tuple[Any, int]]:
        """Each item with the line it starts on."""
        return list(zip(self, self.item_lines))


def _short_tag(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


def _syntax_error(e: yaml.YAMLError, text: str, file: str, doc: Document) -> Exception:
    """A one-line message for PyYAML's error, with the file and line."""
    import yaml

    if isinstance(e, yaml.reader.ReaderError):
        line = text.count("\n", 0, max(0, e.position)) + 1
        what = f"#x{e.character:04x}" if isinstance(e.character, int) else repr(e.character)
        return doc.error(f"{file}:{line}: invalid YAML: the character {what} is not allowed in YAML text. Remove it.")
    mark = getattr(e, "problem_mark", None)
    where = f"{file}:{mark.line + 1}" if mark is not None else file
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    context = getattr(e, "context", None)
    if context:
        problem = f"{context}, {problem}"
    return doc.error(f"{where}: invalid YAML: {problem}. Fix the YAML syntax at that line.")


def load(text: str, file: str, doc: Document) -> tuple[Any, int]:
    """The document's root value and the line it starts on; ``file`` names it in messages. PyYAML is imported
    here, on first use: reading an artifact's manifest (``jaxport inspect``) never needs it."""
    import yaml

    size = len(text) if len(text) > doc.max_bytes else len(text.encode("utf-8", "surrogatepass"))
    doc.check_size(size, file)
    try:
        # PyYAML's composer recurses once per nesting level: bound the depth on the (iterative) event stream first.
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > doc.max_depth:
                    line = event.start_mark.line + 1 if event.start_mark is not None else 0
                    raise doc.fail(doc.too_deep, file, line)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise _syntax_error(e, text, file, doc) from None
    if root is None:
        raise doc.error(f"{file}: the {doc.noun} is empty. Start it with '{doc.first_line}'.")
    constructor = yaml.SafeLoader("")
    budget = [doc.max_nodes]

    def convert(node: yaml.Node, depth: int) -> Any:
        budget[0] -= 1
        line = node.start_mark.line + 1
        if budget[0] < 0:
            raise doc.fail(doc.too_many_nodes, file, line)
        if depth > doc.max_depth:
            raise doc.fail(doc.too_deep_expanded, file, line)
        if node.tag not in _PLAIN_TAGS:
            raise doc.error(f"{file}:{line}: YAML tag {_short_tag(node.tag)!r} is not allowed in a {doc.noun}: only "
                            f"plain strings, numbers, booleans, null, lists and mappings are. Remove the tag.")
        if isinstance(node, yaml.MappingNode):
            m = Map.at(line)
            for k, v in node.value:
                key = convert(k, depth + 1)
                key_line = k.start_mark.line + 1
                if not isinstance(key, (str, int) if doc.integer_keys else str) or isinstance(key, bool):
                    raise doc.error(f"{file}:{key_line}: mapping keys must be strings, found {key!r}.")
                key = str(key)
                if key in m:
                    raise doc.error(f"{file}:{key_line}: duplicate key {key!r}.")
                m[key] = convert(v, depth + 1)
                m.key_lines[key], m.value_lines[key] = key_line, v.start_mark.line + 1
            return m
        if isinstance(node, yaml.SequenceNode):
            s = Seq(convert(v, depth + 1) for v in node.value)
            s.line, s.item_lines = line, [v.start_mark.line + 1 for v in node.value]
            return s
        try:
            return constructor.construct_object(node)
        except ValueError:  # an integer of thousands of digits: Python refuses to convert it
            digits = str(node.value)
            raise doc.error(f"{file}:{line}: the number {digits[:20]}... has {len(digits)} digits; a {doc.noun}'s "
                            f"numbers are at most 2**62. Shorten it.") from None

    return convert(root, 0), root.start_mark.line + 1
