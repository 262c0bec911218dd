"""Whether an artifact may ship: policies (``jaxport check --policy``, ``specs/POLICY.md``).

``language`` reads a policy file into a ``Policy``; ``checking`` evaluates its rules against an artifact's manifest
and lists every violation. Callers import both from here.
"""

from .checking import CheckReport, Violation, assess, check, evaluate
from .language import (
    CALLING_CONVENTION_SINCE_JAX,
    MAX_POLICY_BYTES,
    METADATA_FIELDS,
    PLATFORMS,
    POLICY_DOCUMENT,
    POLICY_VERSIONS,
    RULES,
    Policy,
    load_policy,
    parse_policy,
)

__all__ = ["CALLING_CONVENTION_SINCE_JAX", "MAX_POLICY_BYTES", "METADATA_FIELDS", "PLATFORMS", "POLICY_DOCUMENT",
           "POLICY_VERSIONS", "RULES", "CheckReport", "Policy", "Violation", "assess", "check", "evaluate",
           "load_policy", "parse_policy"]
