"""The artifact format: the container, the manifest and what reads it, without running anything.

The core is this package's flat modules: the container (``container``, ``layout``, ``zipread``, ``zipwrite``,
``bulkwrite``), the manifest and its records (``manifest``, ``model``, ``versions``, ``bounds``), the weights
(``tensors``, ``private_copy``), the call tree (``calltree``, ``pathtree``, ``typed``) and the input contract
(``contract``, ``summary``). The rooms (sub-packages) answer questions about an artifact and build on the core, which
imports none of them: ``window`` (which JAX reads it), ``signing`` (who made it), ``diff`` (what changed),
``extract`` (its parts, for other tools) and ``policy`` (whether it may ship). ``scripts/check_layers.py`` holds them
to that order.

Nothing in this package imports JAX at module level: ``inspect``, ``check`` and ``diff --no-programs`` work in a
process that never imports it. Lower layers (the foundation modules of ``jaxport``) are all it builds on; it imports
nothing from ``export``, ``importer``, ``run`` or ``verify``.
"""
