"""Python numbers given to a loaded function take the input's dtype only where they keep their value, as
``Exported.call`` would take them: never truncated (1.5 into int32), wrapped (256 into uint8), flipped into a bool
(0.5) or overflowed to infinity (1e300 into float32); each refusal is an ``InputError`` naming the input."""

from __future__ import annotations

import numpy as np
import pytest

import jaxport
from jaxport import InputError


@pytest.fixture(scope="module")
def scalars(tmp_path_factory):
    path = tmp_path_factory.mktemp("scalars") / "s.jaxport"
    spec = {"jaxport": 1, "args": ["f32[]", "u8[]", "bool[]", "i32[]", "c64[]"]}
    jaxport.export(lambda x, n, b, i, c: (x * 2, n + 1, ~b, i - 1, c * 2), spec, output=path)
    return jaxport.load(path)


GOOD = (1.5, 7, True, -3, 1 + 2j)


@pytest.mark.parametrize(("position", "value", "message"), [
    (3, 1.5, "input 'i' is the Python float 1.5, which int32 cannot hold (integers -2147483648 to 2147483647); give "
             "a whole number in that range."),
    (3, 2**40, "input 'i' is the Python int 1099511627776, which int32 cannot hold (integers -2147483648 to "
               "2147483647); give a whole number in that range."),
    (3, float("nan"), "input 'i' is the Python float nan, which int32 cannot hold (integers -2147483648 to "
                      "2147483647); give a whole number in that range."),
    (1, 256, "input 'n' is the Python int 256, which uint8 cannot hold (integers 0 to 255); give a whole number in "
             "that range."),
    (1, -1, "input 'n' is the Python int -1, which uint8 cannot hold (integers 0 to 255); give a whole number in that "
            "range."),
    (3, True, "input 'i' is the Python bool True, but the artifact expects int32: give a number, not a bool."),
    (2, 0.5, "input 'b' is the Python float 0.5, but the artifact expects bool: give True or False."),
    (2, 1, "input 'b' is the Python int 1, but the artifact expects bool: give True or False."),
    (0, 1e300, "input 'x' is the Python float 1e+300, which overflows float32; give a value within its range."),
    (0, 10**400, "input 'x' is the Python int 100000000000...0000 (401 characters), which overflows float32; give a "
                 "value within its range."),
    (0, 1 + 2j, "input 'x' is the Python complex (1+2j), but the artifact expects float32, which holds no complex "
                "number."),
    (3, np.float64(2.5), "input 'i' is the Python float64 np.float64(2.5), which int32 cannot hold (integers "
                         "-2147483648 to 2147483647); give a whole number in that range."),
])
def test_a_number_its_input_cannot_hold_is_refused(scalars, position, value, message):
    args = list(GOOD)
    args[position] = value
    with pytest.raises(InputError) as e:
        scalars(*args)
    assert str(e.value) == message


def test_numbers_that_keep_their_value_are_taken(scalars):
    x, n, b, i, c = scalars(0.1, 255, False, 2.0, 3)
    assert (x.dtype, float(x)) == (np.float32, float(np.float32(0.1) * 2))
    assert (n.dtype, int(n)) == (np.uint8, 0)  # the program's own uint8 arithmetic wraps, not the input
    assert (bool(b), i.dtype, int(i), complex(c)) == (True, np.int32, 1, 6 + 0j)
    x = scalars(float("inf"), 0, True, 0, 0j)[0]
    assert np.isinf(x)  # infinity is a float32 value: given, not overflowed into


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows") / "r.jaxport"
    jaxport.export(lambda x: x * 2, {"jaxport": 1, "dims": {"b": {"max": 8}}, "args": ["f32[b, 3]"]}, output=path)
    return jaxport.load(path)


class _Claims:
    """An array-like whose ``shape`` and ``dtype`` attributes say one thing and whose data is another."""

    shape, dtype = (2, 3), np.dtype(np.float32)

    def __init__(self, data):
        self.data = data

    def __array__(self, dtype=None, copy=None):
        if isinstance(self.data, Exception):
            raise self.data
        return self.data


class _LyingShape(np.ndarray):
    @property
    def shape(self):
        return (2, 3)


def test_array_likes_are_taken_as_the_data_they_hold(rows):
    """Objects that are neither numpy's plain arrays nor JAX's are read through ``__array__`` (an ndarray subclass
    as a base-class view): their data decides the shape and dtype checked, never their attributes."""
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(np.asarray(rows(_Claims(x))), x * 2)
    np.testing.assert_array_equal(np.asarray(rows(x.view(_LyingShape))), x * 2)
    with pytest.raises(InputError, match=r"^input 'x' has dtype float64, but the artifact expects float32\."):
        rows(_Claims(x.astype(np.float64)))
    with pytest.raises(InputError) as e:
        rows(_Claims(RuntimeError("no data")))
    assert str(e.value) == "input 'x' (_Claims) cannot be read as an array: RuntimeError: no data."
    with pytest.raises(InputError) as e:
        rows(np.ma.array(x, mask=x > 4))
    assert str(e.value) == ("input 'x' is a masked array, whose mask a program cannot take; give x.filled(VALUE) (the "
                            "masked elements replaced) or a separate mask input.")
