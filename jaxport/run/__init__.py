"""Artifact -> results. ``load`` opens and checks an artifact into a ``loaded.Loaded`` function, which runs through
a backend (``backend``: the seam; ``jax_backend``, ``iree``) with the compilation ``cache``; ``npyio`` reads input
files safely, ``inputs`` gathers ``--inputs`` and random inputs, ``outputs`` describes and writes results (and the
``call --json`` report); ``gradients``, ``streaming``, ``distributed`` and ``deploy`` (deployable IREE modules:
``buckets``, the padding proof ``rowwise``, ``iree_module``, and ``iree_loader``, which runs them without JAX) build
on them."""
