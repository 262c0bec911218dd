"""Serving and batch inference: an artifact's function called on batches of any size without compiling mid-job.

The core is this package's flat modules, engine-free (no kserve, no server, no socket). ``batching``: a bucket plan
from the spec's bounds or ``--dim`` (``run.buckets.served``), a batch padded to the smallest bucket that fits where the
program is proven to work row by row (``run.buckets.verdicts``, ``run.buckets.rowwise``), split over the largest bucket,
and run at its own size elsewhere; ``compiled`` compiles each bucket once, when first needed or ahead, and bounds those
kept. ``batcher`` runs a server's requests on one worker thread, merging what queues behind a running call; ``engine``
is what a batch engine's worker holds, and ``rows`` stacks an engine's rows into input arrays; ``loading`` loads for
them all by one ``LoadOptions``; ``limits`` bounds a server's settings. The batch engines' adapters ``jaxport.ray``,
``jaxport.beam`` and ``jaxport.spark`` (extras ``jaxport[ray]``, ``jaxport[beam]``, ``jaxport[spark]``) stand on the
core alone.

Its room ``transport`` is ``jaxport serve``'s server on the core: ``models`` (:func:`open_models`, :func:`serve_models`:
``jaxport serve`` in Python), the addresses (``ports``, ``unix``), the Open Inference Protocol (``oip``) and the kserve
transport (``kserve_server``, extra ``jaxport[serve]``; with ``registry``, ``rest``, ``grpc_service``, ``metrics``,
``lifecycle`` and ``kserve_imports``). The core imports no transport (``scripts/check_layers.py``).
"""

__all__ = ["Listen", "ModelSpec", "ServedModel", "Serving", "open_models", "serve_models"]


def __getattr__(name: str) -> object:
    """``jaxport.serve.open_models(...)`` and the rest of ``transport.models`` without importing it with every module
    of this package (the batch engines' adapters import ``engine`` alone)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .transport import models

    return getattr(models, name)
