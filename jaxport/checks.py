"""jaxport's own checks of a lowered program, run at export and again before an artifact is compiled.

Custom calls: JAX checks custom-call targets only when exporting; an artifact can be edited or written by another
producer afterwards, so jaxport repeats the check whenever it loads a program to run it.

Effects: JAX records a program's effects in its serialization by the Python class name of each effect, and
``jax.export.deserialize`` rebuilds them by looking the name up among the effect classes defined in the loading
process. JAX's own ordered effects all come from host callbacks (``jax.debug.print``, ``io_callback``), which cannot
be exported; any other ordered effect belongs to a primitive defined in the producer's Python code. An artifact
with one would load only in a process that first imports that code, and its calling convention threads a token
that only that code knows the meaning of: the opposite of a portable artifact. So export refuses ordered effects.
Unordered effects (such as JAX's ``FFI`` effect of a side-effecting ``ffi_call``) are recorded and allowed.
"""

from __future__ import annotations

from typing import Any

from ._jax_internals import guaranteed_stable_custom_calls
from .errors import ExportError, PolicyError
from .module_scan import ModuleScan, short_location


def unstable_targets(scan: ModuleScan, allowed: set[str]) -> list[str]:
    """Custom-call targets in the module that are neither guaranteed stable by JAX nor allowed."""
    stable = guaranteed_stable_custom_calls()
    return sorted({c.target for c in scan.custom_calls if c.target not in stable and c.target not in allowed})


def check_custom_calls(where: str, scan: ModuleScan, allowed: set[str]) -> None:
    """Raise PolicyError listing every custom call that is not allowed, with its location and the fix."""
    if unstable_targets(scan, allowed):
        raise disallowed_custom_calls_error(where, scan, allowed)


def disallowed_custom_calls_error(where: str, scan: ModuleScan, allowed: set[str]) -> PolicyError:
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


def check_effects(exported: Any, where: str, fname: str) -> None:
    """Refuse a program with ordered effects, naming them and why."""
    ordered = list(exported.ordered_effects)
    if not ordered:
        return
    names = ", ".join(sorted({str(e) for e in ordered}))
    raise ExportError(f"{where}: function {fname!r} has ordered effects: {names}. An artifact cannot carry them: "
                      f"JAX stores an effect by its Python class name, so the artifact would load only in a process "
                      f"that imports the code defining it, and the token its calls thread has no meaning elsewhere. "
                      f"Remove the effectful operation from the exported function (or make its effect unordered).")
