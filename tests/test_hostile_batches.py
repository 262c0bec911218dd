"""Issue 36's batching classes (``tests/hostile/batch_classes.py``): the padding, splitting and merging verdicts of
batch-polymorphic programs checked against ``jax.jit`` of the live function and through the serving path, and
hostile row sets given to the batch adapters' stacking. The whole classes run with ``python -m tests.hostile.run
--class position-dependence --class batch-rows`` (RELIABILITY.md); here a sample of the programs and every row set,
and the regressions they found, with their exact messages."""

from __future__ import annotations

import re

import numpy as np
import pytest

import jaxport
from jaxport.artifact.model import Input
from jaxport.errors import InputError
from jaxport.run.buckets.padding import padding_verdicts, specializer
from jaxport.serve.rows import Column, batch_columns, column_of, stack_column
from tests.hostile import batch_classes

#: A sample of the programs: each kind, and those the first run of the class found refused for a coincidence.
SAMPLE = ("elementwise", "mlp", "gather-per-row", "sort-rows", "fori-layers", "scan-layers", "conv-features",
          "dict-outputs", "arange-rows", "hidden-iota-reshape", "random-noise", "cumsum-batch", "while-counter",
          "gram", "batch-mean", "sort-batch", "transpose-output", "batch-on-axis-1", "conv-over-batch", "tile-batch")


def test_the_batching_classes_cover_the_issue():
    counts = batch_classes.counts()
    assert counts["programs"] >= 70 and counts["programs/row-wise"] >= 25
    assert counts["programs/positional"] + counts["programs/cross-row"] >= 40
    assert counts["programs/positional"] >= 15 and counts["programs/cross-row"] >= 25
    assert counts["row-sets"] >= 110 and counts["row-sets/ray"] >= 80 and counts["row-sets/pandas"] >= 15
    assert counts["row-sets/beam"] >= 10 and counts["row-sets/spark"] >= 8 and counts["row-sets/fields"] >= 10
    names = [p.name for p in batch_classes.programs()]
    assert len(set(names)) == len(names) and set(SAMPLE) <= set(names)
    assert len({r.name for r in batch_classes.row_sets()}) == counts["row-sets"]


def _failures(rows) -> str:
    return "\n".join(f"{r.name}: {p}" for r in rows for p in r.problems)


@pytest.mark.slow
def test_a_sample_of_the_programs_gets_verdicts_the_live_function_bears_out(tmp_path):
    rows = batch_classes.position_dependence(tmp_path, names=SAMPLE)
    assert _failures(rows) == ""
    shown = {r.name.split(":")[0]: r.name for r in rows[:len(SAMPLE)]}
    assert len(shown) == len(SAMPLE)
    for name, verdict in (("mlp", "pad yes, split yes"), ("fori-layers", "pad yes, split yes"),
                          ("scan-layers", "pad yes, split yes"), ("arange-rows", "pad yes, split no"),
                          ("random-noise", "pad yes, split no"), ("gram", "pad yes, split no"),
                          ("transpose-output", "pad yes, split no"), ("batch-mean", "pad no, split no"),
                          ("sort-batch", "pad no, split no"), ("cumsum-batch", "pad no*, split no"),
                          ("gather-per-row", "pad no*, split no*")):
        assert shown[name] == f"{name}: {verdict}"
    assert sum(r.runs for r in rows) == 19 * len(SAMPLE)


@pytest.mark.slow
def test_every_row_set_is_stacked_exactly_or_refused_naming_its_column_and_row():
    rows = batch_classes.batch_rows()
    assert _failures(rows) == ""
    ran = sum(r.runs for r in rows)
    skipped = sum(int(r.name.split()[0]) for r in rows if r.name.endswith("is not installed"))
    assert ran + skipped == batch_classes.counts()["row-sets"] and ran >= 80


def test_a_probe_size_that_meets_a_constant_of_the_program_does_not_refuse_padding():
    """With ``batch <= 16`` the probe size 13 leaves a dead constant 3 (16 - 13), which MLIR shared with the loop's
    bound 3: the two specializations differed by one operation and padding was refused (``rowwise``, before the
    dead constants were dropped)."""
    import jax
    import jax.numpy as jnp

    w = jnp.eye(8) * 0.5
    loaded = jaxport.export(lambda x: jax.lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ w), x),
                            {"jaxport": 1, "dims": {"batch": {"min": 1, "max": 16}}, "args": ["f32[batch, 8]"]}).load()
    f = loaded.function_record
    (verdict,) = padding_verdicts(f, len(f.weights), specializer(loaded.backend, f),
                                  loaded.backend.exported.mlir_module()).values()
    assert (verdict.allowed, verdict.reason, verdict.split) == (True, "", True)


def _refused(call, message: str) -> None:
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        call()


def test_integers_that_wrap_back_to_themselves_are_refused():
    """2**64 - 1 (uint64) is -1 as int32, and 2**64 - 1 again converted back: the round trip alone kept it."""
    ids = column_of(Input("i", ("batch",), "int32"))
    _refused(lambda: stack_column([2**64 - 1], ids),
             "column 'i', row 0: 18446744073709551615 (uint64) is not an int32 value (it would become -1); give the "
             "column as int32, or convert it yourself if that change is what you mean.")
    _refused(lambda: stack_column(np.array([7, 2**32 - 1], np.uint32), ids),
             "column 'i', row 1: 4294967295 (uint32) is not an int32 value (it would become -1); give the column as "
             "int32, or convert it yourself if that change is what you mean.")
    _refused(lambda: stack_column(np.array([5, -1], np.int8), column_of(Input("q", ("batch",), "uint64"))),
             "column 'q', row 1: -1 (int8) is not a uint64 value (it would become 18446744073709551615); give the "
             "column as uint64, or convert it yourself if that change is what you mean.")
    assert stack_column([2**64 - 1, 0], column_of(Input("q", ("batch",), "uint64"))).tolist() == [2**64 - 1, 0]


def test_a_numeric_column_of_the_wrong_row_shape_is_refused_naming_it():
    _refused(lambda: batch_columns({"s": np.ones((3, 1), np.float32)}, [Input("s", ("batch",), "float32")]),
             "column 's', row 0 of the batch: an array of shape (1,) where the input's rows are single values; every "
             "row of an input has one shape.")
    _refused(lambda: batch_columns({"x": np.ones(3, np.float32)}, [Input("x", ("batch", 3), "float32")]),
             "column 'x', row 0 of the batch: a single value 1.0 where the input's rows have shape (3,); every row of "
             "an input has one shape.")
    _refused(lambda: stack_column(np.ones((2, 3, 1)), column_of(Input("v", ("batch", "k"), "float32"))),
             "column 'v', row 0: an array of shape (3, 1) where the input's rows have 1 axis; every row of an input "
             "has one shape.")
    # Spark's flat rows as a 2-d array, and an empty column, take the input's shape
    flat = Column("input 'img' (the UDF's column 0)", "float32", [2, 2], flat=True)
    assert stack_column(np.arange(8.0).reshape(2, 4), flat).tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert stack_column(np.zeros(0), column_of(Input("x", ("batch", 3), "float32"))).shape == (0, 3)


def test_messages_say_a_and_an_as_spoken():
    x = column_of(Input("x", ("batch", 3), "float32"))
    _refused(lambda: stack_column([np.ones(3), np.array(["a", "b", "c"])], x),
             "column 'x', row 1: an array of strings (array(['a', 'b', 'c'], dtype='<U1')); a row holds a number or "
             "an array of numbers.")
    _refused(lambda: stack_column([1, 2**70], column_of(Input("i", ("batch",), "int32"))),
             "column 'i', row 1: an array holding the integer 1180591620717411303424 (too large for any integer "
             "dtype); a row holds a number or an array of numbers.")
    _refused(lambda: stack_column([3, -1], column_of(Input("u", ("batch",), "uint8"))),
             "column 'u', row 1: -1 (int64) is not a uint8 value (it would become 255); give the column as uint8, or "
             "convert it yourself if that change is what you mean.")
