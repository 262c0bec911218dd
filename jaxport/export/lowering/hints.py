"""What to do about an export that failed for a reason jaxport recognises: a sentence appended to the error, after
JAX's own message and before the user's frames, which it never replaces (``lower._export_failed``).

The reasons: a library that needs a Python integer where the spec makes a size symbolic (``int()``, ``range()``,
numpy, ``jnp.fft.irfft(n=...)``, ``jnp.diag_indices(n)``), equinox's ``EQX_ON_ERROR=nan`` mode and a Pallas kernel,
both of which need static shapes, a comparison of a symbolic dimension that Python decides while tracing, and an FFT
over a symbolic axis; a Pallas GPU kernel lowered without a GPU or for the CPU too, and cuDNN attention traced without
cuDNN. No JAX import: each is recognised by what the error says and the values its frames held.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Collection

from ... import dimexpr

#: What a Pallas kernel's cost estimate says when a symbolic dimension reaches it (``pl.CostEstimate``).
PALLAS_STATIC_ONLY = "All fields in CostEstimate must be ints."
#: Why ``EQX_ON_ERROR=nan`` fails with symbolic shapes.
EQX_NAN_STATIC = " (with static shapes only: equinox makes the NaNs with numpy, at the shape's size)"
#: What JAX says when an FFT's transformed axis is symbolic (``jax._src.lax.fft``).
FFT_STATIC_ONLY = "Shape polymorphism for FFT with non-constant fft_length is not implemented"
#: What Pallas says when it lowers a GPU kernel with no GPU to read the model from (a CPU-only machine).
PALLAS_NO_GPU = "No supported GPU devices found, please specify an abstract GPU device"
#: What Pallas says when a kernel is exported for the CPU too (``platforms: [cpu, cuda]``).
PALLAS_NO_CPU = "Only interpret mode is supported on CPU backend"
#: What JAX says when ``jax.nn.dot_product_attention(implementation="cudnn")`` is traced without cuDNN (without and
#: with JAX's CUDA plugin installed).
CUDNN_ABSENT = ("cuDNN is not detected", "cuDNN not found")
#: Where JAX asks for cuDNN's version (``jax._src.cudnn``): with JAX's CUDA plugin installed and no cuDNN, JAX 0.12.1
#: fails there with a SystemError that names nothing ("exception could not be translated").
CUDNN_PROBE = ("/jax/_src/cudnn/", "check_cudnn_version")
#: The class of JAX's symbolic dimensions (``jax.export.symbolic_shape``), by name: what a library was handed.
_SYMBOLIC = "_DimExpr"
#: How many frames, innermost first, are searched for the symbolic size a failed call was given.
_FRAMES = 12


def library_hint(e: BaseException, variables: Collection[str] = ()) -> str:
    """What to do about a failure a library raises for a reason jaxport knows (text to append), else "".
    ``variables``: the dimension variables of the spec's shapes, which a message may name (numpy's ``got 'n'``)."""
    files = [frame.filename.replace("\\", "/") for frame in traceback.extract_tb(e.__traceback__)]
    # equinox's own code (its error machinery making NaNs) failed, not a frame on the way to another library's
    inner = [f for f in files if not any(lib in f for lib in ("/numpy/", "/jax/", "/jaxlib/"))]
    if os.environ.get("EQX_ON_ERROR") == "nan" and _SYMBOLIC in str(e) and inner and "/equinox/" in inner[-1]:
        end = "" if str(e).rstrip().endswith(".") else "."
        return (f"{end} This is equinox's EQX_ON_ERROR=nan mode, which works{EQX_NAN_STATIC}. With a symbolic "
                f"dimension, leave EQX_ON_ERROR unset and avoid the check: for diffrax, pass "
                f"diffeqsolve(..., throw=False) and read sol.result.")
    if PALLAS_STATIC_ONLY in str(e) and _SYMBOLIC in str(e):
        end = "" if str(e).rstrip().endswith(".") else "."
        return (f"{end} Pallas kernels need static shapes: a pallas_call's grid, block shapes and cost estimate "
                f"are Python integers, so a symbolic dimension cannot reach the kernel. Keep the batch symbolic "
                f"outside it: run the kernel on fixed-size blocks with jax.lax.map over the batch (a scan, whose "
                f"length may be symbolic), or give the dimension a fixed size in the spec.")
    if type(e).__name__ == "InconclusiveDimensionOperation":
        return ("\nWhat to do: Python decides this comparison of a symbolic dimension while tracing, for every size "
                "at once. Give the dimension bounds or a constraint that decide it (dims: {b: {min: 4}}, "
                "constraints: ['b >= 4']), compute it on arrays so the program decides it at each call "
                "(jnp.asarray(x.shape[0]) > 3 with jnp.where or jax.lax.cond), or give the dimension a fixed "
                "size in the spec.")
    if PALLAS_NO_GPU in str(e):
        return ("\nWhat to do: on a machine without a GPU, lower the kernel for a named one: call it under "
                "jax.sharding.use_abstract_mesh(AbstractMesh((1,), ('gpu',), abstract_device=AbstractDevice("
                "device_kind='NVIDIA H200', num_cores=132, platform='gpu'))), as examples/pallas_gpu/gpu.py does.")
    if PALLAS_NO_CPU in str(e):
        return ("\nWhat to do: JAX lowers a Pallas GPU or TPU kernel for that platform alone, never for the CPU too "
                "(a kernel inside jax.lax.platform_dependent is lowered for every platform as well): export it with "
                "platforms: [cuda] (or [tpu]), and its plain-JAX reference for the CPU in an artifact of its own.")
    innermost = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ is not None else []
    probed = any(CUDNN_PROBE[0] in f.filename.replace("\\", "/") and f.name == CUDNN_PROBE[1] for f in innermost)
    if probed or any(said in str(e) for said in CUDNN_ABSENT):
        said = " (JAX failed asking cuDNN for its version: cuDNN is not installed here)" if probed else ""
        return (f'{said}\nWhat to do: implementation="cudnn" needs cuDNN wherever the program is traced and run, '
                'and its custom call is not one JAX keeps stable; export with implementation="xla" (portable, on every '
                'platform), or on a machine with cuDNN with allow_custom_calls naming its __cudnn$fmha target.')
    if FFT_STATIC_ONLY in str(e):
        return ("\nWhat to do: JAX lowers an FFT only over axes of fixed size: give the transformed axes fixed sizes "
                "in the spec and keep the symbolic dimension on the others (the batch).")
    size = _concrete_size(e, variables)
    if size is not None:
        return _concrete_size_hint(size)
    return ""


def _concrete_size(e: BaseException, variables: Collection[str]) -> str | None:
    """The symbolic size a call needed as a Python integer, as JAX prints it (``n``, ``2*h``), when ``e`` is such a
    failure: a ``TypeError`` that says so (``'_DimExpr' object cannot be interpreted as an integer``, numpy's
    ``expected ... integer ..., got 'n'``). The size is the one found in the innermost frames' values, else the one
    symbolic size of the arrays the innermost frame holds, else the variable the message names; "" when none says
    which; None for any other error."""
    if not isinstance(e, TypeError):
        return None
    text = str(e)
    if _SYMBOLIC not in text and not re.search(r"\bint(eger)?s?\b", text):
        return None
    tb, frames = e.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames[-_FRAMES:]):
        for value in list(frame.f_locals.values()):
            for item in value if isinstance(value, (tuple, list)) and len(value) <= 8 else (value,):
                if type(item).__name__ == _SYMBOLIC:
                    return str(item)
    if frames:  # range(x.shape[0]) in the innermost frame: the size was never a local, the array it came from is
        shapes = [getattr(v, "shape", None) for v in list(frames[-1].f_locals.values())]
        sizes = {str(d) for shape in shapes if isinstance(shape, tuple) for d in shape
                 if type(d).__name__ == _SYMBOLIC}
        if len(sizes) == 1:
            return sizes.pop()
    named = [v for v in sorted(variables) if f"'{v}'" in text]
    if named:
        return named[0]
    return "" if _SYMBOLIC in text else None


def _concrete_size_hint(size: str) -> str:
    """What to do when a call needs a Python integer for the symbolic size ``size`` ("" when it is not known)."""
    try:
        names = sorted(dimexpr.variables(dimexpr.parse(size))) if size else []
    except dimexpr.DimExprError:
        names = []
    if not names:
        which, fixed = "a dimension the spec makes symbolic", "the dimension"
    elif size == names[0]:
        which, fixed = f"the spec's dimension {size!r}", repr(size)
    else:
        which = f"the size {size} (of the spec's dimension{'s' if len(names) > 1 else ''} " \
                f"{', '.join(map(repr, names))})"
        fixed = ", ".join(map(repr, names))
    example = names[0] if names else "n"
    return (f"\nWhat to do: a call in the frames below needs a Python integer for {which}, which JAX traces for "
            f"every size at once. Either give {fixed} a fixed size in the spec (a number in the shape, one artifact "
            f"per size), or compute with calls that take a traced size: jnp.arange({example}), "
            f"jnp.zeros(({example},)), jnp.eye({example}) and lax operations do; Python's int() and range(), numpy, "
            f"and library arguments that must be Python integers (jnp.fft.irfft(n=...), jnp.diag_indices(...)) do "
            f"not.")
