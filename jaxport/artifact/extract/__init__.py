"""Taking an artifact apart for other tools (``jaxport extract``): its bound weights (``weights``) and a function's
program, as JAX's serialization or StableHLO (``programs``). Callers import both from here."""

from .programs import extract_mlir, extract_payload
from .weights import WeightsWritten, bound_arguments, extract_weights, weight_arrays, weights_to_write

__all__ = ["WeightsWritten", "bound_arguments", "extract_mlir", "extract_payload", "extract_weights", "weight_arrays",
           "weights_to_write"]
