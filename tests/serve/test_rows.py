"""``serve.rows``: the one place the batch adapters (Ray, Beam, Spark) stack a column's rows into an input array. Every
bad row is refused with an InputError naming the column, the row and what it holds (exact texts); values convert to
the input's dtype only when every one is kept. Numpy alone: the engines' own runs are in tests/serve/test_batch_rows.py.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from jaxport.artifact.model import Input
from jaxport.errors import InputError
from jaxport.serve.rows import Column, batch_columns, column_of, example_columns, stack_column

X = Input("x", ("batch", 4), "float32")
N = Input("n", ("batch",), "int32")


def _refused(values, col, message, **kw):
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        stack_column(values, col, **kw)


def test_good_rows_stack_into_the_input_dtype():
    col = column_of(X)
    got = stack_column([[1, 2, 3, 4], (5.0, 6.0, 7.0, 8.0), np.arange(4, dtype=np.float64)], col)
    assert got.dtype == np.float32 and got.shape == (3, 4)
    np.testing.assert_array_equal(got, np.array([[1, 2, 3, 4], [5, 6, 7, 8], [0, 1, 2, 3]], np.float32))
    # an object array of arrays (pandas, Arrow), a numeric 2-d column, a float32 column passes through as it is
    cells = np.empty(2, object)
    cells[0], cells[1] = np.ones(4, np.float32), np.zeros(4, np.float32)
    assert stack_column(cells, col).tolist() == [[1.0] * 4, [0.0] * 4]
    same = np.ones((5, 4), np.float32)
    assert stack_column(same, col) is same
    # int64 ids below 2**31 to int32; bool to float; a NaN and an Inf of a float input are values
    assert stack_column(np.array([1, 2**31 - 1]), column_of(N)).dtype == np.int32
    assert stack_column([[True, False, True, False]], col).tolist() == [[1.0, 0.0, 1.0, 0.0]]
    nan = stack_column([float("nan"), np.inf, 1.5], Column("column 'v'", "float32", []))
    assert np.isnan(nan[0]) and nan[1] == np.inf and nan.dtype == np.float32
    # bfloat16: float32 values a bfloat16 holds
    assert stack_column(np.array([1.0, 0.5], np.float32), Column("c", "bfloat16", [])).dtype == ml_dtypes.bfloat16
    # a PRNG key input, or no dtype: nothing converted (the artifact's checks judge it)
    assert stack_column(np.array([[1, 2]], np.uint64), Column("c", "key<fry>", [None])).dtype == np.uint64


def test_empty_columns():
    assert stack_column([], column_of(X)).shape == (0, 4) and stack_column([], column_of(X)).dtype == np.float32
    assert stack_column(np.zeros((0, 4)), column_of(X)).dtype == np.float32
    assert stack_column([], column_of(Input("v", ("batch", "k"), "int32"))).shape == (0,)
    assert example_columns([], [X]) == {}


@pytest.mark.parametrize(("cells", "found"), [
    ([[1, 2, 3, 4]] * 3 + [[1, 2, 3]],
     "row 3: a list of 3 values where the input's rows have shape (4,); every row of an input has one shape"),
    ([[1, 2, 3, 4], None], "row 1: None; drop or fill the missing rows"),
    ([[1, 2, 3, 4], float("nan")], "row 1: NaN, a missing cell (where the input's rows have shape (4,)): pandas "
                                   "fills a missing cell of a column of arrays with NaN; drop or fill the missing "
                                   "rows"),
    ([[1, 2, 3, 4], {"a": 1}], "row 1: a dict; a row holds a number or an array of numbers"),
    (["abcd"], "row 0: a str 'abcd'; a row holds a number or an array of numbers"),
    ([[1, 2, 3, 4], b"\x00\x01"], "row 1: bytes b'\\x00\\x01'; a row holds a number or an array of numbers"),
    ([[1, 2, 3, 4], memoryview(b"ab")], "row 1: bytes b'ab'; a row holds a number or an array of numbers"),
    ([[1, 2, None, 4]], "row 0: a list holding None at [2]; a row holds a number or an array of numbers"),
    ([[1, 2, 3, {}]], "row 0: a list holding a dict at [3]; a row holds a number or an array of numbers"),
    ([[1, 2, "3", 4]], "row 0: a list of strings ([1, 2, '3', 4]); a row holds a number or an array of numbers"),
    ([[[1, 2], [3]]], "row 0: a ragged list (its items have different lengths); a row holds a number or an array of "
                      "numbers"),
    ([[1, 2, 3, 2**70]], "row 0: a list holding the integer 1180591620717411303424 (too large for any integer dtype) "
                         "at [3]; a row holds a number or an array of numbers"),
    ([[1, 2, 3, 4], 5], "row 1: a single value 5 where the input's rows have shape (4,); every row of an input has "
                        "one shape"),
    ([np.array(7.0)], "row 0: a single value 7.0 where the input's rows have shape (4,); every row of an input has "
                      "one shape"),
    ([np.ones((2, 2))], "row 0: an array of shape (2, 2) where the input's rows have shape (4,); every row of an "
                        "input has one shape"),
    ([object()], "row 0: an object; a row holds a number or an array of numbers"),
    ([[0.1, 2, 3, 4]], "row 0: 0.1 (float64) at [0] is not a float32 value (it would become 0.10000000149011612); "
                       "give the column as float32, or convert it yourself if that change is what you mean"),
    ([[1, 2, 3, 4], [1, 2, 3, 1e300]], "row 1: 1e+300 (float64) at [3] is not a float32 value (it would become "
                                       "inf); give the column as float32, or convert it yourself if that change is "
                                       "what you mean"),
])
def test_a_bad_row_is_named(cells, found):
    _refused(cells, column_of(X), f"column 'x', {found}.")


def test_self_referring_and_deep_lists():
    loop: list = [1, 2, 3]
    loop.append(loop)
    _refused([loop], column_of(X), "column 'x', row 0: a ragged list (its items have different lengths); a row "
                                   "holds a number or an array of numbers.")
    alone: list = []
    alone.append(alone)
    deep: list = [1.0]
    for _ in range(10_000):
        deep = [deep]
    for cell in (alone, deep):
        with pytest.raises(InputError, match=r"^column 'x', row 0: a list that is no array of numbers \(setting an "):
            stack_column([cell], column_of(X))


def test_rows_of_a_variable_shape_are_judged_by_the_other_rows():
    col = column_of(Input("v", ("batch", "k"), "float32"))
    assert stack_column([[1, 2], [3, 4]], col).shape == (2, 2)
    _refused([[1, 2], [1, 2, 3], [1, 2]], col, "column 'v', row 1: a list of 3 values where row 0 has shape (2,); "
                                               "every row of an input has one shape.")
    _refused([[1, 2], [3, 4], [5, 6], [1]], col, "column 'v', row 3: a list of 1 values where rows 0..2 have shape "
                                                 "(2,); every row of an input has one shape.")
    # the first row is the odd one: the shape most rows have names it
    _refused([[1, 2, 3], [1, 2], [1, 2]], col, "column 'v', row 0: a list of 3 values where 2 of the 3 rows have "
                                               "shape (2,); every row of an input has one shape.")


def test_integer_columns_refuse_nan_and_lossy_values():
    col = column_of(N)
    _refused(np.array([1.0, np.nan, 3.0]), col, "column 'n', row 1: NaN in an integer column (int32): pandas stores "
                                                "a missing value of an integer column as NaN (and Spark a null); drop "
                                                "or fill the missing rows.")
    _refused([1, 2, float("nan")], col, "column 'n', row 2: NaN in an integer column (int32): pandas stores a missing "
                                        "value of an integer column as NaN (and Spark a null); drop or fill the "
                                        "missing rows.")
    _refused(np.array([1, 2**40]), col, "column 'n', row 1: 1099511627776 (int64) is not an int32 value (it would "
                                        "become 0); give the column as int32, or convert it yourself if that change "
                                        "is what you mean.")
    _refused([1, 2.5], col, "column 'n', row 1: 2.5 (float64) is not an int32 value (it would become 2.0); give the "
                            "column as int32, or convert it yourself if that change is what you mean.")
    flags = Column("column 'b'", "bool", [])
    _refused(np.array([0.0, np.nan]), flags, "column 'b', row 1: NaN in a bool column (bool): pandas stores a missing "
                                             "value of an integer column as NaN (and Spark a null); drop or fill the "
                                             "missing rows.")
    _refused(np.array([1, 2]), flags, "column 'b', row 1: 2 (int64) is not a bool value (it would become 1); give "
                                      "the column as bool, or convert it yourself if that change is what you mean.")
    assert stack_column(np.array([1.0, 2.0]), col).tolist() == [1, 2]
    # the row counts from first_row (Spark: the partition's rows before this batch)
    _refused([1, None], col, "column 'n', row 41: None; drop or fill the missing rows.", first_row=40)


def test_columns_that_are_no_columns():
    _refused(np.array(3.0), column_of(N), "column 'n': a single value (3.0), not a column with one value per row.")
    _refused(np.array(["a", "b"]), column_of(N), "column 'n': the column holds strings (row 0: 'a'), not numbers.")
    _refused(np.array([b"a"]), column_of(N), "column 'n': the column holds bytes (row 0: b'a'), not numbers.")
    _refused(np.array(["2020-01-01"], "datetime64[D]"), column_of(N),
             "column 'n': the column holds values of dtype datetime64[D] (row 0: datetime.date(2020, 1, 1)), not "
             "numbers.")
    _refused({"a": 1}, column_of(N), "column 'n': a dict, not a column (an array, a pandas Series or a list with "
                                     "one value per row).")


def test_flat_rows_reshape_to_the_input():
    """Spark holds a tensor row flat: a cell of prod(shape) values becomes a row of the input's shape."""
    col = Column("input 'x' (the UDF's column 0)", "float32", [2, 2], flat=True, row="row {} of partition 3")
    got = stack_column([np.arange(4.0), np.arange(4.0) + 4], col)
    assert got.shape == (2, 2, 2) and got.dtype == np.float32 and got[1].tolist() == [[4, 5], [6, 7]]
    _refused([np.arange(4.0), np.arange(3.0)], col,
             "input 'x' (the UDF's column 0), row 1 of partition 3: an array of 3 values where the input's rows hold "
             "4 values (shape (2, 2), flat or not); every row of an input has one shape.")
    _refused(np.arange(3.0), col, "input 'x' (the UDF's column 0), row 0 of partition 3: a single value 0.0 where the "
                                  "input's rows hold 4 values (shape (2, 2), flat or not); every row of an input has "
                                  "one shape.")
    scalar = Column("input 'v'", "float32", [], flat=True)
    _refused([np.arange(3.0)], scalar, "input 'v', row 0: an array of 3 values where the input's rows are single "
                                       "values; every row of an input has one shape.")


def test_batch_columns():
    inputs = [X, N]
    got = batch_columns({"x": np.ones((2, 4)), "ids": np.array([3, 4])}, inputs, {"n": "ids"})
    assert got["x"].dtype == np.float32 and got["n"].dtype == np.int32 and got["n"].tolist() == [3, 4]
    with pytest.raises(InputError, match=re.escape("the batch has no column 'n' for input 'n' (it has 'x'); name the "
                                                   "column after the input, or map it (columns={'n': 'COLUMN'}).")):
        batch_columns({"x": np.ones((2, 4))}, inputs)
    with pytest.raises(InputError, match=re.escape("column 'ids' (input 'n'), row 1 of the batch: None; drop or fill "
                                                   "the missing rows.")):
        batch_columns({"x": np.ones((2, 4)), "ids": np.array([1, None], object)}, inputs, {"n": "ids"})


def test_example_columns():
    inputs = [X, N]
    got = example_columns([{"x": [1, 2, 3, 4], "n": 1}, {"n": np.int64(2), "x": np.zeros(4)}], inputs)
    assert got["x"].shape == (2, 4) and got["n"].tolist() == [1, 2] and got["n"].dtype == np.int32
    assert example_columns([np.ones(4), np.zeros(4)], [X])["x"].shape == (2, 4)

    def refused(examples, message, of=inputs):
        with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
            example_columns(examples, of)

    refused([{"x": [1, 2, 3, 4], "n": 1}, {"x": [1, 2, 3, 4]}],
            "example 1 of the batch has no 'n' (it has 'x'); give every input by name.")
    refused([{}], "example 0 of the batch has no 'x', 'n' (it has nothing); give every input by name.")
    refused([{"x": [1, 2, 3, 4], "n": 1, "label": 3}],
            "example 0 of the batch has 'label', which the function does not take (its inputs: x, n); give only "
            "inputs (carry other values in a KeyedModelHandler's key).")
    refused([{"x": [1, 2, 3, 4], "n": 1}, np.ones(4)],
            "example 1 of the batch is of type ndarray, and example 0 a dict: give every example as a dict of arrays "
            "by input name.")
    refused([np.ones(4)], "the function takes 2 inputs (x, n); give each example as a dict of arrays by input name.")
    refused([{"x": [1, 2, 3, 4], "n": None}], "input 'n', example 0 of the batch: None; drop or fill the missing rows.")
    refused([np.ones(4), np.ones(3)], "input 'x', example 1 of the batch: an array of shape (3,) where the input's "
                                      "rows have shape (4,); every row of an input has one shape.", of=[X])
    refused(["text"], "input 'x', example 0 of the batch: a str 'text'; a row holds a number or an array of numbers.",
            of=[X])
