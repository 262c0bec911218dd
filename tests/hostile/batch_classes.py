"""The batching classes of issue 36 (items 1 and 3), run in-process by ``python -m tests.hostile.run`` (``--class
position-dependence``, ``--class batch-rows``; rows of ``process_runs``' table):

- ``position-dependence``: programs of a batch-polymorphic input (``dims: {batch: {min: 1, max: 16}}``), row-wise
  ones and ones whose rows depend on their positions or on each other, exported with ``jaxport.export``. Their
  padding and splitting verdicts are the ones serving and the batch engines use (``serve.batching.Batched``, which
  computes them by ``verdicts_of``: ``run.buckets.padding`` and ``run.buckets.rowwise``), and each verdict is checked
  against ``jax.jit`` of the live function on random data: "may pad" fails when the first ``n`` rows of ``f(pad(x))``
  (edge fill, which ``Batched`` uses, and random rows) differ from ``f(x)``; "may split" when
  ``f(concat(a, b)) != concat(f(a), f(b))`` for a split of one batch; "may merge" the same for several clients'
  rows. A refusal that the trials could not fault is counted apart, as conservative (``no*`` in a row's name), never
  as a failure. Then the engine path itself (``Batched`` on buckets 4 and 8): a padded call, an exact one, 12 rows
  (split into 8 + 4, or refused), two requests given to one run (merged, or run alone), the dispatcher's merge
  decision (``Batcher.merge``) and the batch engines' refusal (``serve.engine.refuse_unsplittable``): every answer
  must equal the live function's, and what the verdicts forbid must be refused, never answered wrong.
- ``batch-rows``: hostile row sets given to the stacking the Ray, Beam and Spark adapters use (``serve.rows``:
  ``batch_columns``, ``example_columns``, ``stack_column`` with a Spark column), and output names to Spark's struct
  fields (``jaxport.spark._fields``). A row set must be stacked exactly (the input's shape and dtype, every value
  equal to the one given: no lossy cast) or refused with an ``InputError`` naming the column and the first bad row;
  any other exception, a value changed or a message without the column or the row is the failure. The pandas row
  sets need pandas and the Spark fields pyspark; without them they are listed as skipped, never counted as passed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .process_runs import Row

CLASSES = ("position-dependence", "batch-rows")

# --- position-dependence --------------------------------------------------------------------------------------------

BATCH = "batch"
DIMS = {BATCH: {"min": 1, "max": 16}}
#: The buckets ``Batched`` compiles in the engine checks: a call of 3 rows pads to 4, 12 rows are more than 8.
BUCKETS = [4, 8]
F = 8  # features per row
ROWS = f"f32[{BATCH}, {F}]"
TOL = {"rtol": 1e-5, "atol": 1e-5}


@dataclass(frozen=True)
class Program:
    """A function of a batch: ``kind`` is what it is (``row-wise``: each output row is computed from its own input
    row alone; ``positional``: rows depend on where they stand, padding at the end keeps that; ``cross-row``: rows
    mix, padding changes them), used for coverage only: every verdict is judged by the trials."""

    name: str
    fn: Callable[..., Any]
    kind: str
    args: tuple[str, ...] = (ROWS,)
    #: Per argument, ``gen(rng, shape)`` giving its values (default: standard normal float32).
    gens: tuple[Callable[[Any, tuple[int, ...]], Any] | None, ...] = ()


def _ints(hi: int | None = None) -> Callable[[Any, tuple[int, ...]], Any]:
    """Integers in [0, hi) (hi None: [0, rows), indices into the batch)."""
    import numpy as np

    return lambda rng, shape: rng.integers(0, hi if hi is not None else max(shape[0], 1), shape).astype(np.int32)


def programs() -> list[Program]:
    """The corpus of ``position-dependence`` (see :class:`Program`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    rng = np.random.default_rng(7)
    w = jnp.asarray(rng.standard_normal((F, F)), jnp.float32) * 0.3
    w2 = jnp.asarray(rng.standard_normal((F, 4)), jnp.float32) * 0.3
    bias = jnp.asarray(rng.standard_normal(F), jnp.float32)
    table = jnp.asarray(rng.standard_normal((10, F)), jnp.float32)
    k3 = jnp.asarray([0.25, 0.5, 0.25], jnp.float32)
    kernel = jnp.asarray(rng.standard_normal((F, 1, 3)), jnp.float32)  # (out, in, width)
    feat = jnp.asarray(rng.standard_normal((1, 1, 3)), jnp.float32)
    key = jax.random.key(0)

    def layernorm(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    def conv_features(x):  # a convolution over each row's features: the batch is the convolution's batch
        return lax.conv_general_dilated(x[:, None, :], kernel, (1,), "SAME")[:, :, 0]

    def conv_batch(x):  # the batch as the convolution's spatial axis: each output row mixes three input rows
        return lax.conv_general_dilated(x.T[:, None, :], feat, (1,), "SAME")[:, 0, :].T

    def fori_rows(x):  # rows 0..2 updated by a loop counter
        return lax.fori_loop(0, 3, lambda i, c: c.at[i].add(1.0), x)

    def while_scan(x):  # a while loop running over the rows by counter, each the sum of the rows before it
        def body(s):
            i, acc, total = s
            total = total + x[i]
            return i + 1, acc.at[i].set(total), total
        return lax.while_loop(lambda s: s[0] < x.shape[0], body, (0, jnp.zeros_like(x), jnp.zeros(F)))[1]

    def scan_rows(x):
        return lax.scan(lambda c, r: (c + r, c + r), jnp.zeros(F, x.dtype), x)[1]

    def scan_layers(x):
        return lax.scan(lambda c, m: (jnp.tanh(c @ m), None), x, jnp.stack([w, w.T, w]))[0]

    def stencil(x):  # each row mixed with its neighbours: jnp.convolve(column, [0.25, 0.5, 0.25], "same")
        p = jnp.pad(x, ((1, 1), (0, 0)))
        return k3[0] * p[2:] + k3[1] * p[1:-1] + k3[2] * p[:-2]

    def dynamic_start(x):  # a slice along the batch whose start is computed from the data
        return lax.dynamic_slice_in_dim(x, jnp.argmax(x[:, 0]), 1, axis=0) + x * 0.0

    row_wise = [
        Program("elementwise", lambda x: jnp.sin(x) * 2.0 + jnp.exp(-x * x), "row-wise"),
        Program("matmul-weight", lambda x: x @ w, "row-wise"),
        Program("mlp", lambda x: jax.nn.relu(x @ w + bias) @ w2, "row-wise"),
        Program("softmax-rows", lambda x: jax.nn.softmax(x, axis=-1), "row-wise"),
        Program("layernorm-rows", layernorm, "row-wise"),
        Program("vmap-outer", jax.vmap(lambda r: jnp.outer(r, r).sum(0)), "row-wise"),
        Program("vmap-norm", jax.vmap(lambda r: r / jnp.linalg.norm(r)), "row-wise"),
        Program("gather-per-row", lambda x, i: jnp.take_along_axis(x, i[:, None], axis=1)[:, 0], "row-wise",
                (ROWS, f"i32[{BATCH}]"), (None, _ints(F))),
        Program("embedding-lookup", lambda i: table[i], "row-wise", (f"i32[{BATCH}]",), (_ints(10),)),
        Program("one-hot", lambda i: jax.nn.one_hot(i, F), "row-wise", (f"i32[{BATCH}]",), (_ints(F),)),
        Program("sort-rows", lambda x: jnp.sort(x, axis=1), "row-wise"),
        Program("argsort-rows", lambda x: jnp.argsort(x, axis=1), "row-wise"),
        Program("cumsum-features", lambda x: jnp.cumsum(x, axis=1), "row-wise"),
        Program("top-k-features", lambda x: lax.top_k(x, 3)[0], "row-wise"),
        Program("flip-features", lambda x: x[:, ::-1], "row-wise"),
        Program("two-inputs", lambda x, y: x * y - y, "row-wise", (ROWS, ROWS)),
        Program("dict-outputs", lambda x: {"s": x.sum(1), "t": x * 2.0}, "row-wise"),
        Program("reshape-rows", lambda x: x.reshape(x.shape[0], 2, F // 2).sum(2), "row-wise"),
        Program("leaky-where", lambda x: jnp.where(x > 0, x, 0.1 * x), "row-wise"),
        Program("fori-layers", lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ w), x), "row-wise"),
        Program("scan-layers", scan_layers, "row-wise"),
        Program("conv-features", conv_features, "row-wise"),
        Program("batched-matmul", lambda x: x @ jnp.swapaxes(x, 1, 2), "row-wise", (f"f32[{BATCH}, 3, 3]",)),
        Program("einsum-bij", lambda x: jnp.einsum("bi,ij->bj", x, w), "row-wise"),
        Program("feature-count", lambda x: x / x.shape[1], "row-wise"),
        Program("iota-features", lambda x: x + jnp.arange(F, dtype=x.dtype), "row-wise"),
        Program("associative-scan-features", lambda x: lax.associative_scan(jnp.add, x, axis=1), "row-wise"),
        Program("convolve-features", jax.vmap(lambda r: jnp.convolve(r, k3, mode="same")), "row-wise"),
    ]
    hidden_iota = lambda x: x + jnp.broadcast_to(  # noqa: E731 - an arange over rows behind a reshape
        jnp.arange(x.shape[0] * F, dtype=x.dtype).reshape(x.shape[0], F) // F, x.shape)
    not_row_wise = [
        Program("arange-rows", lambda x: x + jnp.arange(x.shape[0], dtype=x.dtype)[:, None], "positional"),
        Program("broadcasted-iota", lambda x: x * lax.broadcasted_iota(jnp.float32, x.shape, 0), "positional"),
        Program("hidden-iota-reshape", hidden_iota, "positional"),
        Program("iota-reshaped-2n", lambda x: x[:, :2] + jnp.arange(2 * x.shape[0], dtype=x.dtype).reshape(-1, 2),
                "positional"),
        Program("parity-rows", lambda x: jnp.where(jnp.arange(x.shape[0])[:, None] % 2 == 0, x, -x), "positional"),
        Program("random-noise", lambda x: x + jax.random.normal(key, x.shape), "positional"),
        Program("cumsum-batch", lambda x: jnp.cumsum(x, axis=0), "positional"),
        Program("cumprod-batch", lambda x: jnp.cumprod(x, axis=0), "positional"),
        # lax.associative_scan along a symbolic axis does not export (JAX: "associative scan over axis of
        # non-constant size"); lax.cummax is the scan along the batch that does
        Program("cummax-batch", lambda x: lax.cummax(x, axis=0), "positional"),
        Program("scan-over-rows", scan_rows, "positional"),
        Program("while-counter", while_scan, "positional"),
        Program("fori-update-rows", fori_rows, "positional"),
        Program("diff-prepend", lambda x: jnp.diff(x, axis=0, prepend=0.0), "positional"),
        Program("first-row", lambda x: x - x[0], "positional"),
        Program("ones-cumsum-index", lambda x: x + jnp.cumsum(jnp.ones(x.shape[0], x.dtype))[:, None], "positional"),
        Program("gram", lambda x: x @ x.T, "cross-row"),
        Program("pairwise-distance", lambda x: ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1), "cross-row"),
        Program("eye-matmul", lambda x: jnp.eye(x.shape[0], dtype=x.dtype) @ x, "cross-row"),
        Program("batch-mean", lambda x: x - x.mean(axis=0), "cross-row"),
        Program("batch-sum", lambda x: x.sum(axis=0), "cross-row"),
        Program("batch-max", lambda x: x / jnp.max(jnp.abs(x), axis=0), "cross-row"),
        Program("softmax-batch", lambda x: jax.nn.softmax(x, axis=0), "cross-row"),
        Program("sort-batch", lambda x: jnp.sort(x, axis=0), "cross-row"),
        Program("argsort-batch", lambda x: jnp.argsort(x[:, 0]), "cross-row"),
        Program("gather-sorted-rows", lambda x: x[jnp.argsort(x[:, 0])], "cross-row"),
        Program("flip-batch", lambda x: jnp.flip(x, 0), "cross-row"),
        Program("reverse-slice", lambda x: x[::-1], "cross-row"),
        Program("roll-batch", lambda x: jnp.roll(x, 1, axis=0), "cross-row"),
        Program("double-reverse", lambda x: x[::-1][::-1] * 2.0, "cross-row"),
        Program("last-row", lambda x: x - x[-1], "cross-row"),
        Program("uses-batch-size", lambda x: x * x.shape[0], "cross-row"),
        Program("tile-batch", lambda x: jnp.tile(x, (2, 1)), "cross-row"),
        Program("repeat-batch", lambda x: jnp.repeat(x, 2, axis=0), "cross-row"),
        Program("transpose-output", lambda x: x.T, "positional"),
        Program("batch-on-axis-1", lambda x, y: x[:, :4] + y.T, "positional", (ROWS, f"f32[4, {BATCH}]")),
        # jnp.convolve of a symbolic length does not export (JAX needs the length as an int): the same stencil
        Program("stencil-batch", stencil, "cross-row"),
        Program("conv-over-batch", conv_batch, "cross-row"),
        Program("top-k-batch", lambda x: lax.top_k(x.T, 1)[0], "cross-row"),  # k <= batch for every batch
        Program("dynamic-slice-start", dynamic_start, "cross-row"),
        Program("gather-rows-by-index", lambda x, i: x[i], "cross-row", (ROWS, f"i32[{BATCH}]"), (None, _ints())),
        Program("segment-sum", lambda x, s: jax.ops.segment_sum(x, s, num_segments=4), "cross-row",
                (ROWS, f"i32[{BATCH}]"), (None, _ints(4))),
        Program("flatten", lambda x: x.reshape(-1), "cross-row"),
        Program("append-row", lambda x: jnp.concatenate([x, x[:1]], 0), "cross-row"),
        # the batch size's value, equal at the two sizes the specializations compare (11 and 13) and unlike them at
        # the sizes a call pads to: seen by the data-flow walk of the polymorphic program (run/buckets/dimvalues.py)
        Program("min-of-size", lambda x: x * jnp.minimum(x.shape[0], 8), "cross-row"),
        Program("size-floordiv", lambda x: x + x.shape[0] // 4, "cross-row"),
        Program("loop-of-size-parity", lambda x: lax.fori_loop(0, x.shape[0] % 2, lambda i, c: c * 2 + 1, x),
                "cross-row"),
        Program("size-int8-wrap", lambda x: x + (jnp.int32(x.shape[0]) * 128).astype(jnp.int8), "cross-row"),
        Program("key-of-size-parity", lambda x: x + jax.random.normal(
            jax.random.fold_in(key, x.shape[0] % 2), (F,)), "cross-row"),
        Program("size-in-unbatched-output", lambda x: (x * 2.0, jnp.ones(3) * (x.shape[0] % 2)), "cross-row"),
        Program("size-with-unbatched-input", lambda x, w: x * w + x.shape[0] % 2, "cross-row",
                (ROWS, f"f32[{F}]")),
    ]
    return row_wise + not_row_wise


def _shape(arg: str, n: int) -> tuple[str, tuple[int, ...]]:
    dtype, _, dims = arg.partition("[")
    return dtype, tuple(n if d.strip() == BATCH else int(d) for d in dims.rstrip("]").split(","))


def _draw(prog: Program, n: int, rng: Any) -> list[Any]:
    import numpy as np

    out = []
    for k, arg in enumerate(prog.args):
        dtype, shape = _shape(arg, n)
        gen = prog.gens[k] if k < len(prog.gens) else None
        out.append(gen(rng, shape) if gen is not None else rng.standard_normal(shape).astype(np.float32)
                   if dtype == "f32" else rng.integers(0, 4, shape).astype(np.int32))
    return out


def _axes(prog: Program, k: int) -> list[int]:
    """The axes of argument ``k`` sized by the batch."""
    return [i for i, d in enumerate(prog.args[k].partition("[")[2].rstrip("]").split(",")) if d.strip() == BATCH]


def _same(got: Sequence[Any], want: Sequence[Any]) -> bool:
    import numpy as np

    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False
        if w.dtype.kind == "f" and not np.allclose(g, w, equal_nan=True, **TOL):
            return False
        if w.dtype.kind != "f" and not np.array_equal(g, w):
            return False
    return True


class _Live:
    """``jax.jit`` of the live function, its outputs as a list of numpy arrays (the manifest's order)."""

    def __init__(self, prog: Program):
        import jax

        self.jitted = jax.jit(prog.fn)

    def __call__(self, arrays: Sequence[Any]) -> list[Any]:
        import jax
        import numpy as np

        return [np.asarray(v) for v in jax.tree_util.tree_leaves(self.jitted(*arrays))]


def _cut(arrays: Sequence[Any], prog: Program, lo: int, hi: int) -> list[Any]:
    out = []
    for k, a in enumerate(arrays):
        index = [slice(None)] * a.ndim
        for ax in _axes(prog, k):
            index[ax] = slice(lo, hi)
        out.append(a[tuple(index)])
    return out


def _join(prog: Program, parts: Sequence[Sequence[Any]]) -> list[Any]:
    """Several clients' inputs concatenated along each argument's batch axes (one axis each, as in the corpus)."""
    import numpy as np

    out = []
    for k in range(len(parts[0])):
        axes = _axes(prog, k)
        out.append(np.concatenate([p[k] for p in parts], axis=axes[0]) if axes else parts[0][k])
    return out


def _rows_joined(outs: Sequence[Sequence[Any]]) -> list[Any] | None:
    """Each output of several calls concatenated along axis 0 (what a split batch or a merged call answers), or
    None where they cannot be (a scalar, shapes that differ past axis 0)."""
    import numpy as np

    try:
        return [np.concatenate([o[i] for o in outs]) for i in range(len(outs[0]))]
    except ValueError:
        return None


def _pad_to(arrays: Sequence[Any], prog: Program, to: int, fill: str, rng: Any) -> list[Any]:
    import numpy as np

    fresh = _draw(prog, to, rng)
    out = []
    for k, a in enumerate(arrays):
        axes = _axes(prog, k)
        if not axes:
            out.append(a)
            continue
        if fill == "edge":
            widths = [(0, to - a.shape[ax]) if ax in axes else (0, 0) for ax in range(a.ndim)]
            out.append(np.pad(a, widths, mode="edge"))
        else:  # random rows after the real ones
            b = fresh[k].copy()
            b[tuple(slice(0, a.shape[ax]) if ax in axes else slice(None) for ax in range(a.ndim))] = a
            out.append(b)
    return out


def _slice_outputs(outs: Sequence[Any], axes: Sequence[list[int] | None], n: int) -> list[Any]:
    out = []
    for o, ax in zip(outs, axes):
        if ax:
            index = [slice(None)] * o.ndim
            for a in ax:
                index[a] = slice(0, n)
            o = o[tuple(index)]
        out.append(o)
    return out


def _output_axes(loaded: Any) -> list[list[int] | None]:
    """Per output, its axes declared exactly ``batch`` (None where an axis is an expression of it, ``2*batch``)."""
    from jaxport import dimexpr

    out: list[list[int] | None] = []
    for o in loaded.function_record.outputs:
        axes: list[int] | None = []
        for i, d in enumerate(o.shape):
            if isinstance(d, str) and d.strip() == BATCH:
                assert axes is not None
                axes.append(i)
            elif isinstance(d, str) and BATCH in dimexpr.variables(dimexpr.parse(d)):
                axes = None
                break
        out.append(axes)
    return out


@dataclass
class Trials:
    """What the trials on the live function found: for each operation, whether some trial changed the answers."""

    pad: list[str] = field(default_factory=list)  # the trials that changed the answers (empty: none did)
    split: list[str] = field(default_factory=list)
    merge: list[str] = field(default_factory=list)
    runs: int = 0
    pad_runs: int = 0


def trials(prog: Program, live: _Live, out_axes: list[list[int] | None], seed: int) -> Trials:
    """Pad, split and merge the live function's inputs and compare with one call (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = Trials()
    for n, to, fill in ((1, 4, "edge"), (3, 4, "edge"), (5, 8, "edge"), (8, 16, "edge"), (3, 8, "random"),
                        (6, 16, "random")):
        x = _draw(prog, n, rng)
        t.runs += 1
        if not _same(_slice_outputs(live(_pad_to(x, prog, to, fill, rng)), out_axes, n), live(x)):
            t.pad.append(f"{n} rows padded to {to} ({fill})")
    t.pad_runs = t.runs
    for n, cuts in ((12, (8,)), (12, (5,)), (8, (1, 4)), (16, (8,))):
        x = _draw(prog, n, rng)
        bounds = [0, *cuts, n]
        joined = _rows_joined([live(_cut(x, prog, lo, hi)) for lo, hi in zip(bounds, bounds[1:])])
        t.runs += 1
        if joined is None or not _same(joined, live(x)):
            t.split.append(f"{n} rows split at {', '.join(map(str, cuts))}")
    for sizes in ((3, 5), (1, 2, 4), (4, 4)):
        parts = [_draw(prog, s, rng) for s in sizes]
        joined = _rows_joined([live(p) for p in parts])
        t.runs += 1
        if joined is None or not _same(joined, live(_join(prog, parts))):
            t.merge.append(f"clients of {'+'.join(map(str, sizes))} rows merged")
    return t


def _engine(prog: Program, batched: Any, live: _Live, names: list[str], seed: int, row: Row) -> None:
    """The serving path on the program (see the module docstring): answers equal to the live function's, or
    refused; never an answer the verdicts do not allow."""
    import numpy as np

    import jaxport
    from jaxport.serve.batcher import Batcher
    from jaxport.serve.engine import refuse_unsplittable

    rng = np.random.default_rng(seed)
    verdict = batched.verdicts[BATCH]

    def check(label: str, arrays: list[Any], may: bool, why: str) -> None:
        """One call of ``len(rows)`` rows: answered equal to the live function where ``may``, else refused."""
        row.runs += 1
        try:
            got = batched(dict(zip(names, arrays)))
        except jaxport.InputError as e:
            if may:
                row.problems.append(f"{label}: refused though {why}: {e}")
            else:
                row.ok += 1
            return
        except Exception as e:  # noqa: BLE001 - the failure looked for
            row.problems.append(f"{label}: {type(e).__name__}: {str(e)[:200]}")
            return
        if not may:
            row.problems.append(f"{label}: answered though {why}")
        elif not _same([got[k] for k in batched.output_names], live(arrays)):
            row.problems.append(f"{label}: answered wrong")
        else:
            row.ok += 1
            row.finished += 1

    pad = batched.padding(BATCH)
    check("3 rows (bucket 4)", _draw(prog, 3, rng), pad, "padding is allowed" if pad else "padding is refused")
    check("4 rows (bucket 4, exact)", _draw(prog, 4, rng), True, "it is a bucket's size")
    check("12 rows (over bucket 8)", _draw(prog, 12, rng), batched.splits,
          "splitting is allowed" if batched.splits else "splitting is refused")
    # two requests in one run: merged where splitting is allowed, else each alone; either way each its own answer
    sizes = (3, 4) if pad else (4, 8)
    parts = [_draw(prog, s, rng) for s in sizes]
    row.runs += 1
    try:
        got = batched.run([batched.admit(dict(zip(names, p))) for p in parts])
        if all(_same([g[k] for k in batched.output_names], live(p)) for g, p in zip(got, parts)):
            row.ok += 1
            row.finished += 1
        else:
            row.problems.append(f"two requests of {sizes[0]} and {sizes[1]} rows in one run: answered wrong")
    except Exception as e:  # noqa: BLE001 - the failure looked for
        row.problems.append(f"two requests in one run: {type(e).__name__}: {str(e)[:200]}")
    row.runs += 1
    batcher = Batcher(batched, window_ms=0)
    try:
        if batcher.merge != batched.splits or (batched.splits and not verdict.split):
            row.problems.append(f"the dispatcher merges: {batcher.merge}, the split verdict: {verdict.split}")
        else:
            row.ok += 1
    finally:
        batcher.close()
    row.runs += 1
    first_axis_batch = prog.args[0].partition("[")[2].split(",")[0].strip() == BATCH
    try:
        refuse_unsplittable(batched)
        refused = False
    except jaxport.UsageError:
        refused = True
    if refused == (first_axis_batch and not batched.splits):
        row.ok += 1
    else:
        row.problems.append(f"a batch engine {'refused' if refused else 'took'} it (split: {batched.splits})")


def _label(allowed: bool, faulted: bool) -> str:
    return "yes" if allowed else "no" if faulted else "no*"


def position_dependence(scratch: Path, sample: int | None = None, seed: int = 0,
                        names: Sequence[str] | None = None) -> list[Row]:
    """One row per program (``NAME: pad P, split S``, ``no*``: refused though no trial changed the answers), then
    the counts of the verdicts. ``names``: only these programs; ``sample``: a seeded sample of them."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jaxport
    from jaxport.serve.batching import Batched

    chosen = [p for p in programs() if names is None or p.name in names]
    if sample is not None and sample < len(chosen):
        chosen = random.Random(seed).sample(chosen, sample)
    scratch.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    counts = {"pad": [0, 0, 0], "split": [0, 0, 0]}  # allowed, refused and faulted, refused conservatively
    for k, prog in enumerate(chosen):
        row = Row("position-dependence", prog.name)
        rows.append(row)
        try:
            loaded = jaxport.export(prog.fn, {"jaxport": 1, "dims": DIMS, "args": list(prog.args)}).load()
            batched = Batched(loaded, {BATCH: BUCKETS}, cache_dir=scratch / "verdicts", strict=True)
        except Exception as e:  # noqa: BLE001 - the corpus's program must export and load
            row.runs += 1
            row.problems.append(f"export or Batched: {type(e).__name__}: {str(e)[:300]}")
            continue
        verdict = batched.verdicts[BATCH]
        live = _Live(prog)
        t = trials(prog, live, _output_axes(loaded), seed + k)
        row.runs += t.runs
        cross = t.split + t.merge
        for allowed, faulted, what in ((verdict.allowed, t.pad, "padding"), (verdict.split, cross, "splitting")):
            if allowed and faulted:
                row.problems.append(f"{what} allowed, but {faulted[0]} changed the answers")
        row.ok += t.runs - (len(t.pad) if verdict.allowed else 0) - (len(cross) if verdict.split else 0)
        # the trials of what the verdicts allow, that gave the answers of one call
        row.finished += (t.pad_runs - len(t.pad) if verdict.allowed else 0) + \
            (t.runs - t.pad_runs - len(cross) if verdict.split else 0)
        for key, allowed, faulted in (("pad", verdict.allowed, t.pad), ("split", verdict.split, cross)):
            counts[key][0 if allowed else 1 if faulted else 2] += 1
        row.name = f"{prog.name}: pad {_label(verdict.allowed, bool(t.pad))}, split " \
                   f"{_label(verdict.split, bool(cross))}"
        _engine(prog, batched, live, loaded.input_names, seed + 1000 + k, row)
    n = len(chosen)
    for key, what in (("pad", "padding"), ("split", "split/merge")):
        a, r, c = counts[key]
        rows.append(Row("position-dependence", f"{what}: {a} allowed, {r + c} refused ({c} no*)", runs=0))
    kinds = {kind: sum(p.kind == kind for p in chosen) for kind in ("row-wise", "positional", "cross-row")}
    rows.append(Row("position-dependence", f"{n} programs: {kinds['row-wise']} row-wise, {kinds['positional']} pos., "
                                           f"{kinds['cross-row']} cross-row", runs=0))
    return rows


# --- batch-rows -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RowSet:
    """A hostile batch for one adapter's stacking: ``via`` ``ray`` (``batch_columns``), ``beam``
    (``example_columns``), ``spark`` (``stack_column`` of a flat Spark column, rows counted from ``FIRST_ROW``) or
    ``fields`` (Spark's output struct fields). ``expect``: ``stack`` or ``refuse``; a refusal must name
    ``column`` and ``row`` (None: a refusal of the whole column, which names no row), and ``mention`` too."""

    name: str
    via: str
    inputs: tuple[Any, ...]
    data: Callable[[], Any]
    expect: str
    column: str = ""
    row: int | None = None
    mention: tuple[str, ...] = ()
    needs: str = ""  # "pandas", "pyspark": skipped without it
    renamed: dict[str, str] | None = None


#: Spark's rows are named by their index in the partition: this batch starts at row 100 of partition 0.
FIRST_ROW = 100


def _inp(name: str, dtype: str, *rest: int | str) -> Any:
    from jaxport.artifact.model import Input

    return Input(name, ("batch", *rest), dtype)


def _obj(*cells: Any) -> Any:
    """A numpy object array holding exactly these cells (numpy would stack equal arrays otherwise)."""
    import numpy as np

    a = np.empty(len(cells), object)
    for i, c in enumerate(cells):
        a[i] = c
    return a


class _ArrayLike:
    def __init__(self, value: Any, fail: bool = False):
        self.value, self.fail = value, fail

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        if self.fail:
            raise RuntimeError("this array-like cannot give its values")
        return np.asarray(self.value, dtype)


def row_sets() -> list[RowSet]:
    """The corpus of ``batch-rows`` (see the module docstring)."""
    import numpy as np

    def pd() -> Any:
        import pandas

        return pandas

    x, s, i = _inp("x", "float32", 3), _inp("s", "float32"), _inp("i", "int32")
    u, b, v = _inp("u", "uint8"), _inp("b", "bool"), _inp("v", "float32", "k")
    img, c64, q = _inp("img", "float32", 2, 2), _inp("c", "complex64"), _inp("q", "uint64")
    huge = np.ones(1_000_000)
    nan = float("nan")
    sets = [
        # Ray: columns (batch_columns), rows "row N of the batch"
        RowSet("ragged list", "ray", (x,), lambda: {"x": [[1, 2, 3], [1, 2], [4, 5, 6]]}, "refuse", "x", 1),
        RowSet("ragged cell", "ray", (img,), lambda: {"img": [[[1, 2], [3, 4]], [[1, 2], [3]]]}, "refuse", "img", 1),
        RowSet("None cell", "ray", (x,), lambda: {"x": [[1, 2, 3], None]}, "refuse", "x", 1),
        RowSet("None scalar", "ray", (s,), lambda: {"s": [1.0, None, 2.0]}, "refuse", "s", 1),
        RowSet("None inside a row", "ray", (x,), lambda: {"x": [[1, 2, 3], [1, None, 3]]}, "refuse", "x", 1),
        RowSet("object column of None", "ray", (s,), lambda: {"s": np.array([None, None], object)}, "refuse", "s",
               0),
        RowSet("str in numeric column", "ray", (s,), lambda: {"s": [1.0, "2.0"]}, "refuse", "s", 1),
        RowSet("bytes in numeric column", "ray", (s,), lambda: {"s": [1.0, 2.0, b"3"]}, "refuse", "s", 2),
        RowSet("str inside a row", "ray", (x,), lambda: {"x": [[1, 2, 3], [1, "2", 3]]}, "refuse", "x", 1),
        RowSet("numpy str column", "ray", (s,), lambda: {"s": np.array(["1", "2"])}, "refuse", "s", 0),
        RowSet("numpy bytes column", "ray", (i,), lambda: {"i": np.array([b"1"])}, "refuse", "i", 0),
        RowSet("datetime column", "ray", (i,), lambda: {"i": np.array(["2020-01-01"], "datetime64[D]")}, "refuse",
               "i", 0),
        RowSet("timedelta column", "ray", (i,), lambda: {"i": np.array([1, 2], "timedelta64[s]")}, "refuse", "i", 0),
        RowSet("structured column", "ray", (s,), lambda: {"s": np.zeros(3, [("a", "f4"), ("b", "f4")])}, "refuse",
               "s", 0),
        RowSet("structured cell", "ray", (x,), lambda: {"x": _obj(np.ones(3), np.zeros(3, [("a", "f4")]))},
               "refuse", "x", 1),
        RowSet("too deep", "ray", (x,), lambda: {"x": [[1, 2, 3], [[1, 2, 3]]]}, "refuse", "x", 1),
        RowSet("too shallow", "ray", (img,), lambda: {"img": [[[1, 2], [3, 4]], [1, 2, 3, 4]]}, "refuse", "img", 1),
        RowSet("dict cell", "ray", (x,), lambda: {"x": [[1, 2, 3], {"a": 1}]}, "refuse", "x", 1),
        RowSet("set cell", "ray", (s,), lambda: {"s": [1.0, {2.0}]}, "refuse", "s", 1),
        RowSet("generator cell", "ray", (x,), lambda: {"x": [[1, 2, 3], (k for k in range(3))]}, "refuse", "x", 1),
        RowSet("0-d among scalars", "ray", (s,), lambda: {"s": [np.float32(1), np.array(2.0), 3.0]}, "stack"),
        RowSet("1-d among scalars", "ray", (s,), lambda: {"s": [1.0, np.array([2.0]), 3.0]}, "refuse", "s", 1),
        RowSet("0-d among rows", "ray", (v,), lambda: {"v": [np.ones(3), np.ones(3), np.array(1.0)]}, "refuse", "v",
               2),
        RowSet("2**40 into int32 (numpy)", "ray", (i,), lambda: {"i": np.array([1, 2**40])}, "refuse", "i", 1),
        RowSet("2**40 into int32 (list)", "ray", (i,), lambda: {"i": [1, 2, 2**40]}, "refuse", "i", 2),
        RowSet("2**70 into int32", "ray", (i,), lambda: {"i": [1, 2**70]}, "refuse", "i", 1),
        RowSet("2**64-1 into int32", "ray", (i,), lambda: {"i": [2**64 - 1]}, "refuse", "i", 0),
        RowSet("-1 into uint8", "ray", (u,), lambda: {"u": np.array([3, -1])}, "refuse", "u", 1),
        RowSet("uint32 max into int32", "ray", (i,), lambda: {"i": np.array([7, 2**32 - 1], np.uint32)}, "refuse",
               "i", 1),
        RowSet("int8 -1 into uint64", "ray", (q,), lambda: {"q": np.array([5, -1], np.int8)}, "refuse", "q", 1),
        RowSet("-1 into uint64 (list)", "ray", (q,), lambda: {"q": [2**64 - 1, -1]}, "refuse", "q", 1),
        RowSet("2**64-1 into uint64", "ray", (q,), lambda: {"q": [2**64 - 1, 0]}, "stack"),
        RowSet("256 into uint8", "ray", (u,), lambda: {"u": [255, 256]}, "refuse", "u", 1),
        RowSet("-1 inside a uint8 row", "ray", (_inp("w", "uint8", 2),), lambda: {"w": [[1, 2], [3, -1]]}, "refuse",
               "w", 1),
        RowSet("1.5 into int32", "ray", (i,), lambda: {"i": [1.0, 1.5]}, "refuse", "i", 1),
        RowSet("whole floats into int32", "ray", (i,), lambda: {"i": np.array([1.0, -2.0, 3.0])}, "stack"),
        RowSet("0.1 into float32", "ray", (s,), lambda: {"s": [0.5, 0.1]}, "refuse", "s", 1),
        RowSet("1e300 into float32", "ray", (x,), lambda: {"x": [[1, 2, 3], [1, 2, 1e300]]}, "refuse", "x", 1),
        RowSet("inf and nan into float32", "ray", (s,), lambda: {"s": [np.inf, nan, -np.inf]}, "stack"),
        RowSet("bools into int32", "ray", (i,), lambda: {"i": [True, False, True]}, "stack"),
        RowSet("bools into float32 rows", "ray", (x,), lambda: {"x": [[True, False, True], [1.0, 2.0, 3.0]]},
               "stack"),
        RowSet("0/1 floats into bool", "ray", (b,), lambda: {"b": [0.0, 1.0]}, "stack"),
        RowSet("0.5 into bool", "ray", (b,), lambda: {"b": [1.0, 0.5]}, "refuse", "b", 1),
        RowSet("2 into bool", "ray", (b,), lambda: {"b": np.array([1, 2])}, "refuse", "b", 1),
        RowSet("complex into float32", "ray", (s,), lambda: {"s": [1.0, 1 + 2j]}, "refuse", "s", 1),
        RowSet("real complex into float32", "ray", (s,), lambda: {"s": np.array([1 + 0j, 2 + 0j])}, "stack"),
        RowSet("complex inside a row", "ray", (x,), lambda: {"x": [[1, 2, 3], [1, 2, 3j]]}, "refuse", "x", 1),
        RowSet("complex128 into complex64", "ray", (c64,), lambda: {"c": [1 + 0.1j]}, "refuse", "c", 0),
        RowSet("float16 into float32", "ray", (s,), lambda: {"s": np.array([0.1, 2.5], np.float16)}, "stack"),
        RowSet("huge row", "ray", (x,), lambda: {"x": [[1, 2, 3], huge]}, "refuse", "x", 1),
        RowSet("many rows", "ray", (x,), lambda: {"x": np.arange(300_000.0, dtype=np.float32).reshape(-1, 3)},
               "stack"),
        RowSet("empty batch (array)", "ray", (x,), lambda: {"x": np.zeros((0, 3))}, "stack"),
        RowSet("empty batch (list)", "ray", (x, i), lambda: {"x": [], "i": []}, "stack"),
        RowSet("mixed-dtype arrays", "ray", (x,),
               lambda: {"x": _obj(np.ones(3, np.float32), np.arange(3), np.full(3, 0.5), np.ones(3, bool))}, "stack"),
        RowSet("a float64 row that float32 changes", "ray", (x,),
               lambda: {"x": _obj(np.ones(3, np.float32), np.arange(3), np.full(3, 0.1))}, "refuse", "x", 2),
        RowSet("a str array among arrays", "ray", (x,), lambda: {"x": _obj(np.ones(3), np.array(["a", "b", "c"]))},
               "refuse", "x", 1),
        RowSet("an object array of objects", "ray", (x,), lambda: {"x": _obj(np.ones(3), _obj(1, object(), 3))},
               "refuse", "x", 1),
        RowSet("array-likes", "ray", (x,), lambda: {"x": [_ArrayLike([1, 2, 3]), _ArrayLike([4.0, 5.0, 6.0])]},
               "stack"),
        RowSet("an array-like that raises", "ray", (x,),
               lambda: {"x": [_ArrayLike([1, 2, 3]), _ArrayLike([1, 2, 3], fail=True)]}, "refuse", "x", 1),
        RowSet("tuples", "ray", (x,), lambda: {"x": [(1, 2, 3), (4.0, 5.0, 6.0)]}, "stack"),
        RowSet("2-d column for scalar rows", "ray", (s,), lambda: {"s": np.ones((3, 1), np.float32)}, "refuse",
               "s", 0),
        RowSet("1-d column for rows of 3", "ray", (x,), lambda: {"x": np.ones(3, np.float32)}, "refuse", "x", 0),
        RowSet("3-d column for rows of 3", "ray", (v,), lambda: {"v": np.ones((2, 3, 1), np.float32)}, "refuse",
               "v", 0),
        RowSet("a scalar, not a column", "ray", (s,), lambda: {"s": np.float32(1.0)}, "refuse", "s"),
        RowSet("a 0-d array, not a column", "ray", (s,), lambda: {"s": np.array(1.0)}, "refuse", "s"),
        RowSet("a dict, not a column", "ray", (s,), lambda: {"s": {"a": 1.0}}, "refuse", "s"),
        RowSet("missing column", "ray", (x, s), lambda: {"x": np.ones((2, 3))}, "refuse", "s"),
        RowSet("a column named by case only", "ray", (x,), lambda: {"X": np.ones((2, 3))}, "refuse", "x"),
        RowSet("columns alike after normalization", "ray", (x,),
               lambda: {" x": np.zeros((2, 3)), "X": np.full((2, 3), 2.0), "x": np.ones((2, 3), np.float32)},
               "stack"),
        RowSet("a renamed column's bad row", "ray", (x, i), lambda: {"x": np.ones((2, 3)), "ids": [1, None]},
               "refuse", "ids", 1, renamed={"i": "ids"}),
        # pandas (Ray's pandas batches): NaN of float and object columns, extension NA
        RowSet("NaN in a float column (values)", "ray", (s,), lambda: {"s": pd().Series([1.0, nan, 2.0])}, "stack",
               needs="pandas"),
        RowSet("NaN in an object column of floats (values)", "ray", (s,),
               lambda: {"s": pd().Series([1.0, nan], dtype=object)}, "stack", needs="pandas"),
        RowSet("NaN in an int column", "ray", (i,), lambda: {"i": pd().Series([1, None, 3])}, "refuse", "i", 1,
               needs="pandas"),
        RowSet("NaN in an object column of arrays", "ray", (x,),
               lambda: {"x": pd().Series([np.ones(3), nan, np.ones(3)], dtype=object)}, "refuse", "x", 1,
               needs="pandas"),
        RowSet("NaN in an object column of floats", "ray", (i,),
               lambda: {"i": pd().Series([1.0, nan], dtype=object)}, "refuse", "i", 1, needs="pandas"),
        RowSet("pd.NA in an object column", "ray", (x,), lambda: {"x": pd().Series([np.ones(3), pd().NA])},
               "refuse", "x", 1, needs="pandas"),
        RowSet("pd.NaT in an object column", "ray", (s,), lambda: {"s": pd().Series([1.0, pd().NaT], dtype=object)},
               "refuse", "s", 1, needs="pandas"),
        RowSet("Int64 with NA", "ray", (i,), lambda: {"i": pd().Series([1, pd().NA, 3], dtype="Int64")}, "refuse",
               "i", 1, needs="pandas"),
        RowSet("Float64 with NA", "ray", (s,), lambda: {"s": pd().Series([1.5, 2.5, None], dtype="Float64")},
               "refuse", "s", 2, needs="pandas"),
        RowSet("boolean with NA", "ray", (b,), lambda: {"b": pd().Series([True, None], dtype="boolean")}, "refuse",
               "b", 1, needs="pandas"),
        RowSet("Int64 without NA", "ray", (i,), lambda: {"i": pd().Series([1, -2, 3], dtype="Int64")}, "stack",
               needs="pandas"),
        RowSet("Int64 overflowing int32", "ray", (i,), lambda: {"i": pd().Series([1, 2**40], dtype="Int64")},
               "refuse", "i", 1, needs="pandas"),
        RowSet("UInt8 into int32", "ray", (i,), lambda: {"i": pd().Series([1, 255], dtype="UInt8")}, "stack",
               needs="pandas"),
        RowSet("string dtype column", "ray", (s,), lambda: {"s": pd().Series(["1.5", "2"], dtype="string")},
               "refuse", "s", 0, needs="pandas"),
        RowSet("categorical column", "ray", (s,), lambda: {"s": pd().Series([1.0, 2.0], dtype="category")},
               "stack", needs="pandas"),
        RowSet("a DataFrame batch", "ray", (x, i),
               lambda: pd().DataFrame({"x": [np.ones(3), np.zeros(3)], "i": [1, 2]}), "stack", needs="pandas"),
        RowSet("a DataFrame with a None", "ray", (x, i),
               lambda: pd().DataFrame({"x": [np.ones(3), None], "i": [1, 2]}), "refuse", "x", 1, needs="pandas"),
        # Beam: examples (example_columns), rows "example N of the batch"
        RowSet("dict missing a key", "beam", (x, i), lambda: [{"x": [1, 2, 3], "i": 1}, {"x": [1, 2, 3], "i": 2},
                                                             {"x": [1, 2, 3]}], "refuse", "i", 2),
        RowSet("dict with an extra key", "beam", (x, i), lambda: [{"x": [1, 2, 3], "i": 1},
                                                                 {"x": [1, 2, 3], "i": 1, "label": 0}],
               "refuse", "label", 1),
        RowSet("dict with a key named by case", "beam", (x, i), lambda: [{"x": [1, 2, 3], "I": 1}], "refuse", "i", 0),
        RowSet("an array among dicts", "beam", (x, i), lambda: [{"x": [1, 2, 3], "i": 1}, np.ones(3)], "refuse",
               "", 1),
        RowSet("arrays for two inputs", "beam", (x, i), lambda: [np.ones(3), np.ones(3)], "refuse",
               mention=("x, i",)),
        RowSet("None example", "beam", (x,), lambda: [np.ones(3), None], "refuse", "x", 1),
        RowSet("ragged examples", "beam", (x,), lambda: [np.ones(3), np.ones(3), np.ones(4)], "refuse", "x", 2),
        RowSet("NaN example of an int input", "beam", (x, i), lambda: [{"x": np.ones(3), "i": 1},
                                                                      {"x": np.ones(3), "i": nan}], "refuse", "i", 1),
        RowSet("a str example", "beam", (s,), lambda: [1.0, "2"], "refuse", "s", 1),
        RowSet("good dict examples", "beam", (x, i), lambda: [{"i": np.int64(7), "x": (1, 2, 3)},
                                                             {"x": np.arange(3.0), "i": 8}], "stack"),
        RowSet("dicts of mixed dtypes", "beam", (x,), lambda: [{"x": np.ones(3, np.int8)}, {"x": [0.5, 1, 2]}],
               "stack"),
        # Spark: a flat array column per input (stack_column, Column(flat=True)), rows counted in the partition
        RowSet("flat rows", "spark", (img,), lambda: [np.arange(4.0), np.arange(4.0) + 4], "stack"),
        RowSet("flat rows, pandas", "spark", (img,), lambda: pd().Series([np.arange(4.0), np.arange(4.0) + 4]),
               "stack", needs="pandas"),
        RowSet("flat rows of the wrong length", "spark", (img,), lambda: [np.arange(4.0), np.arange(3.0)],
               "refuse", "img", FIRST_ROW + 1),
        RowSet("a null array row", "spark", (img,), lambda: pd().Series([np.arange(4.0), None]), "refuse", "img",
               FIRST_ROW + 1, needs="pandas"),
        RowSet("doubles holding float32 values", "spark", (s,), lambda: pd().Series([0.5, 0.25, -2.0]), "stack",
               needs="pandas"),
        RowSet("doubles float32 changes", "spark", (s,), lambda: pd().Series([0.5, 0.1]), "refuse", "s",
               FIRST_ROW + 1, needs="pandas"),
        RowSet("an int column with a null", "spark", (i,), lambda: pd().Series([1.0, nan, 3.0]), "refuse", "i",
               FIRST_ROW + 1, needs="pandas"),
        RowSet("a 2-d numeric flat column", "spark", (img,), lambda: np.arange(8.0).reshape(2, 4), "stack"),
        RowSet("a flat numeric column", "spark", (x,), lambda: np.arange(3.0), "refuse", "x", FIRST_ROW),
    ]
    sets += [RowSet(f"fields: {label}", "fields", tuple(names), lambda g=given: g, expect, mention=mention,
                    needs="pyspark")
             for label, names, given, expect, mention in _FIELDS]
    return sets


#: Spark's struct fields of several outputs (``jaxport.spark._fields``): (label, output names, fields=, expect,
#: what a refusal names).
_FIELDS: list[tuple[str, list[str], dict[str, str] | None, str, tuple[str, ...]]] = [
    ("a/b and a_b", ["a/b", "a_b"], None, "refuse", ("'a/b'", "'a_b'")),
    ("a.b and a_b", ["a.b", "a_b"], None, "refuse", ("'a.b'", "'a_b'")),
    ("case only", ["Out", "out"], None, "refuse", ("'Out'", "'out'")),
    ("renamed onto another", ["p", "q"], {"p": "Q"}, "refuse", ("'p'", "'q'")),
    ("a/b.c and a.b/c", ["a/b.c", "a.b/c"], None, "refuse", ("'a/b.c'", "'a.b/c'")),
    ("an empty field", ["p", "q"], {"p": " "}, "refuse", ("'p'",)),
    ("a field for no output", ["p", "q"], {"r": "x"}, "refuse", ("'r'",)),
    ("swapped names", ["p", "q"], {"p": "q", "q": "p"}, "stack", ()),
    ("a/b renamed apart", ["a/b", "a_b"], {"a/b": "ab"}, "stack", ()),
    ("distinct", ["x/y", "x.z", "w"], None, "stack", ()),
]


def _leaves(value: Any) -> list[Any]:
    """The numbers a user gave, flat, in C order (numpy arrays, scalars, lists, array-likes)."""
    import numpy as np

    if isinstance(value, _ArrayLike):
        value = value.value
    if isinstance(value, (np.ndarray, np.generic)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _equal(a: Any, b: Any) -> bool:
    if a != a and b != b:  # NaN given, NaN stacked
        return True
    return bool(a == b) and type(a) is not str and type(b) is not str


def _given_rows(values: Any) -> list[Any]:
    import numpy as np

    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        values = values.astype(object).tolist() if hasattr(values, "astype") else values.to_numpy().tolist()
    if isinstance(values, np.ndarray):
        return [values[k] for k in range(len(values))]
    return list(values)


def _stacked_problem(got: Any, given: Any, inp: Any) -> str:
    """Why a stacked array is not exactly the rows given (the input's shape and dtype, every value), or ""."""
    import numpy as np

    from jaxport import dtypes

    rows = _given_rows(given)
    fixed = tuple(int(d) for d in inp.shape[1:] if isinstance(d, int))
    if not isinstance(got, np.ndarray):
        return f"stacked as a {type(got).__name__}"
    if str(got.dtype) != inp.dtype and inp.dtype in dtypes.BY_NAME:
        return f"stacked as {got.dtype}, not the input's {inp.dtype}"
    if len(fixed) == len(inp.shape) - 1 and got.shape != (len(rows), *fixed):
        return f"stacked with shape {got.shape}, not ({len(rows)}, {', '.join(map(str, fixed))})"
    for k, r in enumerate(rows):
        want, have = _leaves(r), _leaves(got[k])
        if len(want) != len(have) or not all(_equal(w, h) for w, h in zip(want, have)):
            return f"row {k}: stacked {have[:6]}, given {want[:6]} (a value changed)"
    return ""


def _run_set(rs: RowSet) -> str:
    """The failure of one row set, or ""."""
    from jaxport.errors import InputError, UsageError
    from jaxport.serve.rows import Column, batch_columns, example_columns, stack_column

    data = rs.data()
    try:
        if rs.via == "ray":
            got = batch_columns(data, rs.inputs, rs.renamed)
            given = {i.name: data[(rs.renamed or {}).get(i.name, i.name)] for i in rs.inputs}
        elif rs.via == "beam":
            got = example_columns(data, rs.inputs)
            given = {i.name: [e[i.name] if isinstance(e, dict) else e for e in data] for i in rs.inputs}
        elif rs.via == "spark":
            (inp,) = rs.inputs
            col = Column(f"input {inp.name!r} (the UDF's column 0)", inp.dtype, list(inp.shape[1:]), flat=True)
            got = {inp.name: stack_column(data, col.named("row {} of partition 0"), first_row=FIRST_ROW)}
            given = {inp.name: data}
        else:
            from jaxport.artifact.model import Output
            from jaxport.spark import _fields

            outputs = tuple(Output(n, ("b",), "float32") for n in rs.inputs)
            fields = _fields(outputs, data)
            if rs.expect == "refuse":
                return f"accepted: {fields}"
            want = {n: (data or {}).get(n, n.replace("/", "_").replace(".", "_")) for n in rs.inputs}
            if fields != want or len({f.lower() for f in fields.values()}) != len(fields):
                return f"fields {fields}, not {want}"
            return ""
    except (InputError, UsageError) as e:
        message = str(e)
        if rs.via != "fields" and type(e) is not InputError:
            return f"{type(e).__name__} (not InputError): {message[:300]}"
        if rs.expect != "refuse":
            return f"refused a batch that stacks exactly: {message[:300]}"
        need = [*rs.mention]
        if rs.column:
            need.append(repr(rs.column))
        if rs.row is not None:
            need.append({"ray": f"row {rs.row} of the batch", "beam": f"example {rs.row} of the batch",
                         "spark": f"row {rs.row} of partition 0"}[rs.via])
        missing = [n for n in need if n not in message]
        if missing:
            return f"the message does not name {', '.join(missing)}: {message[:300]}"
        if "\n" in message or len(message) > 600:
            return f"the message is not one short line ({len(message)} characters)"
        return ""
    except Exception as e:  # noqa: BLE001 - the failure looked for
        return f"{type(e).__name__}: {str(e)[:300]}"
    if rs.expect == "refuse":
        return f"stacked a batch it must refuse ({rs.column!r} row {rs.row})"
    for inp in rs.inputs:
        problem = _stacked_problem(got.get(inp.name), given[inp.name], inp)
        if problem:
            return f"input {inp.name!r}: {problem}"
    return ""


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def batch_rows(sample: int | None = None, seed: int = 0) -> list[Row]:
    """One row per adapter (Ray columns, pandas columns, Beam examples, Spark columns, Spark fields): runs, clean
    (stacked exactly or refused naming the column and row), stacked; the sets skipped for a missing package are a
    row of their own with 0 runs."""
    sets = row_sets()
    if sample is not None and sample < len(sets):
        sets = random.Random(seed).sample(sets, sample)
    rows: dict[str, Row] = {}
    skipped: dict[str, int] = {}
    for rs in sets:
        if rs.needs and not _have(rs.needs):
            skipped[rs.needs] = skipped.get(rs.needs, 0) + 1
            continue
        group = {"ray": "Ray columns (batch_columns)", "beam": "Beam examples (example_columns)",
                 "spark": "Spark columns (stack_column, flat)", "fields": "Spark output fields (_fields)"}[rs.via]
        if rs.needs == "pandas" and rs.via == "ray":
            group = "pandas columns (batch_columns)"
        row = rows.setdefault(group, Row("batch-rows", group))
        row.runs += 1
        problem = _run_set(rs)
        if problem:
            row.problems.append(f"{rs.name}: {problem}")
        else:
            row.ok += 1
            row.finished += rs.expect == "stack"
    out = list(rows.values())
    for needs, n in skipped.items():
        out.append(Row("batch-rows", f"{n} sets skipped: {needs} is not installed", runs=0))
    return out


def counts() -> dict[str, int]:
    """Case counts, for the coverage test: programs by kind, row sets by adapter."""
    progs, sets = programs(), row_sets()
    out = {f"programs/{k}": sum(p.kind == k for p in progs) for k in ("row-wise", "positional", "cross-row")}
    out.update({f"row-sets/{v}": sum(r.via == v for r in sets) for v in ("ray", "beam", "spark", "fields")})
    out["row-sets/pandas"] = sum(r.needs == "pandas" for r in sets)
    out["programs"], out["row-sets"] = len(progs), len(sets)
    return out


def run(scratch: Path, classes: Sequence[str] | None, seed: int = 0) -> list[Row]:
    wanted = [c for c in CLASSES if not classes or c in classes]
    rows: list[Row] = []
    if "position-dependence" in wanted:
        rows += position_dependence(scratch / "positions", seed=seed)
    if "batch-rows" in wanted:
        rows += batch_rows(seed=seed)
    return rows

