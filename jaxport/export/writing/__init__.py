"""The artifact written: the manifest writer (``manifest``), the one step that turns lowered functions into a file
(``write``, shared with ``jaxport.importer``), and programs serialized for an older JAX (``target``: ``--for-jax``).
On ``lowering`` (a function's constraints, as the manifest records them)."""
