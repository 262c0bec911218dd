"""Artifact -> results. The core: ``load`` opens and checks an artifact into a ``loaded.Loaded`` function, which runs
through a backend (``backend``: the seam; ``jax_backend``, ``iree``) with the compilation ``cache`` and the
``executables`` compiled ahead; ``warmup``, ``gradients``, ``distributed`` and ``latency`` (how long its calls take)
build on it. Its rooms (sub-packages):

- ``values``, below the core: the values a function takes and gives (``npyio`` reads input files safely, ``inputs``
  gathers ``--inputs`` and random inputs, ``outputs`` describes and writes results, ...);
- ``buckets``, below the core: the one home of sizes (plans, served sizes, the padding proof);
- ``compile``, above it: compiling ahead of time (``aot`` for a target machine; ``deploy``, deployable IREE modules,
  and ``iree_loader``, which runs them without JAX);
- ``calls``, on top: ``jaxport call`` as a library (``calling``, its ``report``, ``streaming``, ``expect``).

``scripts/check_layers.py`` holds the rooms to that order."""

__all__ = ["CallReport", "CallRequest", "call"]


def __getattr__(name: str) -> object:
    """``jaxport.run.call(request) -> CallReport`` (and its two records) without importing ``calls.calling`` with every
    module of this package (``iree_loader`` runs deployed modules without JAX and stays light)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .calls import calling

    return getattr(calling, name)
