"""Function -> artifact: entry points, bound weights, lowering through ``jax.export``, the manifest writer and the
one step that writes an artifact (shared with ``jaxport.importer``)."""
