"""Taking an artifact apart: its weights, a function's JAX serialization, its StableHLO, for other tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .container import Artifact, atomic_write
from .errors import UsageError
from .manifest import function_names


def weight_arrays(art: Artifact, verify: bool = True) -> dict[str, Any]:
    """Every bound tensor as a read-only numpy view of the artifact (name -> array)."""
    from .weights import tensor_views

    w = art.manifest.get("weights")
    if not w:
        return {}
    if verify:
        art.verify(w["member"])
    return tensor_views(art.view(w["member"]), w["tensors"], str(art.path))


def extract_weights(art: Artifact, output: str | Path) -> int:
    """Write the bound tensors to ``.npz`` or ``.safetensors`` (by extension); returns the bytes written."""
    import numpy as np

    arrays = weight_arrays(art)
    if not arrays:
        raise UsageError(f"{art.path}: the artifact has no bound weights to extract.")
    output = Path(output)
    suffix = output.suffix.lower()
    if suffix == ".npz":
        def write(f: Any) -> None:
            np.savez(f, **arrays)
    elif suffix == ".safetensors":
        from safetensors.numpy import save

        def write(f: Any) -> None:
            f.write(save({k: np.ascontiguousarray(v) for k, v in arrays.items()}))
    else:
        raise UsageError(f"{output}: weights are written as .npz or .safetensors; choose one of those extensions.")
    atomic_write(output, write)
    return output.stat().st_size


def _payload(art: Artifact, function: str | None) -> tuple[str, bytes]:
    names = function_names(art.manifest, function)
    if len(names) > 1:
        raise UsageError(f"{art.path}: the artifact holds {len(names)} functions ({', '.join(names)}); name one.")
    return names[0], art.read(art.manifest["functions"][names[0]]["payload"])


def extract_payload(art: Artifact, function: str | None, output: str | Path) -> int:
    """Write a function's JAX serialization as is (loadable with ``jax.export.deserialize``)."""
    _, payload = _payload(art, function)
    atomic_write(output, lambda f: f.write(payload))
    return len(payload)


def extract_mlir(art: Artifact, function: str | None, output: str | Path) -> int:
    """Write a function's StableHLO: ``.mlirbc`` is the portable bytecode as stored, ``.mlir`` (or anything
    else) its text with source locations."""
    from .module_scan import module_text
    from .payload import module_bytes

    fname, payload = _payload(art, function)
    module = module_bytes(payload, art.path, fname)
    data = module if str(output).lower().endswith(".mlirbc") else \
        module_text(module, debug_info=True).encode("utf-8")
    atomic_write(output, lambda f: f.write(data))
    return len(data)
