"""Operations a portable program may not hold: the ones that talk to the host or to other programs while it runs.

``infeed`` and ``recv`` wait for data the host (or a peer program) sends on a channel, ``outfeed`` and ``send`` wait
for someone to take what they send; a program run from an artifact has no such partner, so on XLA's CPU and GPU
runtimes it blocks forever, and what the channel would carry is outside the artifact's signature. jaxport refuses
them at export, import and load alike (specs/FORMAT.md, "Program limits"), in any dialect that spells them
(``stablehlo.outfeed``, ``mhlo.outfeed``, ...), wherever they sit (``main``, a private function, a region).
Host callbacks, the other way a program reaches the host, are custom calls, refused by ``checks``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import PolicyError

#: The refused operations, by name without their dialect, with what each would wait for.
HOST_COMMUNICATION_OPS: dict[str, str] = {
    "infeed": "data the host feeds in",
    "outfeed": "the host to take data out",
    "send": "a peer to receive on its channel",
    "recv": "a peer to send on its channel",
}
#: The dialects whose operations of those names are refused (StableHLO, and the MHLO and VHLO forms of it).
DIALECTS = ("stablehlo", "mhlo", "vhlo", "chlo")


def refused_op(name: str) -> str | None:
    """The bare name of a refused operation (``outfeed`` for ``stablehlo.outfeed`` or ``vhlo.outfeed_v1``), or
    None."""
    dialect, _, bare = name.partition(".")
    if dialect not in DIALECTS:
        return None
    bare = bare.split("_v", 1)[0] if dialect == "vhlo" else bare
    return bare if bare in HOST_COMMUNICATION_OPS else None


def host_communication_error(where: str, found: Iterable[tuple[str, str]]) -> PolicyError | None:
    """The error for a program holding refused operations (``found``: (operation name, short location) pairs), or
    None when there is none."""
    by_name: dict[str, list[str]] = {}
    for name, location in found:
        by_name.setdefault(name, []).append(location)
    if not by_name:
        return None
    listing = "; ".join(f"{name} ({len(locs)}x, at {', '.join(sorted(set(locs))[:3])})"
                        for name, locs in sorted(by_name.items()))
    waits = ", ".join(sorted({HOST_COMMUNICATION_OPS[refused_op(n) or ""] for n in by_name}))
    return PolicyError(f"{where}: the program holds host-communication operations: {listing}. Each waits for "
                       f"{waits}, which no program run from an artifact has: it would block forever. jaxport never "
                       f"compiles one (specs/FORMAT.md, \"Program limits\"). Re-export the function without "
                       f"infeed, outfeed, send or recv.")
