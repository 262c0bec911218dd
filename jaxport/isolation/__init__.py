"""Work on bytes that may be hostile, in a child process: ``sandbox`` runs ``module:function`` (or forks) under
memory, CPU and wall-time limits and reports how the child ended; ``isolate`` checks a program there before this
process reads it (``check_payload``, ``check_module_bytes``, ``check_runs``) and remembers the verdicts in the user's
cache, and holds what ``jaxport call --isolate`` and ``inspect --mlir --isolate`` run a whole command with.

A layer of its own (``scripts/check_layers.py``): it builds on the foundation (the lowered program's readers among
it), and the artifact reader and everything above it call it. The package's ``__init__`` imports nothing: a light
child (``sandbox.run(..., light=True)``) imports only the modules its target needs.
"""
