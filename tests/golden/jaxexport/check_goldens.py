"""Deserialize the golden ``jax.export`` blobs and call them on their stored inputs.

    python check_goldens.py OUTDIR [--allow-expired] [--rtol R] [--atol A]

OUTDIR is a directory written by make_goldens.py (holding <jax version>/cases.json) or one version's directory.
For every case recorded as ok: ``jax.export.deserialize`` the ``.jaxexport`` bytes, call the result on both
stored input sets (inputs rebuilt with the deserialized ``in_tree``) and compare every output leaf (and, for
``vjp``, the VJP for a cotangent of ones, through ``jax.vjp(exported.call, ...)``) with the stored one:
``bitwise`` when identical, ``close`` when within rtol/atol (default 1e-6), else FAIL.

``--allow-expired`` sets ``jax_export_deserialize_expired_versions`` (newer JAX refuses serializations older
than its compatibility window without it). Works under any JAX that can deserialize the files; the
``sharded2`` case needs two devices, so XLA_FLAGS gets ``--xla_force_host_platform_device_count=2`` before
JAX is imported. Exit status 0 when every case passes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_FLAG}=2").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import export  # noqa: E402


def _load(npz, key: str):
    if key.endswith("_bf16bits"):
        return np.asarray(npz[key]).view(jnp.bfloat16)
    return np.asarray(npz[key])


def _compare(want, got, rtol: float, atol: float) -> tuple[str, float]:
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"mismatch: want {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}", float("inf")
    if want.tobytes() == got.tobytes():
        return "bitwise", 0.0
    w, g = want.astype(np.float64), got.astype(np.float64)
    diff = float(np.max(np.abs(w - g))) if w.size else 0.0
    return ("close" if np.allclose(g, w, rtol=rtol, atol=atol) else "differs"), diff


def _placer(rec: dict):
    """place(i, x): input leaf i on the devices the case was exported for (only sharded cases move anything)."""
    if rec.get("nr_devices", 1) <= 1 or "mesh" not in rec:
        return lambda i, x: x
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    m = rec["mesh"]
    n = int(np.prod(m["shape"]))
    if jax.device_count() < n:
        raise RuntimeError(f"needs {n} devices, have {jax.device_count()}")
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(m["shape"]), tuple(m["axis_names"]))
    shardings = [NamedSharding(mesh, P(*spec)) for spec in rec["in_partition_specs"]]
    return lambda i, x: jax.device_put(x, shardings[i])


def check_case(vdir: Path, name: str, rec: dict, rtol: float, atol: float) -> tuple[bool, str]:
    blob = (vdir / rec["files"]["serialized"]).read_bytes()
    try:
        exp = export.deserialize(bytearray(blob))
    except Exception as e:
        return False, f"REFUSED {type(e).__name__}: {e}"
    notes = []
    if str(exp.in_tree) != rec["in_tree"] or str(exp.out_tree) != rec["out_tree"]:
        notes.append(f"trees print as {exp.in_tree} -> {exp.out_tree}")
    worst = "bitwise"
    place = _placer(rec)
    with np.load(vdir / rec["files"]["arrays"]) as npz:
        for si, size in enumerate(rec["sizes"]):
            leaves = [place(i, _load(npz, k)) for i, (k, _, _) in enumerate(size["in"])]
            args, kwargs = exp.in_tree.unflatten(leaves)
            try:
                got = jax.tree_util.tree_leaves(exp.call(*args, **kwargs))
            except Exception as e:
                return False, f"CALL FAILED at s{si} {rec['symbolic_dims'][f's{si}']}: {type(e).__name__}: {e}"
            pairs = [(_load(npz, k), g, k) for (k, _, _), g in zip(size["out"], got)]
            if len(got) != len(size["out"]):
                return False, f"FAIL {len(got)} outputs, want {len(size['out'])}"
            if "vjp" in size:
                primal = exp.call(*args, **kwargs)
                _, pullback = jax.vjp(exp.call, *args, **kwargs)
                cts = jax.tree_util.tree_leaves(pullback(jax.tree_util.tree_map(jnp.ones_like, primal)))
                pairs += [(_load(npz, k), c, k) for (k, _, _), c in zip(size["vjp"], cts)]
            for want, g, key in pairs:
                verdict, diff = _compare(want, np.asarray(g), rtol, atol)
                if verdict not in ("bitwise", "close"):
                    return False, f"FAIL {key}: {verdict} (max abs diff {diff:g})"
                if verdict == "close":
                    worst = "close"
                    notes.append(f"{key} max abs diff {diff:g}")
    return True, " ".join([f"OK ({worst})"] + (["; " + "; ".join(notes)] if notes else []))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--allow-expired", action="store_true",
                    help="jax.config.update('jax_export_deserialize_expired_versions', True)")
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--atol", type=float, default=1e-6)
    opts = ap.parse_args(argv)
    if opts.allow_expired:
        jax.config.update("jax_export_deserialize_expired_versions", True)
    vdirs = [opts.outdir] if (opts.outdir / "cases.json").exists() else sorted(
        p.parent for p in opts.outdir.glob("*/cases.json"))
    if not vdirs:
        print(f"no cases.json under {opts.outdir}", file=sys.stderr)
        return 2
    print(f"checking with jax {jax.__version__} (allow expired: {opts.allow_expired})")
    failed = 0
    for vdir in vdirs:
        meta = json.loads((vdir / "cases.json").read_text())
        for name, rec in meta["cases"].items():
            if rec["status"] != "ok":
                print(f"{meta['jax_version']}/{name}: not produced ({rec.get('reason', '')})")
                continue
            ok, msg = check_case(vdir, name, rec, opts.rtol, opts.atol)
            failed += not ok
            print(f"{meta['jax_version']}/{name}: {msg}")
    print("all ok" if not failed else f"{failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
