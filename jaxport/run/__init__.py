"""Artifact -> results: loading, the ``Loaded`` function and its backends (JAX, IREE), the compilation cache,
input reading and checking, outputs, streaming and multi-process runs."""
