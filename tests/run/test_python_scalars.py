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
