"""Effects of an exported program: which ones an artifact can carry.

JAX records a program's effects in its serialization by the Python class name of each effect, and
``jax.export.deserialize`` rebuilds them by looking the name up among the effect classes defined in the loading
process. JAX's own ordered effects all come from host callbacks (``jax.debug.print``, ``io_callback``), which cannot
be exported; any other ordered effect belongs to a primitive defined in the producer's Python code. An artifact
with one would load only in a process that first imports that code, and its calling convention threads a token
that only that code knows the meaning of: the opposite of a portable artifact. So export refuses ordered effects.
Unordered effects (such as JAX's ``FFI`` effect of a side-effecting ``ffi_call``) are recorded and allowed.
"""

from __future__ import annotations

from typing import Any

from .errors import ExportError


def check(exported: Any, where: str, fname: str) -> None:
    """Refuse a program with ordered effects, naming them and why."""
    ordered = list(exported.ordered_effects)
    if not ordered:
        return
    names = ", ".join(sorted({str(e) for e in ordered}))
    raise ExportError(f"{where}: function {fname!r} has ordered effects: {names}. An artifact cannot carry them: "
                      f"JAX stores an effect by its Python class name, so the artifact would load only in a process "
                      f"that imports the code defining it, and the token its calls thread has no meaning elsewhere. "
                      f"Remove the effectful operation from the exported function (or make its effect unordered).")
