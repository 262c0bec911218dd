"""The policy language: :class:`Policy`, the rules a policy sets, and its reader (:func:`parse_policy`,
:func:`load_policy`). :mod:`jaxport.artifact.policy` checks an artifact against one and gives these names too.

A policy is a small YAML document (language: ``specs/POLICY.md``, schema: ``specs/schemas/policy.schema.json``).
Trust model: a policy file is data, read like a spec by ``_yaml.load``: at most :data:`MAX_POLICY_BYTES`, plain YAML
tags only (no ``!!python/...``), nesting and alias expansion capped, duplicate and unknown keys refused, every error
with the file and line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..._yaml import Document, Map, Seq, load
from ...errors import PolicyFileError
from ..signing.check import Identity, Trust
from ..window import age

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
    "signature",
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
    "compiles_on",
)
#: The machines a ``compiles_on`` rule may name (``jaxport.run.compile.targets``; a test keeps the two lists equal).
COMPILE_TARGETS = ("cpu", "tpu-v5e", "tpu-v5e-4", "tpu-v5e-8", "tpu-v6e", "tpu-v6e-4", "tpu-v6e-8", "tpu-v5p-8",
                   "tpu-v4-8", "cuda-h200", "cuda-h200-8", "cuda-h100", "cuda-h100-8", "cuda-a100", "cuda-a100-8")
#: The suffixes of a GPU's target config a ``compiles_on`` rule may name as ``cuda-FILE`` (relative to the policy's
#: directory): a capture of ``jaxport target``, or XLA's text format.
GPU_CONFIG_SUFFIXES = (".json", ".txtpb", ".pbtxt", ".textproto")
#: The most sizes ``compiles_on.dims`` may give one dimension.
MAX_COMPILE_SIZES = 64
_TOP_KEYS = ("jaxport_policy", "platforms", "custom_calls", "max_artifact_size", "format_version",
             "calling_convention", "min_consumer_jax", "required_metadata", "forbid_disabled_safety_checks",
             "max_embedded_constant_size", "max_producer_age_days", "min_days_left", "min_reach_days", "max_age_days",
             "signature", "compiles_on")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|[kKMGT]B|B)?\s*$")
_UNITS = {None: 1, "B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4, "KiB": 1 << 10,
          "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
FORMAT_VERSION_PATTERN = re.compile(r"^(\d{1,6})\.(\d{1,6})$")
#: The largest number a policy may give (sizes, days, calling conventions).
MAX_NUMBER = 1 << 62
JAX_VERSION_PATTERN = re.compile(r"^(\d{1,6})\.(\d{1,6})\.(\d{1,6})")
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
    #: Days the JAX that wrote the artifact may lag behind the newest JAX release jaxport supports
    #: (``artifact.window.age``).
    max_producer_age_days: int | None = None
    #: Days that must remain in JAX's compatibility window for the artifact.
    min_days_left: int | None = None
    #: Days that must remain in StableHLO's promise that readers load the artifact's payloads (``compat.reach``).
    min_reach_days: int | None = None
    #: The signers one of which must have signed the artifact (its model-signing bundle, ``ARTIFACT.sig``), checked
    #: before every other rule: the keys' paths relative to the policy's directory (``artifact.signing.bundle``).
    signature: Trust | None = None
    #: The machines every function must compile for, at every bucket (``jaxport.run.compile.aot``): target names.
    compiles_on: list[str] | None = None
    #: The sizes of each dimension variable to compile ``compiles_on`` at (None: the buckets ``jaxport compile``
    #: proposes from the spec's bounds).
    compiles_on_dims: dict[str, list[int]] | None = None
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
            "signature": self.signature is not None,
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
            "compiles_on": bool(self.compiles_on),
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
        m = FORMAT_VERSION_PATTERN.match(node.value.strip())
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
        if not isinstance(node.value, str) or not JAX_VERSION_PATTERN.match(node.value.strip()):
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


    def signature(self, node: _Node, what: str) -> dict[str, Any]:
        self.mapping(node, ("keys", "certificate_identities"), f"'{what}'")
        keys = node.optional("keys", self.names, f"{what}.keys") or []
        identities = node.optional("certificate_identities", self.identities, f"{what}.certificate_identities") or []
        if not keys and not identities:
            raise self.fail(node.line, f"{what} needs 'keys' (trusted public keys' PEM files) or "
                                       f"'certificate_identities', or both.")
        base = Path(self.file).parent if not self.file.startswith("<") else Path(".")
        paths = tuple(p if p.is_absolute() else base / p for p in map(Path, keys))
        return {"signature": Trust(paths, tuple(identities), source=f"the policy {self.file}")}

    def compiles_on(self, node: _Node, what: str) -> dict[str, Any]:
        """``compiles_on: [tpu-v5e]``, or ``{targets: [tpu-v5e], dims: {batch: [1, 8, 64]}}``."""
        dims = None
        if isinstance(node.value, dict):
            self.mapping(node, ("targets", "dims"), f"'{what}'")
            listed = node.child("targets")
            if listed is None:
                raise self.fail(node.line, f"{what} needs 'targets': the machines to compile for "
                                           f"({', '.join(COMPILE_TARGETS)}).")
            dims = node.optional("dims", self.sizes, f"{what}.dims")
            node = listed
            what = f"{what}.targets"
        items = node.value if isinstance(node.value, list) else None
        if not items or not all(isinstance(i.value, str) for i in items):
            raise self.fail(node.line, f"{what} must be a list of targets ({', '.join(COMPILE_TARGETS)}).")
        names = []
        for item in items:
            if item.value.startswith("cuda-") and item.value.endswith(GPU_CONFIG_SUFFIXES) and \
                    item.value not in COMPILE_TARGETS:
                names.append(self.gpu_config(item, what))
                continue
            if item.value not in COMPILE_TARGETS:
                close = difflib.get_close_matches(item.value, COMPILE_TARGETS, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise self.fail(item.line, f"{what}: unknown target {item.value[:80]!r}.{hint} Targets: "
                                           f"{', '.join(COMPILE_TARGETS)}; or cuda-FILE, a GPU's target config "
                                           f"({', '.join(GPU_CONFIG_SUFFIXES)}).")
            names.append(item.value)
        return {"compiles_on": list(dict.fromkeys(names)), "compiles_on_dims": dims}

    def gpu_config(self, item: _Node, what: str) -> str:
        """``cuda-FILE``: a GPU's target config, relative to the policy's directory, as ``cuda-`` and its path."""
        path = Path(item.value[len("cuda-"):]).expanduser()
        if not path.is_absolute() and not self.file.startswith("<"):
            path = Path(self.file).parent / path
        if not path.is_file():
            raise self.fail(item.line, f"{what}: {item.value[:200]!r}: no such file {str(path)[:200]!r}; give a "
                                       f"GPU's target config (written by 'jaxport target -o FILE' on the GPU), "
                                       f"relative to the policy's directory.")
        return f"cuda-{path}"

    def sizes(self, node: _Node, what: str) -> dict[str, list[int]]:
        """``{NAME: [sizes]}`` (or ``{NAME: size}``): the sizes of dimension variables."""
        if not isinstance(node.value, dict) or not node.value:
            raise self.fail(node.line, f"{what} must map dimension variables to lists of sizes, such as "
                                       f"{{batch: [1, 8, 64]}}.")
        out: dict[str, list[int]] = {}
        for name, value in node.value.items():
            values = value.value if isinstance(value.value, list) else [value]
            if not isinstance(name, str) or not name.isidentifier() or not values or \
                    len(values) > MAX_COMPILE_SIZES or \
                    not all(isinstance(v.value, int) and not isinstance(v.value, bool) and 0 <= v.value <= MAX_NUMBER
                            for v in values):
                raise self.fail(value.line, f"{what}.{name}: give a dimension variable's sizes, a list of at most "
                                            f"{MAX_COMPILE_SIZES} non-negative integers (found {_shown(value)}).")
            out[name] = [v.value for v in values]
        return out

    def identities(self, node: _Node, what: str) -> list[Identity]:
        items = node.value if isinstance(node.value, list) else None
        if items is None:
            raise self.fail(node.line, f"{what} must be a list of mappings with keys identity and issuer.")
        out: list[Identity] = []
        for item in items:
            self.mapping(item, ("identity", "issuer"), f"an entry of {what}")
            shown = f"{what}[{len(out)}]"
            identity, issuer = item.child("identity"), item.child("issuer")
            for key, given in (("identity", identity), ("issuer", issuer)):
                if given is not None and (not isinstance(given.value, str) or not given.value.strip()):
                    raise self.fail(given.line, f"{shown}.{key} must be a non-empty string, found {_shown(given)}.")
            if identity is None:
                raise self.fail(item.line, f"{shown} needs 'identity' (the signer's e-mail address or URI, as its "
                                           f"certificate names it).")
            out.append(Identity(identity.value.strip(), issuer.value.strip() if issuer is not None else None))
        return out


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
    _Key("signature", _Parser.signature),
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
    _Key("compiles_on", _Parser.compiles_on),
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
