"""The artifact format: the container, the manifest and what reads it, without running anything.

Nothing in this package imports JAX at module level: ``inspect``, ``check`` and ``diff --no-programs`` work in a
process that never imports it. Lower layers (the foundation modules of ``jaxport``) are all it builds on; it imports
nothing from ``export``, ``importer``, ``run`` or ``verify``.
"""
