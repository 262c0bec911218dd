"""Write XLA's own GPU target configs for jaxport's built-in CUDA targets (``--target cuda-h200``, ...) into
``jaxport/run/compile/gpu/``: the text ``stream_executor.GpuTargetConfigProto`` files XLA keeps under
``xla/backends/gpu/target_config/specs/``, as the installed CUDA plugin embeds them in its library
(``jax_plugins/xla_cuda13/xla_cuda_plugin.so``, where each is one NUL-terminated string).

Run it with the CUDA plugin of the JAX jaxport is tested with (``make test-cuda-deviceless`` builds ``.venv-cuda``):

    .venv-cuda/bin/python scripts/gpu_specs.py

A spec captured on the GPU itself (``jaxport target -o FILE`` there) describes that machine better (its real name,
L2 cache, CUDA and cuDNN versions); until one is, a built-in target is XLA's spec, and the file says so.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

#: The built-in targets' files, by the name XLA's spec gives its device (``device_description_str``).
SPECS = {"h200.txtpb": "NVIDIA H200 141GB HBM3e", "h100.txtpb": "NVIDIA H100 80GB HBM3",
         "a100.txtpb": "NVIDIA A100-SXM4-80GB"}
MARKER = b"proto-message: stream_executor.GpuTargetConfigProto"
OUT = Path(__file__).resolve().parents[1] / "jaxport" / "run" / "compile" / "gpu"


def embedded_specs(library: Path) -> dict[str, bytes]:
    """The target configs embedded in a CUDA plugin's library, by device name."""
    data = library.read_bytes()
    found: dict[str, bytes] = {}
    at = 0
    while (i := data.find(MARKER, at)) >= 0:
        start, end = data.rfind(b"\0", 0, i) + 1, data.find(b"\0", i)
        text = data[start:end]
        at = end
        m = re.search(rb'device_description_str: "([^"]*)"', text)
        if m:
            found[m.group(1).decode()] = text
    return found


def main() -> int:
    spec = importlib.util.find_spec("jax_plugins.xla_cuda13")
    if spec is None or not spec.submodule_search_locations:
        print("gpu_specs: JAX's CUDA 13 plugin is not installed (pip install 'jaxport[cuda]')", file=sys.stderr)
        return 1
    library = Path(list(spec.submodule_search_locations)[0]) / "xla_cuda_plugin.so"
    version = importlib.metadata.version("jax-cuda13-pjrt")
    specs = embedded_specs(library)
    OUT.mkdir(exist_ok=True)
    for file, device in SPECS.items():
        text = specs[device].decode()
        head = (f"# XLA's spec of the {device} (xla/backends/gpu/target_config/specs/), as jax-cuda13-pjrt "
                f"{version} embeds it;\n# written by scripts/gpu_specs.py. Not captured on the GPU: replace it "
                f"with what 'jaxport target -o FILE' writes there.\n")
        (OUT / file).write_text(head + text)
        print(f"{OUT / file}: {device} ({len(text)} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
