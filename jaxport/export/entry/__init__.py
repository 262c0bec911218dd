"""The function to export: loaded from an entry point (``entrypoint``: ``path/to/model.py:NAME``,
``package.module:NAME``) or taken as a Python object (``live``), and the paths an export records of it and of its
bound sources, relative to the export root (``paths``). It imports nothing else of ``export``."""
