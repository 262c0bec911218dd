"""jaxport's own checks of a lowered program, run at export and again before an artifact is compiled.

JAX checks custom-call targets only when exporting; an artifact can be edited or written by another producer
afterwards, so jaxport repeats the check whenever it loads a program to run it.
"""

from __future__ import annotations

from .errors import PolicyError
from .module_scan import ModuleScan, short_location


def unstable_targets(scan: ModuleScan, allowed: set[str]) -> list[str]:
    """Custom-call targets in the module that are neither guaranteed stable by JAX nor allowed."""
    from ._jax_internals import guaranteed_stable_custom_calls

    stable = guaranteed_stable_custom_calls()
    return sorted({c.target for c in scan.custom_calls if c.target not in stable and c.target not in allowed})


def check_custom_calls(where: str, scan: ModuleScan, allowed: set[str]) -> None:
    """Raise PolicyError listing every custom call that is not allowed, with its location and the fix."""
    if unstable_targets(scan, allowed):
        raise disallowed_custom_calls_error(where, scan, allowed)


def disallowed_custom_calls_error(where: str, scan: ModuleScan, allowed: set[str]) -> PolicyError:
    from ._jax_internals import guaranteed_stable_custom_calls

    stable = guaranteed_stable_custom_calls()
    bad: dict[str, list[str]] = {}
    for c in scan.custom_calls:
        if c.target not in stable and c.target not in allowed:
            bad.setdefault(c.target, []).append(short_location(c.location))
    lines = [f"  {t} (used {len(locs)}x, first at {locs[0]})" for t, locs in sorted(bad.items())]
    flags = " ".join(f"--allow-custom-call {t}" for t in sorted(bad))
    return PolicyError(
        f"{where}: the program uses custom-call targets that JAX does not guarantee to keep stable:\n"
        + "\n".join(lines)
        + f"\nAn artifact using them may stop loading with another jaxlib. If you ship the kernels yourself, allow "
          f"them with 'allow_custom_calls: [{', '.join(sorted(bad))}]' in the spec or {flags}.")
