"""Policies: rules an artifact must follow before it ships, checked from its manifest without JAX.

A policy is a small YAML document (language: ``specs/POLICY.md``, schema: ``specs/schemas/policy.schema.json``).
:func:`load_policy` parses it; :func:`check` opens an artifact (checking every member's sha256) and evaluates every
rule, listing every violation rather than stopping at the first.

Trust model: a policy file is data, read like a spec by ``_yaml.load``: at most :data:`MAX_POLICY_BYTES`, plain YAML
tags only (no ``!!python/...``), nesting and alias expansion capped, duplicate and unknown keys refused, every error
with the file and line. The checks read the manifest; they trust what it says about the program (custom calls,
constants), which ``jaxport.load`` re-derives from the program itself before running it.
"""

from __future__ import annotations

import datetime
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from .._text import plural
from .._yaml import Document, Map, Seq, load
from ..errors import PolicyFileError
from . import age, compat, model
from .container import open_artifact
from .summary import human_bytes

#: Policy language versions this release reads. History:
#: 1 (2026-11-30): first version; extended 2026-12-01 with max_producer_age_days (max_age_days its deprecated name).
POLICY_VERSIONS = (1,)
MAX_POLICY_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 10_000
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
METADATA_FIELDS = ("name", "version", "description")

#: The rules, in the order they are checked and reported. Each is a top-level key of the policy (``platforms`` and
#: ``custom_calls`` hold two rules each).
RULES = (
    "platforms.allowed",
    "platforms.required",
    "custom_calls.allowed",
    "max_artifact_size",
    "format_version",
    "calling_convention",
    "min_consumer_jax",
    "required_metadata",
    "forbid_disabled_safety_checks",
    "max_embedded_constant_size",
    "max_producer_age_days",
    "min_days_left",
    "min_reach_days",
)
_TOP_KEYS = ("jaxport_policy", "platforms", "custom_calls", "max_artifact_size", "format_version",
             "calling_convention", "min_consumer_jax", "required_metadata", "forbid_disabled_safety_checks",
             "max_embedded_constant_size", "max_producer_age_days", "min_days_left", "min_reach_days", "max_age_days")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|[kKMGT]B|B)?\s*$")
_UNITS = {None: 1, "B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4, "KiB": 1 << 10,
          "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_VERSION = re.compile(r"^(\d{1,6})\.(\d{1,6})$")
#: The largest number a policy may give (sizes, days, calling conventions).
MAX_NUMBER = 1 << 62
_JAX_VERSION = re.compile(r"^(\d{1,6})\.(\d{1,6})\.(\d{1,6})")
#: The oldest JAX that runs each calling convention version (JAX's export documentation); a policy's
#: ``min_consumer_jax`` older than this cannot run artifacts of that version.
CALLING_CONVENTION_SINCE_JAX = {9: (0, 4, 20)}


@dataclass
class Policy:
    """A parsed policy. ``None`` (or empty) for a rule means the policy does not set it."""

    file: str
    platforms_allowed: list[str] | None = None
    platforms_required: list[str] = field(default_factory=list)
    custom_calls_allowed: list[str] | None = None
    allow_guaranteed_custom_calls: bool = True
    max_artifact_size: int | None = None
    format_version: tuple[tuple[int, int] | None, tuple[int, int] | None] | None = None
    calling_convention: tuple[int | None, int | None] | None = None
    min_consumer_jax: str | None = None
    required_metadata: list[str] = field(default_factory=list)
    forbid_disabled_safety_checks: bool = False
    max_embedded_constant_size: int | None = None
    #: Days the JAX that wrote the artifact may lag behind the newest JAX release jaxport supports (artifact.age).
    max_producer_age_days: int | None = None
    #: Days that must remain in JAX's compatibility window for the artifact.
    min_days_left: int | None = None
    #: Days that must remain in StableHLO's promise that readers load the artifact's payloads (``compat.reach``).
    min_reach_days: int | None = None
    #: Notes on the policy itself (a deprecated key), reported with the check.
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def max_age_days(self) -> int | None:
        """Deprecated name of :attr:`max_producer_age_days`."""
        return self.max_producer_age_days

    @max_age_days.setter
    def max_age_days(self, days: int | None) -> None:
        self.max_producer_age_days = days
        if days is not None:
            self.notes.append((age.PRODUCER_AGE, age.DEPRECATED_MAX_AGE.format(
                old="max_age_days", new="max_producer_age_days", left="min_days_left")))

    @property
    def rules(self) -> list[str]:
        """The rules this policy sets, in :data:`RULES` order."""
        active = {
            "platforms.allowed": self.platforms_allowed is not None,
            "platforms.required": bool(self.platforms_required),
            "custom_calls.allowed": self.custom_calls_allowed is not None,
            "max_artifact_size": self.max_artifact_size is not None,
            "format_version": self.format_version is not None,
            "calling_convention": self.calling_convention is not None,
            "min_consumer_jax": self.min_consumer_jax is not None,
            "required_metadata": bool(self.required_metadata),
            "forbid_disabled_safety_checks": self.forbid_disabled_safety_checks,
            "max_embedded_constant_size": self.max_embedded_constant_size is not None,
            "max_producer_age_days": self.max_producer_age_days is not None,
            "min_days_left": self.min_days_left is not None,
            "min_reach_days": self.min_reach_days is not None,
        }
        return [r for r in RULES if active[r]]


# --- reading YAML with lines -------------------------------------------------------------------------------------

#: How a policy's YAML is read (see ``_yaml``): its caps and how its refusals read.
POLICY_DOCUMENT = Document(
    noun="policy", error=PolicyFileError, first_line="jaxport_policy: 1", max_bytes=MAX_POLICY_BYTES,
    max_depth=MAX_DEPTH, max_nodes=MAX_NODES,
    too_big="{file}: the policy is {size} bytes; policies are capped at {max_bytes} bytes.",
    too_deep="{file}:{line}: the policy nests deeper than {max_depth} levels.",
    too_deep_expanded="{file}: the policy expands to more than {max_nodes} YAML nodes or {max_depth} levels (aliases "
                      "included).",
    too_many_nodes="{file}: the policy expands to more than {max_nodes} YAML nodes or {max_depth} levels (aliases "
                   "included).",
    not_utf8="{file}:{line}: the policy is not UTF-8 text. Save it as UTF-8.",
)


def _shown(value: Any) -> str:
    """A value (or a node's value, as the user wrote it) for a message, cut short: a policy's text may hold
    thousands of characters in one value."""
    text = repr(value.plain() if isinstance(value, _Node) else value)
    return text if len(text) <= 80 else text[:80] + "..."


_T = TypeVar("_T")


class _Node:
    """A YAML value with the line it starts on, and for mappings the line of each key."""

    def __init__(self, value: Any, line: int, key_lines: dict[str, int] | None = None):
        self.value = value
        self.line = line
        self.key_lines = key_lines or {}

    def plain(self) -> Any:
        """The value as loaded, without the nodes around its items (what a message shows)."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value

    def child(self, key: str) -> _Node | None:
        """The node under ``key`` of a mapping; None when the mapping does not give it."""
        return self.value.get(key) if isinstance(self.value, dict) else None

    def optional(self, key: str, read: Callable[[_Node, str], _T], what: str) -> _T | None:
        """``read`` of the node under ``key`` of a mapping (``what`` names it in messages); None when not given."""
        given = self.child(key)
        return None if given is None else read(given, what)


def _node(value: Any, line: int) -> _Node:
    """Loaded YAML as nodes that carry their lines: the parser reports the line of every value it refuses."""
    if isinstance(value, Map):
        return _Node({k: _node(v, value.value_lines[k]) for k, v in value.items()}, line, value.key_lines)
    if isinstance(value, Seq):
        return _Node([_node(v, n) for v, n in zip(value, value.item_lines)], line)
    return _Node(value, line)


# --- parsing -------------------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, file: str):
        self.file = file

    def fail(self, line: int, msg: str) -> PolicyFileError:
        return PolicyFileError(f"{self.file}:{line}: {msg}")

    def mapping(self, node: _Node, allowed: tuple[str, ...], what: str) -> _Node:
        """``node``, a mapping with only ``allowed`` keys."""
        if not isinstance(node.value, dict):
            raise self.fail(node.line, f"{what} must be a mapping with keys {', '.join(allowed)}.")
        for k in node.value:
            if k not in allowed:
                close = difflib.get_close_matches(k, allowed, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise self.fail(node.key_lines[k], f"unknown key {k!r} in {what}.{hint} Allowed keys: "
                                                   f"{', '.join(allowed)}.")
        return node

    def names(self, node: _Node, what: str, choices: tuple[str, ...] | None = None) -> list[str]:
        items = node.value if isinstance(node.value, list) else None
        if items is None or not all(isinstance(i.value, str) and i.value.strip() for i in items):
            kind = f"names ({', '.join(choices)})" if choices else "non-empty strings"
            raise self.fail(node.line, f"{what} must be a list of {kind}.")
        out = []
        for i in items:
            name = i.value.strip()
            if choices is not None:
                name = name.lower()
                if name not in choices:
                    close = ["cuda"] if name == "gpu" else difflib.get_close_matches(name, choices, n=1)
                    hint = f" Did you mean {close[0]!r}?" if close else ""
                    raise self.fail(i.line, f"{what}: unknown platform {i.value!r}.{hint} Use some of: "
                                            f"{', '.join(choices)}.")
            out.append(name)
        return out

    def platform_names(self, node: _Node, what: str) -> list[str]:
        return self.names(node, what, PLATFORMS)

    def boolean(self, node: _Node, what: str) -> bool:
        if not isinstance(node.value, bool):
            raise self.fail(node.line, f"{what} must be true or false, found {_shown(node)}.")
        return node.value

    def size(self, node: _Node, what: str) -> int:
        v = node.value
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return self.at_most(v, node, what)
        m = _SIZE.match(v) if isinstance(v, str) and len(v) <= 64 else None
        if m is None:
            raise self.fail(node.line, f"{what} must be a number of bytes or a size such as '100 MB' or '1 GiB' "
                                       f"(units: B, kB, MB, GB, KiB, MiB, GiB), found {_shown(node)}.")
        number = float(m.group(1)) * _UNITS[m.group(2)]
        return self.at_most(int(number) if number <= MAX_NUMBER else MAX_NUMBER + 1, node, what)

    def integer(self, node: _Node, what: str) -> int:
        if isinstance(node.value, bool) or not isinstance(node.value, int) or node.value < 0:
            raise self.fail(node.line, f"{what} must be a non-negative integer, found {_shown(node)}.")
        return self.at_most(node.value, node, what)

    def at_most(self, value: int, node: _Node, what: str) -> int:
        if value > MAX_NUMBER:
            raise self.fail(node.line, f"{what} is larger than 2**62, the largest number a policy may give.")
        return value

    def version(self, node: _Node, what: str) -> tuple[int, int]:
        if not isinstance(node.value, str):
            raise self.fail(node.line, f"{what} must be a quoted string \"MAJOR.MINOR\" such as \"1.0\" (YAML reads "
                                       f"an unquoted 1.10 as the number 1.1), found {_shown(node)}.")
        m = _VERSION.match(node.value.strip())
        if m is None:
            raise self.fail(node.line, f"{what} must be \"MAJOR.MINOR\" such as \"1.0\", found {_shown(node)}.")
        return int(m.group(1)), int(m.group(2))

    def range(self, node: _Node, what: str, read: Callable[[_Node, str], Any]) -> tuple[Any, Any]:
        self.mapping(node, ("min", "max"), what)

        def bound(key: str) -> Any:
            given = node.child(key)
            return None if given is None or given.value is None else read(given, f"{what}.{key}")

        lo, hi = bound("min"), bound("max")
        if lo is None and hi is None:
            raise self.fail(node.line, f"{what} needs 'min', 'max' or both.")
        if lo is not None and hi is not None and lo > hi:
            raise self.fail(node.line, f"{what}: min is greater than max.")
        return lo, hi

    def jax_version(self, node: _Node, what: str) -> str:
        if not isinstance(node.value, str) or not _JAX_VERSION.match(node.value.strip()):
            raise self.fail(node.line, f"{what} must be a quoted JAX version such as \"0.10.0\", found "
                                       f"{_shown(node)}.")
        return node.value.strip()

    def metadata_fields(self, node: _Node, what: str) -> list[str]:
        fields = self.names(node, what)
        for item, name in zip(node.value, fields):
            if name not in METADATA_FIELDS and not (name.startswith("labels.") and len(name) > len("labels.")):
                close = difflib.get_close_matches(name, [*METADATA_FIELDS, "labels.KEY"], n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise self.fail(item.line, f"{what}: unknown field {name!r}.{hint} Use name, version, "
                                           f"description or labels.KEY.")
        return fields

    # The readers of a top-level key: the Policy fields it sets.

    def platforms(self, node: _Node, what: str) -> dict[str, Any]:
        self.mapping(node, ("allowed", "required"), f"'{what}'")
        allowed = node.optional("allowed", self.platform_names, f"{what}.allowed")
        required = node.optional("required", self.platform_names, f"{what}.required") or []
        outside = [x for x in required if x not in allowed] if allowed is not None else []
        if outside:
            raise self.fail(node.line, f"{what}.required names {', '.join(outside)}, which {what}.allowed does "
                                       f"not allow.")
        return {"platforms_allowed": allowed, "platforms_required": required}

    def custom_calls(self, node: _Node, what: str) -> dict[str, Any]:
        self.mapping(node, ("allowed", "allow_guaranteed"), f"'{what}'")
        allowed = node.optional("allowed", self.names, f"{what}.allowed")
        guaranteed = node.optional("allow_guaranteed", self.boolean, f"{what}.allow_guaranteed")
        if guaranteed is None:
            return {"custom_calls_allowed": allowed}
        return {"custom_calls_allowed": [] if allowed is None else allowed, "allow_guaranteed_custom_calls": guaranteed}


#: A reader of a top-level key: the Policy fields its node sets (``what`` names the key in messages).
_Reader = Callable[[_Parser, _Node, str], dict[str, Any]]


def _sets(field_name: str, read: Callable[[_Parser, _Node, str], Any]) -> _Reader:
    """The reader of a top-level key that sets one Policy field."""
    return lambda p, node, what: {field_name: read(p, node, what)}


class _Renamed(NamedTuple):
    """A deprecated name of a key: read as the key is, adding ``note`` (rule, message); giving both is refused."""

    name: str
    note: tuple[str, str]


@dataclass(frozen=True)
class _Key:
    """How a top-level key of a policy (but its version) is read."""

    name: str
    read: _Reader
    old: _Renamed | None = None


#: The top-level keys, in the order they are read.
_KEYS = (
    _Key("platforms", _Parser.platforms),
    _Key("custom_calls", _Parser.custom_calls),
    _Key("max_artifact_size", _sets("max_artifact_size", _Parser.size)),
    _Key("format_version", _sets("format_version", lambda p, node, what: p.range(node, what, p.version))),
    _Key("calling_convention", _sets("calling_convention", lambda p, node, what: p.range(node, what, p.integer))),
    _Key("min_consumer_jax", _sets("min_consumer_jax", _Parser.jax_version)),
    _Key("required_metadata", _sets("required_metadata", _Parser.metadata_fields)),
    _Key("forbid_disabled_safety_checks", _sets("forbid_disabled_safety_checks", _Parser.boolean)),
    _Key("max_embedded_constant_size", _sets("max_embedded_constant_size", _Parser.size)),
    _Key("max_producer_age_days", _sets("max_producer_age_days", _Parser.integer),
         _Renamed("max_age_days", (age.PRODUCER_AGE, age.DEPRECATED_MAX_AGE.format(
             old="max_age_days", new="max_producer_age_days", left="min_days_left")))),
    _Key("min_days_left", _sets("min_days_left", _Parser.integer)),
    _Key("min_reach_days", _sets("min_reach_days", _Parser.integer)),
)


def parse_policy(text: str, file: str = "<policy>") -> Policy:
    """Parse policy text; ``file`` is the name used in messages."""
    root = _node(*load(text, file, POLICY_DOCUMENT))
    p = _Parser(file)
    if not isinstance(root.value, dict):
        raise p.fail(root.line, "a policy must be a YAML mapping starting with 'jaxport_policy: 1'.")
    top = p.mapping(root, _TOP_KEYS, "the policy")
    stated = top.child("jaxport_policy")
    if stated is None:
        raise p.fail(root.line, "missing 'jaxport_policy: 1' (the policy language version) at the top.")
    if isinstance(stated.value, bool) or stated.value not in POLICY_VERSIONS:
        raise p.fail(stated.line, f"policy language version {stated.value!r} is not one this jaxport reads "
                                  f"(supported: {', '.join(map(str, POLICY_VERSIONS))}).")
    fields: dict[str, Any] = {}
    notes: list[tuple[str, str]] = []
    for key in _KEYS:
        node, renamed = top.child(key.name), key.old
        old = top.child(renamed.name) if renamed is not None else None
        if renamed is not None and old is not None:
            if node is not None:
                raise p.fail(old.line, f"{renamed.name} is the deprecated name of {key.name}; give only {key.name}.")
            fields.update(key.read(p, old, renamed.name))
            rule, note = renamed.note
            notes.append((rule, f"{file}:{old.line}: {note}"))
        elif node is not None:
            fields.update(key.read(p, node, key.name))
    return Policy(file, **fields, notes=notes)


def load_policy(path: str | Path) -> Policy:
    """Read and parse a policy file."""
    path = Path(path)
    return parse_policy(POLICY_DOCUMENT.read(path), str(path))


# --- checking ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    rule: str
    function: str | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "function": self.function, "message": self.message}


@dataclass
class CheckReport:
    artifact: str
    policy: str
    rules: list[str]
    violations: list[Violation]
    #: (rule, message): what the reader should know although it is no violation (a deprecated key, a JAX version
    #: newer than jaxport's release table).
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        if self.passed:
            return f"{self.artifact} follows {self._which()} ({plural(len(self.rules), 'rule')})."
        return (f"{self.artifact} breaks {self._which()}: {plural(len(self.violations), 'violation')}: "
                + "; ".join(f"[{v.rule}] {v.message.rstrip('.')}" for v in self.violations) + ".")

    def _which(self) -> str:
        """``the policy FILE``; a policy whose name is already a phrase (``the command-line rules``) as it is."""
        return self.policy if self.policy.startswith("the ") else f"the policy {self.policy}"

    def as_dict(self) -> dict[str, Any]:
        counts = {r: 0 for r in self.rules}
        for v in self.violations:
            counts[v.rule] = counts.get(v.rule, 0) + 1
        return {"artifact": self.artifact, "policy": self.policy, "passed": self.passed,
                "rules": [{"rule": r, "passed": counts[r] == 0, "violations": counts[r]} for r in self.rules],
                "violations": [v.as_dict() for v in self.violations],
                "notes": [{"rule": r, "message": m} for r, m in self.notes]}


def _jax_version(text: str) -> tuple[int, int, int] | None:
    m = _JAX_VERSION.match(text.strip()) if isinstance(text, str) else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def _range_text(lo: Any, hi: Any, show: Any = str) -> str:
    if lo is not None and hi is not None:
        return f"{show(lo)}..{show(hi)}"
    return f">= {show(lo)}" if lo is not None else f"<= {show(hi)}"


def evaluate(policy: Policy, manifest: model.Manifest, size: int) -> list[Violation]:
    """Every violation of ``policy`` by an artifact of ``size`` bytes with this manifest, in rule order, except those
    of the rules on the producer's JAX (their days depend on the date: :func:`assess` adds them)."""
    out: list[Violation] = []
    functions = manifest.functions

    def add(rule: str, function: str | None, message: str) -> None:
        out.append(Violation(rule, function, message))

    if policy.platforms_allowed is not None:
        for fname, f in functions.items():
            bad = [p for p in f.platforms if p not in policy.platforms_allowed]
            if bad:
                add("platforms.allowed", fname, f"function {fname!r} is exported for {', '.join(bad)}, which the "
                    f"policy does not allow (allowed: {', '.join(policy.platforms_allowed) or 'none'}).")
    for fname, f in functions.items():
        missing = [p for p in policy.platforms_required if p not in f.platforms]
        if missing:
            add("platforms.required", fname, f"function {fname!r} is not exported for {', '.join(missing)}, which "
                f"the policy requires; re-export with --platform {' --platform '.join(missing)} (and its other "
                f"platforms).")
    if policy.custom_calls_allowed is not None:
        allowed = set(policy.custom_calls_allowed)
        for fname, f in functions.items():
            for c in f.custom_calls:
                if c.target in allowed:
                    continue
                if policy.allow_guaranteed_custom_calls and c.stability == "guaranteed":
                    continue
                stability = "guaranteed stable by JAX" if c.stability == "guaranteed" else \
                    "not guaranteed stable by JAX"
                add("custom_calls.allowed", fname, f"function {fname!r} calls custom-call target {c.target} "
                    f"({'?' if c.count is None else c.count}x, {stability}), which the policy does not allow (allowed: "
                    f"{', '.join(policy.custom_calls_allowed) or 'none'}"
                    f"{', and every target JAX guarantees stable' if policy.allow_guaranteed_custom_calls else ''}).")
    if policy.max_artifact_size is not None and size > policy.max_artifact_size:
        add("max_artifact_size", None, f"the artifact is {human_bytes(size)} ({size} bytes); the policy allows at "
            f"most {human_bytes(policy.max_artifact_size)} ({policy.max_artifact_size} bytes).")
    if policy.format_version is not None:
        lo, hi = policy.format_version
        m = _VERSION.match(manifest.format_version)
        version = (int(m.group(1)), int(m.group(2))) if m else None
        if version is None or (lo is not None and version < lo) or (hi is not None and version > hi):
            add("format_version", None, f"the artifact's format version {manifest.format_version} is outside "
                f"the policy's range {_range_text(lo, hi, _dotted)}.")
    if policy.calling_convention is not None:
        cc_lo, cc_hi = policy.calling_convention
        for fname, f in functions.items():
            cc = f.calling_convention_version
            if (cc_lo is not None and cc < cc_lo) or (cc_hi is not None and cc > cc_hi):
                add("calling_convention", fname, f"function {fname!r} uses calling convention {cc}; the policy "
                    f"requires {_range_text(cc_lo, cc_hi)}.")
    if policy.min_consumer_jax is not None:
        oldest = _jax_version(policy.min_consumer_jax)
        # An artifact written --for-jax an older JAX holds that JAX's payloads: it loads there (export.target).
        producer = manifest.producer.for_jax or manifest.producer.jax
        made = _jax_version(producer)
        if made is None:
            add("min_consumer_jax", None, f"the artifact does not say which JAX exported it (producer.jax is "
                f"{producer!r}), so it cannot be shown to load in JAX {policy.min_consumer_jax}.")
        elif oldest is not None and made > oldest:
            add("min_consumer_jax", None, f"the artifact was exported with JAX {producer}, newer than the oldest "
                f"JAX its consumers run ({policy.min_consumer_jax}); JAX guarantees that an artifact loads in the "
                f"JAX that exported it and later releases, not in earlier ones. Export with JAX "
                f"{policy.min_consumer_jax} (or older), or raise min_consumer_jax.")
        for fname, f in functions.items():
            since = CALLING_CONVENTION_SINCE_JAX.get(f.calling_convention_version)
            if oldest is not None and since is not None and oldest < since:
                add("min_consumer_jax", fname, f"function {fname!r} uses calling convention "
                    f"{f.calling_convention_version}, which JAX runs from {_dotted(since)} on, newer than "
                    f"min_consumer_jax {policy.min_consumer_jax}.")
    meta = manifest.metadata
    for name in policy.required_metadata:
        value: object
        if name.startswith("labels."):
            key = name[len("labels."):]
            value = meta.labels.get(key)
            shown = f"metadata.labels[{key!r}]"
            fix = f"add it under metadata.labels in the spec ({key}: ...)"
        else:
            value = getattr(meta, name) if name in METADATA_FIELDS else None
            shown = f"metadata.{name}"
            fix = f"set metadata.{name} in the spec" + (" or pass --version" if name == "version" else "")
        if not isinstance(value, str) or not value.strip():
            add("required_metadata", None, f"{shown} is missing; the policy requires it ({fix}).")
    if policy.forbid_disabled_safety_checks:
        for fname, f in functions.items():
            disabled = f.disabled_safety_checks
            if disabled:
                add("forbid_disabled_safety_checks", fname, f"function {fname!r} was exported with JAX safety checks "
                    f"disabled ({', '.join(map(str, disabled))}); the policy forbids it.")
    if policy.max_embedded_constant_size is not None:
        limit = policy.max_embedded_constant_size
        for fname, f in functions.items():
            for const in f.embedded_constants.largest:
                if const.bytes is None or const.bytes <= limit:
                    continue
                at = "" if const.location in (None, "unknown location") else f", at {const.location}"
                add("max_embedded_constant_size", fname, f"function {fname!r} embeds a constant of "
                    f"{human_bytes(const.bytes)} ({const.type}{at}); the policy allows at most {human_bytes(limit)} "
                    f"per constant. Pass it as an argument (or bind it as weights) instead of closing over it.")
    return out


def assess(policy: Policy, manifest: model.Manifest, size: int,
           today: datetime.date | None = None) -> tuple[list[Violation], list[tuple[str, str]]]:
    """Every violation (:func:`evaluate`) and every note: the policy's own (a deprecated key), then those of the
    rules on the producer's JAX (``artifact.age``), whose days count from ``today`` (default: ``compat.today()``)."""
    out = evaluate(policy, manifest, size)
    notes = list(policy.notes)
    if policy.max_producer_age_days is not None or policy.min_days_left is not None:
        jax_version = compat.serializer_version(manifest.producer)
        bad, said = age.evaluate(jax_version, policy.max_producer_age_days, policy.min_days_left, today)
        out += [Violation(rule, None, message) for rule, message in bad]
        notes += said
    if policy.min_reach_days is not None:
        r = compat.reach(manifest.producer, [f.stablehlo_version for f in manifest.functions.values()])
        left = r.days_left(today or compat.today())
        if left is None:
            out.append(Violation("min_reach_days", None, "the artifact's payloads do not say which StableHLO wrote "
                                 "them (stablehlo_version), or the JAX that wrote them cannot be dated, so the reach "
                                 "of StableHLO's promise is unknown; export it again with a supported JAX."))
        elif left < policy.min_reach_days:
            assert r.readable_until is not None
            out.append(Violation("min_reach_days", None, f"StableHLO promises that newer readers load its payloads "
                                 f"(StableHLO {r.stablehlo}) until {r.readable_until.isoformat()}, "
                                 f"{compat.n_days(left)} from today, fewer than {policy.min_reach_days}; "
                                 f"'jaxport upgrade' re-serializes it with this JAX for a later end."))
    return out, notes


def check(artifact: str | Path, policy: Policy | str | Path, today: datetime.date | None = None) -> CheckReport:
    """Check an artifact against a policy; every member's sha256 is verified first. No JAX. ``today`` is the date the
    days of ``min_days_left`` count from (default: ``$JAXPORT_TODAY`` if set, else today's date)."""
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    with open_artifact(artifact) as art:
        art.verify_all()
        manifest, size = art.model, art.size
    violations, notes = assess(policy, manifest, size, today)
    return CheckReport(str(artifact), policy.file, policy.rules, violations, notes)
