"""Function -> artifact. The core: the export's request (``request``: ``ExportRequest`` over ``WriteOptions``), the
pipeline that runs it (``pipeline``: entry point -> spec -> lowering -> checks -> artifact) and ``rebind`` (an
artifact's bound weights replaced, its programs kept). Its rooms (sub-packages), one concept each, below the core:

- ``entry``: the function to export: an entry point string (``entrypoint``), a Python object (``live``), and the paths
  an export records relative to its root (``paths``);
- ``weights``, on ``entry``: binding weights: a source loaded and its leaves named (``bind``; an orbax checkpoint:
  ``orbax_source``) and the parameter ``--bind NAME=SOURCE`` binds (``binding``);
- ``lowering``, on ``weights`` and ``entry``: what runs JAX's tracer: a function and its spec lowered to a
  ``jax.export.Exported`` (``lower``, with ``like``, ``returns`` and ``hints``) in the environment that keeps its bytes
  the caller's own (``tracing``), the VJP programs (``gradients``), a program exported again (``relower``);
- ``writing``, on ``lowering``: the artifact written: the manifest writer (``manifest``), the one step that writes
  (``write``, shared with ``jaxport.importer``), programs for an older JAX (``target``, ``--for-jax``).

``scripts/check_layers.py`` holds the rooms to that order. This ``__init__`` imports nothing (``jaxport.export`` is the
facade's function, bound over this package's name), and nor do its rooms'.
"""
