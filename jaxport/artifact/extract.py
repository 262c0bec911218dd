"""Taking an artifact apart: its weights, a function's JAX serialization, its StableHLO, for other tools."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from .._fsio import atomic_write, check_output
from ..errors import UsageError
from ..module_scan import module_text
from .container import Artifact
from .manifest import function_names
from .payload import module_bytes
from .tensors import tensor_views

#: Dtypes jaxport stores that a ``.npy`` header cannot name (numpy writes them as void ``|V2``, ``|V1``).
_NOT_IN_NPY = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
#: Dtypes jaxport stores that the safetensors format has no name for.
_NOT_IN_SAFETENSORS = ("complex128",)
#: The key of a safetensors header that holds its metadata, not a tensor: a tensor of that name cannot be read back.
_SAFETENSORS_METADATA = "__metadata__"


def weight_arrays(art: Artifact, verify: bool = True) -> dict[str, Any]:
    """Every bound tensor as a read-only numpy view of the artifact (name -> array)."""
    w = art.manifest.get("weights")
    if not w:
        return {}
    if verify:
        art.verify(w["member"])
    return tensor_views(art.view(w["member"]), w["tensors"], str(art.path))


def extract_weights(art: Artifact, output: str | Path) -> int:
    """Write the bound tensors to ``.npz`` or ``.safetensors`` (by extension); returns the bytes written.

    Keys are the tensor names (``params/dense/kernel``). The ``.npz`` is written with fixed timestamps: the same
    artifact gives the same bytes.
    """
    output = Path(output)
    suffix = output.suffix.lower()
    if suffix not in (".npz", ".safetensors"):
        raise UsageError(f"{output}: weights are written as .npz or .safetensors; choose one of those extensions.")
    check_output(output, [art.path])  # before the weights are read and verified
    arrays = weight_arrays(art)
    if not arrays:
        raise UsageError(f"{art.path}: the artifact has no bound weights to extract.")
    if suffix == ".npz":
        # .npy records a dtype by numpy's own names only: ml_dtypes' types would be written as raw void bytes.
        odd = [(n, str(a.dtype)) for n, a in arrays.items() if str(a.dtype) in _NOT_IN_NPY]
        if odd:
            shown = ", ".join(f"{n!r} ({d})" for n, d in odd[:5]) + (", ..." if len(odd) > 5 else "")
            raise UsageError(f"{output}: .npz cannot record the dtype of {len(odd)} tensor(s): {shown}; numpy would "
                             f"store them as raw bytes. Write .safetensors instead.")
        atomic_write(output, lambda f: _write_npz(f, arrays), inputs=[art.path])
    else:
        from safetensors.numpy import save

        if _SAFETENSORS_METADATA in arrays:
            raise UsageError(f"{output}: a tensor is named {_SAFETENSORS_METADATA!r}, the key a .safetensors header "
                             f"reserves for its metadata; the file could not be read back. Write .npz instead.")
        odd = [(n, str(a.dtype)) for n, a in arrays.items() if str(a.dtype) in _NOT_IN_SAFETENSORS]
        if odd:
            shown = ", ".join(f"{n!r} ({d})" for n, d in odd[:5]) + (", ..." if len(odd) > 5 else "")
            raise UsageError(f"{output}: .safetensors cannot record the dtype of {len(odd)} tensor(s): {shown}. "
                             f"Write .npz instead.")
        atomic_write(output, lambda f: f.write(save(arrays)), inputs=[art.path])
    return output.stat().st_size


def _write_npz(f: Any, arrays: dict[str, Any]) -> None:
    """``numpy.savez`` with fixed timestamps, and without its keyword arguments (a tensor may be named ``file``)."""
    import numpy as np

    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            with z.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _payload(art: Artifact, function: str | None) -> tuple[str, bytes]:
    names = function_names(art.manifest, function)
    if len(names) > 1:
        raise UsageError(f"{art.path}: the artifact holds {len(names)} functions ({', '.join(names)}); name one.")
    return names[0], art.read(art.manifest["functions"][names[0]]["payload"])


def extract_payload(art: Artifact, function: str | None, output: str | Path) -> int:
    """Write a function's JAX serialization as is (loadable with ``jax.export.deserialize``)."""
    _, payload = _payload(art, function)
    atomic_write(output, lambda f: f.write(payload), inputs=[art.path])
    return len(payload)


def extract_mlir(art: Artifact, function: str | None, output: str | Path) -> int:
    """Write a function's StableHLO: ``.mlirbc`` is the portable bytecode as stored, ``.mlir`` (or anything
    else) its text with source locations."""
    fname, payload = _payload(art, function)
    module = module_bytes(payload, art.path, fname)
    data = module if str(output).lower().endswith(".mlirbc") else \
        module_text(module, debug_info=True).encode("utf-8")
    atomic_write(output, lambda f: f.write(data), inputs=[art.path])
    return len(data)
