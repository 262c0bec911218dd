"""Policies: rules an artifact must follow before it ships, checked from its manifest without JAX.

:func:`~.language.load_policy` parses a policy (the language: :mod:`jaxport.artifact.policy.language`,
``specs/POLICY.md``); :func:`check` opens an artifact (checking every member's sha256) and evaluates every rule, listing
every violation rather than stopping at the first. The checks read the manifest; they trust what it says about the
program (custom calls, constants), which ``jaxport.load`` re-derives from the program itself before running it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._text import plural
from ...errors import SignatureError
from .. import model
from ..container import open_artifact
from ..signing.check import open_signed
from ..summary import human_bytes
from ..window import age, compat
from .language import (
    CALLING_CONVENTION_SINCE_JAX,
    FORMAT_VERSION_PATTERN,
    JAX_VERSION_PATTERN,
    METADATA_FIELDS,
    Policy,
    load_policy,
)

__all__ = ["CheckReport", "Violation", "assess", "check", "evaluate"]


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
    #: The compilations of rule ``compiles_on`` (``jaxport.run.compile.aot``), one JSON report per target.
    targets: list[dict[str, Any]] = field(default_factory=list)

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
                "notes": [{"rule": r, "message": m} for r, m in self.notes],
                **({"targets": self.targets} if self.targets else {})}


def _jax_version(text: str) -> tuple[int, int, int] | None:
    m = JAX_VERSION_PATTERN.match(text.strip()) if isinstance(text, str) else None
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
    return [v for rules in _RULE_GROUPS for v in rules(policy, manifest, size)]


def _platforms_rules(policy: Policy, manifest: model.Manifest, size: int) -> Iterator[Violation]:
    """The platforms a function must and may be exported for."""
    functions = manifest.functions
    if policy.platforms_allowed is not None:
        for fname, f in functions.items():
            bad = [p for p in f.platforms if p not in policy.platforms_allowed]
            if bad:
                yield Violation("platforms.allowed", fname,
                                f"function {fname!r} is exported for {', '.join(bad)}, which the policy does not "
                                f"allow (allowed: {', '.join(policy.platforms_allowed) or 'none'}).")
    for fname, f in functions.items():
        missing = [p for p in policy.platforms_required if p not in f.platforms]
        if missing:
            yield Violation("platforms.required", fname,
                            f"function {fname!r} is not exported for {', '.join(missing)}, which the policy requires; "
                            f"re-export with --platform {' --platform '.join(missing)} (and its other platforms).")


def _custom_calls_rules(policy: Policy, manifest: model.Manifest, size: int) -> Iterator[Violation]:
    """The custom-call targets a function may call."""
    functions = manifest.functions
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
                also = ", and every target JAX guarantees stable" if policy.allow_guaranteed_custom_calls else ""
                yield Violation("custom_calls.allowed", fname,
                                f"function {fname!r} calls custom-call target {c.target} "
                                f"({'?' if c.count is None else c.count}x, {stability}), which the policy does not "
                                f"allow (allowed: {', '.join(policy.custom_calls_allowed) or 'none'}{also}).")


def _versions_rules(policy: Policy, manifest: model.Manifest, size: int) -> Iterator[Violation]:
    """The artifact's size, format version and calling conventions."""
    functions = manifest.functions
    if policy.max_artifact_size is not None and size > policy.max_artifact_size:
        yield Violation("max_artifact_size", None,
                        f"the artifact is {human_bytes(size)} ({size} bytes); the policy allows at most "
                        f"{human_bytes(policy.max_artifact_size)} ({policy.max_artifact_size} bytes).")
    if policy.format_version is not None:
        lo, hi = policy.format_version
        m = FORMAT_VERSION_PATTERN.match(manifest.format_version)
        version = (int(m.group(1)), int(m.group(2))) if m else None
        if version is None or (lo is not None and version < lo) or (hi is not None and version > hi):
            yield Violation("format_version", None,
                            f"the artifact's format version {manifest.format_version} is outside the policy's range "
                            f"{_range_text(lo, hi, _dotted)}.")
    if policy.calling_convention is not None:
        cc_lo, cc_hi = policy.calling_convention
        for fname, f in functions.items():
            cc = f.calling_convention_version
            if (cc_lo is not None and cc < cc_lo) or (cc_hi is not None and cc > cc_hi):
                yield Violation("calling_convention", fname,
                                f"function {fname!r} uses calling convention {cc}; the policy requires "
                                f"{_range_text(cc_lo, cc_hi)}.")


def _consumer_jax_rules(policy: Policy, manifest: model.Manifest, size: int) -> Iterator[Violation]:
    """That the artifact loads in the oldest JAX its consumers run."""
    functions = manifest.functions
    if policy.min_consumer_jax is not None:
        oldest = _jax_version(policy.min_consumer_jax)
        # An artifact written --for-jax an older JAX holds that JAX's payloads: it loads there (export.writing.target).
        producer = manifest.producer.for_jax or manifest.producer.jax
        made = _jax_version(producer)
        if made is None:
            yield Violation("min_consumer_jax", None,
                            f"the artifact does not say which JAX exported it (producer.jax is {producer!r}), so it "
                            f"cannot be shown to load in JAX {policy.min_consumer_jax}.")
        elif oldest is not None and made > oldest:
            yield Violation("min_consumer_jax", None,
                            f"the artifact was exported with JAX {producer}, newer than the oldest JAX its consumers "
                            f"run ({policy.min_consumer_jax}); JAX guarantees that an artifact loads in the JAX that "
                            f"exported it and later releases, not in earlier ones. Export it for that JAX "
                            f"('jaxport export --for-jax {policy.min_consumer_jax}', or 'jaxport upgrade --for-jax "
                            f"{policy.min_consumer_jax}'; jaxport writes payloads for JAX 0.9.1 and later), or raise "
                            f"min_consumer_jax.")
        for fname, f in functions.items():
            since = CALLING_CONVENTION_SINCE_JAX.get(f.calling_convention_version)
            if oldest is not None and since is not None and oldest < since:
                yield Violation("min_consumer_jax", fname,
                                f"function {fname!r} uses calling convention {f.calling_convention_version}, which "
                                f"JAX runs from {_dotted(since)} on, newer than min_consumer_jax "
                                f"{policy.min_consumer_jax}.")


def _metadata_rules(policy: Policy, manifest: model.Manifest, size: int) -> Iterator[Violation]:
    """The metadata the policy requires."""
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
            yield Violation("required_metadata", None,
                            f"{shown} is missing; the policy requires it ({fix}).")


def _program_rules(policy: Policy, manifest: model.Manifest, size: int) -> Iterator[Violation]:
    """What a program may not hold: disabled safety checks, large embedded constants."""
    functions = manifest.functions
    if policy.forbid_disabled_safety_checks:
        for fname, f in functions.items():
            disabled = f.disabled_safety_checks
            if disabled:
                yield Violation("forbid_disabled_safety_checks", fname,
                                f"function {fname!r} was exported with JAX safety checks disabled "
                                f"({', '.join(map(str, disabled))}); the policy forbids it.")
    if policy.max_embedded_constant_size is not None:
        limit = policy.max_embedded_constant_size
        for fname, f in functions.items():
            for const in f.embedded_constants.largest:
                if const.bytes is None or const.bytes <= limit:
                    continue
                at = "" if const.location in (None, "unknown location") else f", at {const.location}"
                yield Violation("max_embedded_constant_size", fname,
                                f"function {fname!r} embeds a constant of {human_bytes(const.bytes)} "
                                f"({const.type}{at}); the policy allows at most {human_bytes(limit)} per constant. "
                                f"Pass it as an argument (or bind it as weights) instead of closing over it.")


#: The rules :func:`evaluate` checks, in the order its violations are listed.
_RULE_GROUPS = (_platforms_rules, _custom_calls_rules, _versions_rules, _consumer_jax_rules, _metadata_rules,
                _program_rules)


def assess(policy: Policy, manifest: model.Manifest, size: int,
           today: datetime.date | None = None) -> tuple[list[Violation], list[tuple[str, str]]]:
    """Every violation (:func:`evaluate`) and every note: the policy's own (a deprecated key), then those of the
    rules on the producer's JAX (``artifact.window.age``), whose days count from ``today`` (default:
    ``compat.today()``)."""
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
                                 f"a newer StableHLO moves that end later: 'jaxport upgrade' re-serializes the "
                                 f"artifact with the running JAX, once it is newer than the JAX that wrote it, or "
                                 f"lower min_reach_days."))
    return out, notes


def check(artifact: str | Path, policy: Policy | str | Path, today: datetime.date | None = None,
          signature: str | Path | None = None) -> CheckReport:
    """Check an artifact against a policy; every member's sha256 is verified first. No JAX. ``today`` is the date the
    days of ``min_days_left`` count from (default: ``$JAXPORT_TODAY`` if set, else today's date). A policy's
    ``signature`` rule is checked first, on the bundle at ``signature`` (default ``ARTIFACT.sig``): when it fails,
    the artifact is not read further and the report holds that one violation."""
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    notes: list[tuple[str, str]] = []
    if policy.signature is not None:
        try:  # the other rules judge the very bytes that verified, read through one descriptor
            art, verified = open_signed(artifact, policy.signature, signature)
        except SignatureError as e:
            skipped = [r for r in policy.rules if r != "signature"]
            said = [("signature", f"the other rules ({', '.join(skipped)}) were not checked: an artifact whose "
                                  f"signature does not verify is not read further.")] if skipped else []
            return CheckReport(str(artifact), policy.file, ["signature"], [Violation("signature", None, str(e))],
                               said)
        notes.append(("signature", verified.sentence() + "."))
    else:
        art = open_artifact(artifact)
    with art:
        art.verify_all()
        manifest, size = art.model, art.size
    violations, said = assess(policy, manifest, size, today)
    return CheckReport(str(artifact), policy.file, policy.rules, violations, notes + said)
