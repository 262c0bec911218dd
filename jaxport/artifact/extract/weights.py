"""An artifact's bound weights taken out, for other tools: as ``.npz``, ``.safetensors`` or one ``.npy``.

Weights are written with names relative to their bound argument (``w1`` for the tensor ``params/w1``): the names a
``--bind params=FILE`` (or a spec's ``bind:``) reads, so an extracted file binds again to the same tensor names.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import dtypes
from ..._fsio import atomic_write, check_output
from ...arrayfiles import safetensors
from ...errors import UsageError
from ..calltree import walk
from ..container import Artifact
from ..model import Manifest
from ..private_copy import private_member
from ..tensors import tensor_views


def weight_arrays(art: Artifact, verify: bool = True) -> dict[str, Any]:
    """Every bound tensor as a read-only numpy array (name -> array): views of a private copy whose digest was
    checked (``private_copy``), or of the artifact's memory map when ``verify`` is false."""
    w = art.model.weights
    if w is None or not w.tensors:
        return {}
    # checked over a private copy: what is written out is what was hashed, whatever rewrites the file meanwhile
    buffer = private_member(art, w.member)[0] if verify else art.view(w.member)
    return tensor_views(buffer, w.tensors, str(art.path))


def bound_arguments(manifest: Manifest | None) -> list[str]:
    """The names of the arguments bound to weights, over every function (``params``, or ``state/0`` for a bind
    inside an argument): a bound tensor is named ``ARGUMENT/path/in/its/tree``."""
    found: dict[str, None] = {}
    for f in manifest.functions.values() if manifest is not None else ():
        for site in walk(f.signature):
            if site.kind == "bound":
                found.setdefault(site.name, None)
    return list(found)


@dataclass(frozen=True)
class WeightsWritten:
    """What ``extract_weights`` wrote: its size, how many tensors, and the argument their names are relative to
    (None: the artifact's full tensor names)."""

    bytes: int
    tensors: int
    argument: str | None


def weights_to_write(art: Artifact, argument: str | None = None, full_names: bool = False
                     ) -> tuple[str | None, dict[str, Any]]:
    """The tensors ``extract --weights`` writes, by the key they are written under, and the argument the keys are
    relative to (None for full names).

    Names round-trip: without ``full_names`` the keys are relative to the bound argument (``w1`` for the tensor
    ``params/w1``), the keys ``--bind params=FILE`` reads, so binding the file again gives the same tensor names.
    With one bound argument it is chosen; with several, ``argument`` names one (UsageError otherwise). A tensor
    outside every bound argument keeps its full name. ``full_names`` writes the artifact's names (``params/w1``), as
    the program's weights argument and ``compile``'s description name them."""
    arguments = bound_arguments(getattr(art, "model", None))
    if argument is not None and argument not in arguments:
        shown = ", ".join(arguments) if arguments else "none"
        raise UsageError(f"{art.path}: --arg {argument}: no argument of that name is bound to weights (bound "
                         f"arguments: {shown}).")
    if argument is None and not full_names and len(arguments) > 1:
        raise UsageError(f"{art.path}: the artifact binds {len(arguments)} arguments to weights "
                         f"({', '.join(arguments)}); extract one with --arg NAME (its tensors named relative to it, "
                         f"as --bind NAME=FILE reads them), or all with --full-names.")
    arrays = weight_arrays(art)
    if not arrays:
        raise UsageError(f"{art.path}: the artifact has no bound weights to extract.")
    chosen = argument if argument is not None or full_names else (arguments[0] if arguments else None)

    def owner(name: str) -> str | None:
        return next((a for a in arguments if name == a or name.startswith(a + "/")), None)

    if argument is not None:
        arrays = {n: a for n, a in arrays.items() if owner(n) == argument}
    if full_names or chosen is None:
        return None, arrays
    out: dict[str, Any] = {}
    for name, array in arrays.items():
        key = name[len(chosen) + 1:] if owner(name) == chosen else name
        if key in out:
            raise UsageError(f"{art.path}: the tensors {name!r} and {chosen}/{key} would both be written as "
                             f"{key!r}; extract with --full-names.")
        out[key] = array
    return chosen, out


def extract_weights(art: Artifact, output: str | Path, argument: str | None = None,
                    full_names: bool = False) -> WeightsWritten:
    """Write the bound tensors (:func:`weights_to_write`) to ``.npz`` or ``.safetensors``, or one array to
    ``.npy`` (by extension).

    The ``.npz`` is written with fixed timestamps: the same artifact gives the same bytes.
    """
    output = Path(output)
    suffix = output.suffix.lower()
    if suffix not in (".npz", ".safetensors", ".npy"):
        raise UsageError(f"{output}: weights are written as .npz or .safetensors (or one array as .npy); choose one "
                         f"of those extensions.")
    check_output(output, [art.path])  # before the weights are read and verified
    chosen, arrays = weights_to_write(art, argument, full_names)
    if suffix == ".npy":
        if len(arrays) != 1:
            raise UsageError(f"{output}: a .npy file holds one array, and {len(arrays)} tensors would be written; "
                             f"write .npz or .safetensors instead.")
    elif "" in arrays:
        raise UsageError(f"{output}: argument {chosen!r} is bound to a single array; write it as .npy (which "
                         f"--bind {chosen}=FILE.npy reads), or with --full-names.")
    if suffix in (".npz", ".npy"):
        # .npy records a dtype by numpy's own names only: ml_dtypes' types would be written as raw void bytes. That
        # is refused where .safetensors records every tensor's dtype; int4 and uint4, which it has no tag for, are
        # written so (one element per byte, as numpy saves them): rebind reads them back by the artifact's dtypes.
        odd = [(n, str(a.dtype)) for n, a in arrays.items() if str(a.dtype) in dtypes.NOT_IN_NPY]
        if odd and all(safetensors.tag_of(str(a.dtype)) is not None for a in arrays.values()):
            shown = ", ".join(f"{n!r} ({d})" for n, d in odd[:5]) + (", ..." if len(odd) > 5 else "")
            raise UsageError(f"{output}: {suffix} cannot record the dtype of {len(odd)} tensor(s): {shown}; numpy "
                             f"would store them as raw bytes. Write .safetensors instead.")
        if suffix == ".npz":
            atomic_write(output, lambda f: _write_npz(f, arrays), inputs=[art.path])
        else:
            atomic_write(output, lambda f: _write_npy(f, next(iter(arrays.values()))), inputs=[art.path])
    else:
        if safetensors.METADATA in arrays:
            raise UsageError(f"{output}: a tensor is named {safetensors.METADATA!r}, the key a .safetensors header "
                             f"reserves for its metadata; the file could not be read back. Write .npz instead.")
        odd = [(n, str(a.dtype)) for n, a in arrays.items() if safetensors.tag_of(str(a.dtype)) is None]
        if odd:
            shown = ", ".join(f"{n!r} ({d})" for n, d in odd[:5]) + (", ..." if len(odd) > 5 else "")
            packed = any(dtypes.BY_NAME[d].packed for _, d in odd)
            raise UsageError(f"{output}: .safetensors cannot record the dtype of {len(odd)} tensor(s): {shown}. "
                             f"Write .npz instead" + (" (4-bit tensors as numpy saves them, one element per byte, "
                                                      "which rebind reads back)." if packed else "."))
        try:
            atomic_write(output, lambda f: safetensors.write(f, arrays), inputs=[art.path])
        except ValueError as e:  # an odd number of float4 elements: whole bytes only
            raise UsageError(f"{output}: {e}. Write .npz instead.") from None
    return WeightsWritten(output.stat().st_size, len(arrays), chosen)


def _write_npy(f: Any, array: Any) -> None:
    import numpy as np

    np.lib.format.write_array(f, array, allow_pickle=False)


def _write_npz(f: Any, arrays: dict[str, Any]) -> None:
    """``numpy.savez`` with fixed timestamps, and without its keyword arguments (a tensor may be named ``file``)."""
    import numpy as np

    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            with z.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
