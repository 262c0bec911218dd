"""Artifact -> results. ``load`` opens and checks an artifact into a ``loaded.Loaded`` function, which runs through a
backend (``backend``: the seam; ``jax_backend``, ``iree``) with the compilation ``cache``; ``npyio`` reads input files
safely, ``inputs`` gathers ``--inputs`` and random inputs, ``outputs`` describes and writes results, ``report`` is the
``call --json`` report and ``expect`` compares outputs with references; ``gradients``, ``streaming``, ``distributed``
and ``deploy`` (deployable IREE modules: ``buckets``, the padding proof ``rowwise``, ``iree_module``, and
``iree_loader``, which runs them without JAX) build on them."""

__all__ = ["CallReport", "CallRequest", "call"]


def __getattr__(name: str) -> object:
    """``jaxport.run.call(request) -> CallReport`` (and its two records) without importing ``calling`` with every
    module of this package (``iree_loader`` runs deployed modules without JAX and stays light)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import calling

    return getattr(calling, name)
