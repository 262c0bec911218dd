"""The few things jaxport reads from JAX's private modules, kept in this one file.

JAX has no public API for the set of custom-call targets it guarantees to keep stable across versions; its export
code keeps it as a module constant. jaxport's allowlist must match the installed JAX, so it reads that constant
here. ``tests/test_checks.py`` pins a reviewed copy (``REVIEWED_STABLE_TARGETS``) and fails when JAX changes the
set, so a change is noticed and reviewed rather than silently inherited.
"""

from __future__ import annotations


def guaranteed_stable_custom_calls() -> frozenset[str]:
    """Custom-call targets JAX's export guarantees stable, from the installed JAX."""
    from jax._src.export import _export  # no public API: see the module docstring

    return frozenset(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)
