"""Operations a portable program may not hold: the ones that talk to the host or to other programs while it runs.

``infeed`` and ``recv`` wait for data the host (or a peer program) sends on a channel, ``outfeed`` and ``send`` wait
for someone to take what they send; a program run from an artifact has no such partner, so on XLA's CPU and GPU
runtimes it blocks forever, and what the channel would carry is outside the artifact's signature. jaxport refuses
them at export, import and load alike (specs/FORMAT.md, "Program limits"), in any dialect that spells them
(``stablehlo.outfeed``, ``mhlo.outfeed``, ...), wherever they sit (``main``, a private function, a region).
Host callbacks, the other way a program reaches the host, are custom calls, refused by ``checks``.

Collectives (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``collective_broadcast``,
``collective_permute``) name the devices they exchange data with, by id, in ``replica_groups`` or
``source_target_pairs``. XLA trusts those ids to lie within the devices it compiles the program for: a program of one
device whose ``collective_permute`` sends to device 1 reads past XLA's device list (``IndexError: Span::at failed
bounds check`` when it runs, or worse). A program naming a device id it does not have (at or above the devices the
program runs on, ``mhlo.num_partitions`` times ``mhlo.num_replicas``, or below 0) is refused at export, import and
load alike, in any dialect and wherever it sits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import PolicyError

if TYPE_CHECKING:
    from .module_scan import Collective

#: The refused operations, by name without their dialect, with what each would wait for.
HOST_COMMUNICATION_OPS: dict[str, str] = {
    "infeed": "data the host feeds in",
    "outfeed": "the host to take data out",
    "send": "a peer to receive on its channel",
    "recv": "a peer to send on its channel",
}
#: The dialects whose operations of those names are refused (StableHLO, and the MHLO and VHLO forms of it).
DIALECTS = ("stablehlo", "mhlo", "vhlo", "chlo")
#: The attributes by which an operation names devices (in any dialect): groups of ids, and (source, target) pairs.
DEVICE_ATTRIBUTES = ("replica_groups", "source_target_pairs")
#: The id that pads replica groups of unequal sizes (StableHLO): no device.
REPLICA_GROUP_PADDING = -1


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


def device_error(where: str, collectives: Iterable[Collective], devices: int) -> PolicyError | None:
    """The error for a program whose collectives name device ids outside ``0 .. devices - 1`` (``devices``: those
    the program runs on), or None when every id is one of its devices."""
    by_name: dict[str, list[Collective]] = {}
    for c in collectives:
        if c.smallest < 0 or c.largest >= devices:
            by_name.setdefault(c.name, []).append(c)
    if not by_name:
        return None

    def named(found: list[Collective]) -> str:
        ids = sorted({i for c in found for i in (c.smallest, c.largest) if i < 0 or i >= devices})
        shown = ", ".join(str(i) for i in ids[:3]) + (", ..." if len(ids) > 3 else "")
        places = ", ".join(sorted({c.location for c in found})[:3])
        return f"{found[0].name} ({len(found)}x, {found[0].attribute} naming device {shown}, at {places})"

    listing = "; ".join(named(found) for _, found in sorted(by_name.items()))
    has = "1 device (id 0" if devices == 1 else f"{devices} devices (ids 0 to {devices - 1}"
    return PolicyError(f"{where}: the program's collectives name devices it does not have: {listing}. The program "
                       f"runs on {has}; mhlo.num_partitions times mhlo.num_replicas), and XLA would read past its "
                       f"list of devices when it compiles or runs it. "
                       f"jaxport never compiles one (specs/FORMAT.md, \"Program limits\"). Produce the program for "
                       f"the devices its collectives name, or without those collectives.")
