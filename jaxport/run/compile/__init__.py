"""Compiling ahead of time, for a machine that need not be this one.

For XLA: ``aot`` compiles every function at every shape bucket for a ``targets`` machine (``jaxport warmup
--target``, ``jaxport check --target``) and records the executables. For IREE (the extra ``jaxport[iree]``):
``deploy`` builds a deployable module (``jaxport compile``) from one function per bucket (``iree_module``), and
``iree_loader`` runs it with numpy and IREE's runtime alone. This ``__init__`` imports nothing, so that
``iree_loader`` stays free of JAX.
"""
