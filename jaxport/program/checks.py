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

Who decides what runs: an artifact cannot grant itself permissions. Its manifest records the targets its exporter
allowed (``allowed_custom_calls``), but the manifest is written by whoever wrote the artifact, so that list is audit
information only. :func:`check_runnable`, the one check every path that compiles or runs a program goes through
(``jaxport.load``, hence ``call`` with either runtime, ``--batch-size``, ``--vjp``, ``verify`` on both sides,
``compile``), allows JAX's guaranteed-stable targets plus those the *caller* allows (``--allow-custom-call``,
``allow_custom_calls=``), and checks the program's stored derivatives (its VJP programs) the same way. Two kinds of
target are refused whoever allows them (:func:`refused_target`): host callbacks, which jump to a Python function by
an address or index that only the exporting process knew (from an artifact they call whatever this process holds
there), and target names that are not plain printable ASCII (a NUL, a space, a control character), which no kernel
is registered under and which native code may read differently from the check. Nothing allows the program rules of
``rules`` either: operations that talk to the host, and collectives that name devices the program does not have.

Every name is read by its value, as MLIR reads it (a target spelled ``"xla\\5fpython\\5fcpu\\5fcallback"`` is the
callback ``xla_python_cpu_callback``): the checks read the parsed module's attributes, never its text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ExportError, FormatError, JaxportError, PolicyError, UsageError
from ..jaxprivate.exported import vjp_getter, with_vjp_getter
from ..jaxprivate.stable import guaranteed_stable_custom_calls, registered_host_callbacks
from .module_scan import ModuleScan, scan_module, short_location
from .rules import device_error, host_communication_error

#: Custom-call targets of JAX's host callbacks (``jax/_src/callback.py``, ``buffer_callback.py`` and jaxlib's
#: registrations; the ``xla_python_*`` ones are the pre-FFI names), and of ``custom_partitioning``, whose partitioner
#: XLA calls back into Python for. Each carries an index or address into the exporting process's callback table.
HOST_CALLBACK_TARGETS = frozenset({
    "xla_python_cpu_callback", "xla_python_gpu_callback",
    "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback",
    "xla_ffi_partitioned_python_cpu_callback", "xla_ffi_partitioned_python_gpu_callback",
    "xla_buffer_python_cpu_callback", "xla_buffer_python_gpu_callback",
    "CustomSPMDPartitioning",
})
#: What a target name may be: printable ASCII without spaces, as every kernel XLA and JAX register is named.
_PLAIN_TARGET = re.compile(r"[!-~]{1,256}")
#: At most this many offending targets are listed in one message.
_LISTED = 20


#: The reviewed floor, casefolded; and, once read from an imported JAX, the floor with the installed jaxlib's callbacks.
_FLOOR = frozenset(t.casefold() for t in HOST_CALLBACK_TARGETS)
_with_installed: frozenset[str] | None = None


def host_callback_targets() -> frozenset[str]:
    """The reviewed :data:`HOST_CALLBACK_TARGETS` (the floor) and the installed jaxlib's registered host callbacks
    (``jaxprivate.stable.registered_host_callbacks``), casefolded. The registry is read once per process, from a JAX
    already imported; until then (reading an artifact's manifest imports none) the floor alone, not remembered."""
    global _with_installed
    if _with_installed is None and "jax" in sys.modules:
        try:
            _with_installed = _FLOOR | {t.casefold() for t in registered_host_callbacks()}
        except Exception:  # noqa: BLE001 - a jaxlib whose registry cannot be read keeps the floor
            _with_installed = _FLOOR
    return _FLOOR if _with_installed is None else _with_installed


def is_host_callback(target: str) -> bool:
    """Whether a target is (or names, in another case or spelling) a host callback: one of
    :func:`host_callback_targets`, or any name mentioning ``python`` or ending in ``callback`` (JAX's own test for
    callbacks), compared without case, surrounding spaces or anything after a NUL."""
    name = target.split("\0", 1)[0].strip().casefold()
    return (name in host_callback_targets() or "python" in name or name.endswith("callback")
            or "spmdpartitioning" in name)


def refused_target(target: str) -> str | None:
    """Why no caller can allow ``target`` (a host callback, or not a plain name), or None."""
    if is_host_callback(target):
        return "host callback"
    if not _PLAIN_TARGET.fullmatch(target):
        return "malformed"
    return None


def unstable_targets(scan: ModuleScan, allowed: set[str]) -> list[str]:
    """Custom-call targets in the module that are neither guaranteed stable by JAX nor allowed."""
    stable = guaranteed_stable_custom_calls()
    return sorted({c.target for c in scan.custom_calls if c.target not in stable and c.target not in allowed})


def check_custom_calls(where: str, scan: ModuleScan, allowed: set[str], devices: int | None = None) -> None:
    """Raise PolicyError listing every custom call that is not allowed, with its location and the fix (at export
    and import, where the exporter's allowances apply). Host callbacks and malformed names are refused whatever is
    allowed: an artifact carrying them could never run; so are programs that break the program rules (``devices``:
    those the program is exported for, as for :func:`check_module`)."""
    refused = _refused_error(where, scan, devices)
    if refused is not None:
        raise refused
    if unstable_targets(scan, allowed):
        raise disallowed_custom_calls_error(where, scan, allowed)


def _shown(target: str) -> str:
    """A target as a message shows it: plain names as they are, others quoted with escapes, bounded."""
    return target if _PLAIN_TARGET.fullmatch(target) else ascii(target[:80] + ("..." if len(target) > 80 else ""))


def _uses(scan: ModuleScan, pick: Callable[[str], bool]) -> dict[str, list[str]]:
    """``{target: [location, ...]}`` of the custom calls whose target ``pick`` selects."""
    found: dict[str, list[str]] = {}
    for c in scan.custom_calls:
        if pick(c.target):
            found.setdefault(c.target, []).append(short_location(c.location))
    return found


def _listing(found: dict[str, list[str]]) -> list[str]:
    lines = [f"  {_shown(t)} (used {len(locs)}x, first at {locs[0]})" for t, locs in sorted(found.items())[:_LISTED]]
    if len(found) > _LISTED:
        lines.append(f"  ... and {len(found) - _LISTED} more")
    return lines


def _refused_error(where: str, scan: ModuleScan, devices: int | None = None) -> PolicyError | None:
    """The error for custom calls no caller can allow (host callbacks first), or None; and for the program rules
    (``rules``: operations that talk to the host, collectives naming devices outside the program's ``devices``,
    default the module's own count), which nothing can allow either."""
    communicating = host_communication_error(where, scan.host_communication)
    if communicating is not None:
        return communicating
    outside = device_error(where, scan.collectives, scan.devices if devices is None else min(devices, scan.devices))
    if outside is not None:
        return outside
    callbacks = _uses(scan, is_host_callback)
    if callbacks:
        return PolicyError(
            f"{where}: the program calls back into Python through host-callback custom calls:\n"
            + "\n".join(_listing(callbacks))
            + "\nA host callback (jax.pure_callback, io_callback, jax.debug.print or jax.debug.callback, "
              "custom_partitioning) jumps to a Python function by an index or address that only the exporting "
              "process knew; run from an artifact it would call whatever this process holds there. jaxport never "
              "runs one, and --allow-custom-call cannot allow it. Re-export the function without host callbacks.")
    malformed = _uses(scan, lambda t: refused_target(t) == "malformed")
    if malformed:
        return PolicyError(
            f"{where}: the program uses custom-call targets whose names are not plain (1 to 256 printable ASCII "
            f"characters, no spaces):\n" + "\n".join(_listing(malformed))
            + "\nNo kernel is registered under such a name, and native code may read it differently from this "
              "check, so jaxport never compiles it, whatever is allowed. The artifact is damaged or hostile.")
    return None


# --- GPU kernels that JAX does not keep stable ------------------------------------------------------------------

#: The custom calls of GPU kernels JAX writes but does not guarantee stable, by target (a prefix ends in ``*``): what
#: each is, and why it is not portable. JAX's guaranteed-stable list has CUDA's linear algebra (``cusolver_*_ffi``,
#: ``cusparse_gtsv2_ffi``, ``cu_lu_pivots_to_permutation``, ``cu_threefry2x32_ffi``) and Pallas Mosaic GPU
#: (``mosaic_gpu_v2``); these it has not.
GPU_KERNELS: dict[str, tuple[str, str]] = {
    "__gpu$xla.gpu.triton": (
        "a Pallas Triton kernel",
        "Triton promises no compatibility of its IR across releases (JAX's own back-compatibility test of it is "
        "skipped), so the artifact runs only with the jaxlib that exported it"),
    "__cudnn$fmha*": (
        'cuDNN fused attention of jax.nn.dot_product_attention(implementation="cudnn")',
        "its call is cuDNN's and changes with cuDNN, which must be installed wherever it is traced and run; "
        'export with implementation="xla" (portable, on every platform) instead'),
    "__cudnn$fusion": (
        "a cuDNN fusion",
        "its call is cuDNN's and changes with cuDNN, which must be installed wherever it runs"),
}


def gpu_kernel(target: str) -> tuple[str, str] | None:
    """What a GPU kernel's custom call is and why it is not portable (:data:`GPU_KERNELS`), or None."""
    for name, about in GPU_KERNELS.items():
        if target == name or (name.endswith("*") and target.startswith(name[:-1])):
            return about
    return None


def _gpu_kernels_error(where: str, bad: dict[str, list[str]], how: str) -> PolicyError | None:
    """One line for a program whose only disallowed custom calls are GPU kernels of :data:`GPU_KERNELS`: each, what
    it is and why it is not portable, and the allowance (``how``: where to give it); None when another target is
    among them."""
    if not bad or not all(gpu_kernel(t) for t in bad):
        return None
    kinds: dict[tuple[str, str], list[str]] = {}
    for t in sorted(bad):
        kinds.setdefault(gpu_kernel(t) or ("", ""), []).append(t)
    said = "; ".join(f"{what} ({', '.join(f'{t} at {bad[t][0]}' for t in targets)}), which JAX does not guarantee "
                     f"stable: {why}" for (what, why), targets in kinds.items())
    flags = " ".join(f"--allow-custom-call {t!r}" for t in sorted(bad))  # quoted: the shell reads $ otherwise
    return PolicyError(f"{where}: the program calls {said}. {how.format(targets=', '.join(sorted(bad)), flags=flags)}")


def disallowed_custom_calls_error(where: str, scan: ModuleScan, allowed: set[str]) -> PolicyError:
    refused = _refused_error(where, scan)
    if refused is not None:
        return refused
    stable = guaranteed_stable_custom_calls()
    bad = _uses(scan, lambda t: t not in stable and t not in allowed)
    kernels = _gpu_kernels_error(where, bad, "If you ship the artifact with what runs it, allow it with "
                                            "'allow_custom_calls: [{targets}]' in the spec or {flags}.")
    if kernels is not None:
        return kernels
    flags = " ".join(f"--allow-custom-call {t}" for t in sorted(bad))
    return PolicyError(
        f"{where}: the program uses custom-call targets that JAX does not guarantee to keep stable:\n"
        + "\n".join(_listing(bad))
        + f"\nAn artifact using them may stop loading with another jaxlib. If you ship the kernels yourself, allow "
          f"them with 'allow_custom_calls: [{', '.join(sorted(bad))}]' in the spec or {flags}.")


# --- what may run: jaxport's allowlist plus the caller's allowances --------------------------------------------


def caller_allowances(allow_custom_calls: Iterable[str] | None) -> frozenset[str]:
    """The targets a caller allows (``--allow-custom-call``, ``allow_custom_calls=``), checked to be strings."""
    if allow_custom_calls is None:
        return frozenset()
    if isinstance(allow_custom_calls, (str, bytes)):
        raise UsageError(f"allow_custom_calls={allow_custom_calls!r}: give a list of custom-call target names, not "
                         f"one string.")
    names = list(allow_custom_calls)
    for n in names:
        if not isinstance(n, str):
            raise UsageError(f"allow_custom_calls: {n!r} is not a custom-call target name (a string).")
    return frozenset(names)


def check_module(where: str, module: bytes, allowed: frozenset[str], devices: int | None = None) -> None:
    """The rule for one serialized program: every custom call is guaranteed stable by JAX or allowed by the caller,
    and none is a host callback or a malformed name; the program rules hold, its collectives within ``devices`` (the
    devices it is run on, ``Exported.nr_devices``; the module's own count if fewer). Raises PolicyError
    (FormatError when the program cannot be read to tell)."""
    try:
        scan = scan_module(module)
    except JaxportError:
        raise
    except Exception as e:  # noqa: BLE001 - MLIR reports an unreadable module in many ways
        raise FormatError(f"{where}: the program cannot be read to check its custom calls ({type(e).__name__}: "
                          f"{str(e).strip()[:200]}); the artifact is damaged or hostile.") from None
    refused = _refused_error(where, scan, devices)
    if refused is not None:
        raise refused
    _remember(module, frozenset(c.target for c in scan.custom_calls))
    stable = guaranteed_stable_custom_calls()
    bad = _uses(scan, lambda t: t not in stable and t not in allowed)
    if bad:
        flags = " ".join(f"--allow-custom-call {t}" for t in sorted(bad))
        listed = ", ".join(repr(t) for t in sorted(bad))
        kernels = _gpu_kernels_error(where, bad, f"The artifact's own list of allowed targets grants nothing: if you "
                                                 f"trust it and this process provides the kernel, allow it with "
                                                 f"{{flags}} (allow_custom_calls=[{listed}] in Python).")
        if kernels is not None:
            raise kernels
        raise PolicyError(
            f"{where}: the program uses custom-call targets that JAX does not guarantee to keep stable:\n"
            + "\n".join(_listing(bad))
            + f"\nThe artifact's own list of allowed targets grants nothing: whoever runs it decides. If you trust "
              f"the artifact and this process provides the kernels, allow them with {flags} "
              f"(allow_custom_calls=[{listed}] in Python).")


#: The custom-call targets of the programs :func:`check_module` read in this process, by the identity of their
#: serialized bytes (each entry holds the bytes, so an identity is never reused while it is remembered).
_CHECKED: dict[int, tuple[bytes, frozenset[str]]] = {}
_CHECKED_KEPT = 32


def _remember(module: bytes, targets: frozenset[str]) -> None:
    if len(_CHECKED) >= _CHECKED_KEPT:
        _CHECKED.pop(next(iter(_CHECKED)))
    _CHECKED[id(module)] = (module, targets)


def checked_targets(module: bytes) -> frozenset[str] | None:
    """The custom-call targets :func:`check_module` found in this very ``module`` object (the serialized program a
    check read), or None when no check in this process read it (then nothing is known)."""
    entry = _CHECKED.get(id(module))
    return entry[1] if entry is not None and entry[0] is module else None


#: Stored derivatives checked when a program is loaded; deeper ones are checked when JAX first asks for them.
_EAGER_VJP_ORDERS = 8


def check_runnable(exported: Any, where: str, allow_custom_calls: Iterable[str] | None = None) -> Any:
    """The one rule of what may compile and run (see the module docstring), applied to a deserialized ``Exported``
    and to each VJP program it carries. Returns ``exported`` with its VJP programs checked again whenever JAX asks
    for them (``jax.grad``, ``call --vjp``); those stored at load are checked now, so a refusal comes at load."""
    allowed = caller_allowances(allow_custom_calls)

    def checked(e: Any, order: int) -> Any:
        here = where if order == 0 else f"{where} (its stored derivative of order {order})"
        check_module(here, e.mlir_module_serialized, allowed, devices=int(e.nr_devices))
        get = vjp_getter(e)
        if get is None:
            return e
        memo: list[Any] = []

        def get_checked(primal: Any) -> Any:
            # A deserialized payload's VJP does not depend on the primal (JAX's reader ignores it): check it once.
            if not memo:
                memo.append(checked(get(primal), order + 1))
            return memo[0]

        return with_vjp_getter(e, get_checked)

    result = checked(exported, 0)
    e = result
    for _ in range(_EAGER_VJP_ORDERS):
        get = vjp_getter(e)
        if get is None:
            break
        e = get(e)
    return result


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
