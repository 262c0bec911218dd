"""Linear algebra for the GPU tier: exported on a CPU host for `[cpu, cuda]`, it lowers to LAPACK's FFI calls on the
CPU and cuSOLVER's on the GPU (`cusolver_potrf_ffi`, `cusolver_geqrf_ffi`, `cusolver_syevd_ffi`, ...), which JAX
keeps stable: no allowance is needed."""

import jax.numpy as jnp


def solve(a, b):
    """Solve ``(a aᵀ + n I) x = b`` by Cholesky, and return it with the QR of ``a`` and the eigenvalues of the
    symmetric matrix: ``(x, r, w)``."""
    n = a.shape[-1]
    spd = a @ jnp.swapaxes(a, -1, -2) + n * jnp.eye(n, dtype=a.dtype)
    chol = jnp.linalg.cholesky(spd)
    y = jnp.linalg.solve(chol, b)
    x = jnp.linalg.solve(jnp.swapaxes(chol, -1, -2), y)
    _, r = jnp.linalg.qr(a)
    w = jnp.linalg.eigvalsh(spd)
    return x, r, w
