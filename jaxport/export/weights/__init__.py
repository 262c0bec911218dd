"""Binding weights at export: a ``bind:`` source (a file, an orbax checkpoint: ``orbax_source``, a Python attribute)
loaded and its leaves named as tensors (``bind``), and the parameter ``--bind NAME=SOURCE`` binds (``binding``). On
``entry`` (an attribute is read from the entry point's module); ``rebind``, which replaces an artifact's bound weights,
is the core's."""
