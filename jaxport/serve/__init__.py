"""Serving and batch inference: an artifact's function called on batches of any size without compiling mid-job.

``batching`` is the engine-free core: a bucket plan from the spec's bounds or ``--dim`` (``run.buckets.served``), a
batch padded to the smallest bucket that fits where the program is proven to work row by row (``run.buckets.verdicts``,
``run.buckets.rowwise``), split over the largest bucket, and run at its own size elsewhere; ``compiled`` compiles each
bucket once, when first needed or ahead, and bounds those kept. ``batcher`` runs a server's requests on one worker
thread, merging what queues behind a running call; ``engine`` is what a batch engine's worker holds, and ``rows`` stacks
an engine's rows into input arrays; ``loading`` loads for them all by one ``LoadOptions``; ``ports`` checks the
addresses a server will bind (``unix``: its unix sockets, ``--uds``). ``oip`` maps an artifact's signature to the Open
Inference Protocol (v2). ``models`` is ``jaxport serve`` in Python (:func:`open_models`, :func:`serve_models`). The
engine adapters are thin layers over them: ``kserve_server`` (``jaxport serve``, extra ``jaxport[serve]``; with
``registry``, ``rest``, ``grpc_service``, ``metrics``, ``lifecycle`` and ``kserve_imports``), and ``jaxport.ray``,
``jaxport.beam`` and ``jaxport.spark`` (extras ``jaxport[ray]``, ``jaxport[beam]``, ``jaxport[spark]``).
"""

__all__ = ["Listen", "ModelSpec", "ServedModel", "Serving", "open_models", "serve_models"]


def __getattr__(name: str) -> object:
    """``jaxport.serve.open_models(...)`` and the rest of ``models`` without importing it with every module of this
    package (the batch engines' adapters import ``engine`` alone)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import models

    return getattr(models, name)
