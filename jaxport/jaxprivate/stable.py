"""The custom-call targets JAX guarantees stable, and the host callbacks jaxlib registers.

JAX has no public API for the set of custom-call targets it guarantees to keep stable across versions; its export
code keeps it as a module constant. jaxport's allowlist must match the installed JAX, so it reads that constant
here. ``tests/foundation/test_checks.py`` compares it with the reviewed copy below and fails when JAX changes the set,
so a change is noticed and reviewed rather than silently inherited.
"""

from __future__ import annotations


def guaranteed_stable_custom_calls() -> frozenset[str]:
    """Custom-call targets JAX's export guarantees stable, from the installed JAX."""
    from jax._src.export import _export  # no public API: see the module docstring

    return frozenset(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)


#: The set as reviewed for jax 0.10.2, unchanged through 0.11.x and 0.12.0.1; jax 0.12.1 added lgamma's and digamma's
#: kernels (update it, after reading the JAX change, when the test says it differs).
REVIEWED_JAX_VERSION = "0.12.1"
REVIEWED_STABLE_TARGETS = frozenset({
    "AllocateBuffer", "ApproxTopK", "Eigh", "LuDecomposition", "ProductOfElementaryHouseholderReflectors", "Qr",
    "SPMDFullToShardShape", "SPMDShardToFullShape", "Sharding", "annotate_device_placement",
    "cu_lu_pivots_to_permutation", "cu_threefry2x32_ffi", "cusolver_geqrf_ffi", "cusolver_gesvd_ffi",
    "cusolver_gesvdj_ffi", "cusolver_getrf_ffi", "cusolver_orgqr_ffi", "cusolver_potrf_ffi", "cusolver_syevd_ffi",
    "cusolver_sytrd_ffi", "cusparse_gtsv2_ffi", "hip_lu_pivots_to_permutation", "hip_threefry2x32_ffi",
    "hipsolver_geqrf_ffi", "hipsolver_gesdd_ffi", "hipsolver_gesvd_ffi", "hipsolver_gesvdj_ffi",
    "hipsolver_getrf_ffi", "hipsolver_orgqr_ffi", "hipsolver_potrf_ffi", "hipsolver_syevd_ffi",
    "hipsolver_sytrd_ffi", "lapack_cgees_ffi", "lapack_cgeev_ffi", "lapack_cgehrd_ffi", "lapack_cgeqrf_ffi",
    "lapack_cgesdd_ffi", "lapack_cgetrf_ffi", "lapack_cgtsv_ffi", "lapack_cheevd_ffi", "lapack_chetrd_ffi",
    "lapack_cpotrf_ffi", "lapack_ctrsm_ffi", "lapack_cungqr_ffi", "lapack_dgees_ffi", "lapack_dgeev_ffi",
    "lapack_dgehrd_ffi", "lapack_dgeqrf_ffi", "lapack_dgesdd_ffi", "lapack_dgetrf_ffi", "lapack_dgtsv_ffi",
    "lapack_dorgqr_ffi", "lapack_dpotrf_ffi", "lapack_dsyevd_ffi", "lapack_dsytrd_ffi", "lapack_dtrsm_ffi",
    "lapack_sgees_ffi", "lapack_sgeev_ffi", "lapack_sgehrd_ffi", "lapack_sgeqrf_ffi", "lapack_sgesdd_ffi",
    "lapack_sgetrf_ffi", "lapack_sgtsv_ffi", "lapack_sorgqr_ffi", "lapack_spotrf_ffi", "lapack_ssyevd_ffi",
    "lapack_ssytrd_ffi", "lapack_strsm_ffi", "lapack_zgees_ffi", "lapack_zgeev_ffi", "lapack_zgehrd_ffi",
    "lapack_zgeqrf_ffi", "lapack_zgesdd_ffi", "lapack_zgetrf_ffi", "lapack_zgtsv_ffi", "lapack_zheevd_ffi",
    "lapack_zhetrd_ffi", "lapack_zpotrf_ffi", "lapack_ztrsm_ffi", "lapack_zungqr_ffi", "mosaic_gpu_v2",
    "shape_assertion", "stablehlo.dynamic_approx_top_k", "stablehlo.dynamic_reduce_window",
    "stablehlo.dynamic_rng_bit_generator", "stablehlo.dynamic_top_k", "tf.call_tf_function", "tpu_custom_call",
    "cpu_digamma_ffi", "cpu_lgamma_ffi", "cu_digamma_ffi", "cu_lgamma_ffi", "hip_digamma_ffi", "hip_lgamma_ffi",
})

#: The targets JAX added to the set after the oldest release jaxport supports, by the release that added them (read
#: from ``jax/_src/export/_export.py`` of every supported release): a supported JAX older than that release guarantees
#: the reviewed set without them. Add a row (and review it) when the supported range or the reviewed version moves.
STABLE_TARGETS_ADDED_IN: dict[str, frozenset[str]] = {
    "0.10.0": frozenset({"hipsolver_gesdd_ffi"}),
    # lgamma and digamma as FFI kernels on CPU and GPU, with JAX's back-compat test data (``cuda_lgamma.py``, ...)
    "0.12.1": frozenset({"cpu_digamma_ffi", "cpu_lgamma_ffi", "cu_digamma_ffi", "cu_lgamma_ffi", "hip_digamma_ffi",
                         "hip_lgamma_ffi"}),
}


def _version_tuple(version: str) -> tuple[int, ...]:
    """``"0.9.0.1"`` -> ``(0, 9, 0, 1)``; a local or pre-release suffix (``0.10.2+cuda12``, ``0.11.0rc1``) ends it."""
    parts = []
    for part in version.split("."):
        digits = len(part) - len(part.lstrip("0123456789"))
        if not digits:
            break
        parts.append(int(part[:digits]))
        if digits < len(part):
            break
    return tuple(parts)


def reviewed_stable_targets(jax_version: str) -> frozenset[str]:
    """The reviewed set as JAX ``jax_version`` (a supported release) guarantees it: :data:`REVIEWED_STABLE_TARGETS`
    less the targets :data:`STABLE_TARGETS_ADDED_IN` a later release."""
    have = _version_tuple(jax_version)
    return REVIEWED_STABLE_TARGETS.difference(*(targets for added_in, targets in STABLE_TARGETS_ADDED_IN.items()
                                                if have < _version_tuple(added_in)))


def registered_host_callbacks() -> frozenset[str]:
    """The host-callback custom-call targets the installed jaxlib registers (for every platform it knows): each
    registered target whose name says it calls back into Python. ``checks.HOST_CALLBACK_TARGETS`` is the reviewed
    floor; these are added to it, so a callback a new JAX registers under a new name is never runnable either.

    No public API lists registered targets: ``xla_client.custom_call_targets`` is jaxlib's."""
    from jax._src.lib import xla_client  # no public API: see the docstring

    found: set[str] = set()
    for platform in ("cpu", "cuda", "rocm", "tpu"):
        try:
            names = xla_client.custom_call_targets(platform)
        except Exception:  # noqa: BLE001 - a platform jaxlib was not built for
            continue
        found.update(n for n in names if isinstance(n, str) and ("python" in n.lower() or "callback" in n.lower()))
    return frozenset(found)
