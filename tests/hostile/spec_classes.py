"""The spec-value classes (issue 36, item 4): ``like:`` values, dimension-dependent ranges and bind sources, as whole
command lines (``export``, then ``call --random`` and ``verify`` of what the export accepted).

- ``like-values``: values that contain themselves (a dict, a list, through a tuple, a namedtuple, a registered
  dataclass's field, a flax ``struct.dataclass``, a custom pytree node, one whose flatten returns itself), nested
  99, 100, 101 and 3000 levels (dict, list, tuple, mixed, namedtuple), 4095 to 20000 leaves, dict keys that name one
  input (``1`` and ``"1"``, ``True`` and ``"True"``, ``"a/b"`` beside ``{"a": {"b"}}``), keys that are tuples,
  ``None``, floats, objects or of types that cannot be ordered, generators, lambdas, strings and bytes as leaves, numpy
  object arrays, 0-d arrays, a Python int beyond int32, NaN and infinity pinned with ``{static: true}``, ``static`` on
  an array or a string, a ``leaves:`` path the value does not have. Refused: exit 3, one ``error[spec]`` line naming
  the path. Accepted: the artifact is called (``--random``) and verified against the live function.
- ``dimension-ranges``: generated ``range: [LO, HI]`` over dimensions with bounds (``[n, 0]``, ``[0, n - 10]``,
  ``[0, n^6]`` on i32, ``[0, n*10]`` on u8, ``[-n, n]`` on unsigned, ``[0, n]`` with n up to 2**31, float and
  bool and key leaves, ``[n, n]``, ``[n, n + 1]``, ``[0, a*b]``, ``floordiv``/``mod``/``max``/``min``, bounds that
  are not monotone, constraints). The ground truth is this module's own: each bound evaluated as a Python integer
  expression at every size within the bounds (at the corners and a seeded sample when the bounds hold more than
  ``EVERY_SIZE`` sizes: those bounds are monotone), the export refused iff some size gives an empty range or one that
  leaves the dtype. An accepted export is called at each corner (and a size between) with ``--random --dim``; that
  the drawn values lie in ``[LO, HI)`` at that size is checked by ``tests/spec/test_ranges_hostile.py`` from the same
  cases (the corpus runs command lines and judges their exits).
- ``bind-sources``: attributes that are generators, coroutines, async generators, lambdas taking arguments, classes,
  modules, numbers, ``None``, strings; empty dict, list and tuple (accepted: a Keras model's empty
  ``non_trainable_variables``); an empty ``.npz``, one holding only an object array (refused without unpickling it),
  a ``.safetensors`` of zero tensors, a directory that is no orbax checkpoint, one with a broken ``_METADATA``, a
  symlink loop, a FIFO; zero-argument functions that raise, return a generator, return themselves; a dict whose only
  leaf is a generator, and one holding an array beside a generator (both refused naming the generator's path).

The values themselves are shared with ``tests/spec/test_like_hostile.py``, which passes each through the Python API
(``jaxport.export(fn, jaxport.Spec(args=[jaxport.like(V)]))``): the corpus runs only command lines.
"""

from __future__ import annotations

import itertools
import os
import random
import struct
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .corpus import Base, Case, _good_npy, _pickled_npy, _raw_zip

EXPORT = ("export", ("export", "model.py:f", "-s", "spec.yaml", "-o", "out.jaxport"))
VERIFY = ("verify", ("verify", "art.jaxport"))
OUTPUTS = frozenset({"out.jaxport", "out.jaxport.manifest.json", "out.npz"})
SPEC = frozenset({3})

# --- like-values -------------------------------------------------------------------------------------------------

#: What every ``like-values`` model starts with: helpers to build the value ``V``, and the function, which sums the
#: value's array leaves (any structure, any leaf count).
LIKE_HEAD = '''\
import collections
import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

NT = collections.namedtuple("NT", "a")


def A(*shape):
    return np.full(shape, 0.5, np.float32)


def nest(kind, n):
    v = A(2)
    for i in range(n):
        k = kind if kind != "mixed" else ("dict", "list", "tuple", "nt")[i % 4]
        v = {"k": v} if k == "dict" else [v] if k == "list" else (v,) if k == "tuple" else NT(v)
    return v


def f(v):
    arrays = [x for x in jax.tree_util.tree_leaves(v) if hasattr(x, "dtype")]
    return sum((jnp.sum(jnp.asarray(x, jnp.float32)) for x in arrays), jnp.float32(0))

'''

CONTAINS = "contains itself"
DEEP = "is nested more than"
MANY = "more than 4096 leaves"


@dataclass(frozen=True)
class LikeValue:
    name: str
    source: str  # Python defining V (after LIKE_HEAD)
    refused: str = ""  # text the refusal names; empty: accepted
    why: str = ""  # why it is accepted
    leaves: str = ""  # the spec's ``leaves:`` mapping (flow YAML), if any
    place: str = ""  # where the spec puts it: the first argument; "mapping": args: [{a: ...}]; "keyword": kwargs v


def like_values() -> list[LikeValue]:
    v: list[LikeValue] = [
        LikeValue("cycle-dict", "V = {'x': A(3)}\nV['self'] = V\n", CONTAINS),
        LikeValue("cycle-list", "V = [A(3)]\nV.append(V)\n", CONTAINS),
        LikeValue("cycle-through-tuple", "L = [A(3)]\nV = (L,)\nL.append(V)\n", CONTAINS),
        LikeValue("cycle-namedtuple", "L = [A(3)]\nV = NT(L)\nL.append(V)\n", CONTAINS),
        LikeValue("cycle-dataclass-field", "@jax.tree_util.register_dataclass\n@dataclasses.dataclass\nclass Node:\n"
                  "    x: Any\n    nxt: Any\n\nV = Node(A(3), None)\nV.nxt = V\n", CONTAINS),
        LikeValue("cycle-flax-struct", "from flax import struct\n\n@struct.dataclass\nclass S:\n    x: Any\n"
                  "    rest: Any\n\nV = S(A(3), [])\nV.rest.append(V)\n", CONTAINS),
        LikeValue("cycle-custom-pytree", "class Box:\n    def __init__(self, items):\n        self.items = items\n\n"
                  "jax.tree_util.register_pytree_node(Box, lambda b: ((b.items,), None), lambda _, c: Box(*c))\n"
                  "V = Box([A(3)])\nV.items.append(V)\n", CONTAINS),
        LikeValue("custom-node-flattens-to-itself", "class Loop:\n    pass\n\n"
                  "jax.tree_util.register_pytree_node(Loop, lambda b: ((b,), None), lambda _, c: Loop())\n"
                  "V = {'x': A(3), 'loop': Loop()}\n", CONTAINS),
        LikeValue("cycle-in-unregistered-dataclass", "@dataclasses.dataclass\nclass Plain:\n    nxt: Any = None\n\n"
                  "P = Plain()\nP.nxt = P\nV = {'x': A(3), 'p': P}\n",
                  why="a dataclass not registered as a pytree is one leaf to JAX: passed to the function as it is"),
    ]
    for kind in ("dict", "list", "tuple", "mixed", "nt"):  # 29 levels at the top of the arguments (like.MAX_DEPTH)
        for n in (28, 29, 30, 99, 100, 101, 3000):
            v.append(LikeValue(f"nested-{kind}-{n}", f"V = nest({kind!r}, {n})\n", DEEP if n > 29 else "",
                               why=f"{n} levels, within the 29 whose call tree the manifest's 64 levels hold"))
    for n in (28, 29):  # one level below the top of the arguments: one level less
        v.append(LikeValue(f"nested-list-{n}-below-a-mapping", f"V = nest('list', {n})\n", DEEP if n > 28 else "",
                           why=f"{n} levels one level below the top, within the 28 the manifest holds there",
                           place="mapping"))
    v.append(LikeValue("nested-list-29-as-keyword", "V = nest('list', 29)\n", place="keyword",
                       why="29 levels as a keyword argument, as deep as a positional one"))
    for n in (4095, 4096, 4097, 20000):
        v.append(LikeValue(f"leaves-{n}", f"V = [A() for _ in range({n})]\n", MANY if n > 4096 else "",
                           why=f"{n} leaves, within the documented 4096"))
    v += [
        LikeValue("keys-1-and-'1'", "V = {1: A(3), '1': A(3)}\n", "which name one input"),
        LikeValue("keys-True-and-'True'", "V = {True: A(3), 'True': A(3)}\n", "which name one input"),
        LikeValue("keys-True-and-1", "V = {True: A(3), 1: A(2)}\n",
                  why="True and 1 are one key to Python: the dict holds one entry, one input"),
        LikeValue("keys-int-and-str", "V = {1: A(3), 'a': A(3)}\n", "cannot be ordered"),
        LikeValue("keys-none-and-str", "V = {None: A(3), 'a': A(3)}\n", "cannot be ordered"),
        LikeValue("key-tuple", "V = {(1, 2): A(3), (1, 3): A(2)}\n", why="tuple keys name their inputs '(1, 2)'"),
        LikeValue("key-none", "V = {None: A(3)}\n", why="a None key names its input 'None'"),
        LikeValue("key-float", "V = {1.5: A(3), 2.5: A(2)}\n", why="float keys name their inputs '1.5'"),
        LikeValue("key-object", "class K:\n    def __lt__(self, other):\n        return id(self) < id(other)\n\n"
                  "V = {K(): A(3)}\n", "memory address"),
        LikeValue("key-slash-collides-with-path", "V = {'a/b': A(3), 'a': {'b': A(3)}}\n", "both get the input name"),
        LikeValue("key-slash-alone", "V = {'a/b': A(3), 'c': A(2)}\n",
                  why="a key holding '/' names its input 'a/b'; it is refused only when another path has that name"),
        LikeValue("generator-leaf", "V = {'g': (i for i in range(3)), 'x': A(3)}\n", "is a generator"),
        LikeValue("lambda-leaf", "V = {'g': lambda x: x, 'x': A(3)}\n", why="a callable leaf is baked, as documented"),
        LikeValue("object-array", "V = {'o': np.array([1, 'a'], dtype=object), 'x': A(3)}\n", "dtype object"),
        LikeValue("strings-and-bytes", "V = {'s': 'text', 'b': b'bytes', 'x': A(3)}\n",
                  why="string and bytes leaves are baked into the program, as documented"),
        LikeValue("only-strings", "V = {'s': 'text', 'b': b'bytes'}\n", "has no array leaves"),
        LikeValue("empty-dict", "V = {}\n", "has no array leaves"),
        LikeValue("none", "V = None\n", "has no array leaves"),
        LikeValue("0-d-numpy-scalar", "V = np.float32(3.0)\n", why="a numpy scalar is a 0-d input"),
        LikeValue("0-d-array", "V = {'i': np.array(3, np.int32), 'f': np.array(1.5, np.float32)}\n",
                  why="0-d arrays are scalar inputs"),
        LikeValue("empty-array", "V = {'e': np.zeros((0, 3), np.float32), 'x': A(3)}\n",
                  why="an array of zero elements is an input of that shape"),
        LikeValue("int-2**40", "V = {'i': 2**40, 'x': A(3)}\n", "int32"),
        LikeValue("int-2**31-1", "V = {'i': 2**31 - 1, 'x': A(3)}\n", why="the largest int32, an int32 input"),
        LikeValue("nan-pinned", "V = {'lr': float('nan'), 'x': A(3)}\n", "only a Python number (finite)",
                  leaves="{lr: {static: true}}"),
        LikeValue("inf-pinned", "V = {'lr': float('inf'), 'x': A(3)}\n", "only a Python number (finite)",
                  leaves="{lr: {static: true}}"),
        LikeValue("nan-input", "V = {'lr': float('nan'), 'x': A(3)}\n",
                  why="a NaN number is a float32 input, drawn from N(0, 1) (it gives no range)"),
        LikeValue("int-pinned", "V = {'step': 7, 'x': A(3)}\n", why="a finite Python number pinned at its value",
                  leaves="{step: {static: true}}"),
        LikeValue("static-on-array", "V = {'x': A(3)}\n", "only a Python number (finite)",
                  leaves="{x: {static: true}}"),
        LikeValue("static-on-string", "V = {'s': 'text', 'x': A(3)}\n", "only a Python number (finite)",
                  leaves="{s: {static: true}}"),
        LikeValue("static-false", "V = {'step': 7, 'x': A(3)}\n", "keeps the leaf at the value",
                  leaves="{step: {static: false}}"),
        LikeValue("leaves-path-missing", "V = {'x': A(3)}\n", "is not an array leaf", leaves="{nope: 'f32[3]'}"),
        LikeValue("leaves-path-of-baked-leaf", "V = {'s': 'text', 'x': A(3)}\n", "is not an array leaf",
                  leaves="{s: 'f32[]'}"),
    ]
    return v


def like_spec(value: LikeValue) -> str:
    extra = f"\n    leaves: {value.leaves}" if value.leaves else ""
    if value.place == "mapping":
        return "jaxport: 1\nargs:\n  - a: {like: model.py:V}\n"
    if value.place == "keyword":
        return "jaxport: 1\nkwargs:\n  v: {like: model.py:V}\n"
    return f"jaxport: 1\nargs:\n  - like: model.py:V{extra}\n"


# --- dimension-ranges --------------------------------------------------------------------------------------------

#: Bounds that hold at most this many sizes are judged at every size; larger ones at their corners and a sample.
EVERY_SIZE = 4096
#: A call draws at most this many elements (a corner of 2**31 is called only through a shape such as ``n - K``).
CALL_ELEMENTS = 1 << 16
INT_LIMITS = {"i8": (-128, 127), "u8": (0, 255), "i16": (-(1 << 15), (1 << 15) - 1), "u16": (0, (1 << 16) - 1),
              "i32": (-(1 << 31), (1 << 31) - 1), "u32": (0, (1 << 32) - 1)}
#: The size taken for a dimension without a max (SPEC.md: the largest axis an int32 index addresses).
UNBOUNDED = (1 << 31) - 1


@dataclass(frozen=True)
class RangeCase:
    name: str
    dims: dict[str, tuple[int, int | None]]
    shape: tuple[str, ...]
    dtype: str
    lo: int | float | str
    hi: int | float | str
    constraints: tuple[str, ...] = ()
    #: The bounds are not expressions of the spec language (``**``): refused when the spec is read.
    syntax: bool = True
    known: str = ""
    #: The range holds, but another rule refuses the export: (exit code, what the message names). A ``dims`` max
    #: of 2**31 or more in a program without 64-bit inputs: JAX checks the bound as an int32 (a spec error).
    other: tuple[int, str] | None = None


def range_cases() -> list[RangeCase]:
    n64 = {"n": (1, 64)}
    big = {"n": ((1 << 31) - 7, (1 << 31) - 1)}  # n up to 2**31 - 1, through an axis n - (2**31 - 8) of 1..7
    big_shape = (f"n - {(1 << 31) - 8}",)
    beyond = {"n": ((1 << 31) - 7, 1 << 31)}  # a max of 2**31: JAX checks the bound as an int32 (a spec error)
    out = [
        RangeCase("n-to-0", n64, ("n",), "i32", "n", 0),
        RangeCase("0-to-n-minus-10", n64, ("n",), "i32", 0, "n - 10"),
        RangeCase("0-to-n-minus-10-from-11", {"n": (11, 64)}, ("n",), "i32", 0, "n - 10"),
        RangeCase("0-to-n^6-i32-n35", {"n": (1, 35)}, ("n",), "i32", 0, "n^6"),
        RangeCase("0-to-n^6-i32-n36", {"n": (1, 36)}, ("n",), "i32", 0, "n^6"),
        RangeCase("0-to-n**6-python-power", {"n": (1, 35)}, ("n",), "i32", 0, "n**6", syntax=False),
        RangeCase("0-to-n*10-u8-n25", {"n": (1, 25)}, ("n",), "u8", 0, "n*10"),
        RangeCase("0-to-n*10-u8-n26", {"n": (1, 26)}, ("n",), "u8", 0, "n*10"),
        RangeCase("0-to-n*10-u8-n64", n64, ("n",), "u8", 0, "n*10"),
        RangeCase("minus-n-to-n-u8", n64, ("n",), "u8", "-n", "n"),
        RangeCase("minus-n-to-n-u32", n64, ("n",), "u32", "-n", "n"),
        RangeCase("minus-n-to-n-i8-n128", {"n": (1, 128)}, ("n",), "i8", "-n", "n"),
        RangeCase("minus-n-to-n-i8-n129", {"n": (1, 129)}, ("n",), "i8", "-n", "n"),
        RangeCase("0-to-n-i32-n-2**31-1", big, big_shape, "i32", 0, "n"),
        RangeCase("0-to-n+1-i32-n-2**31-1", big, big_shape, "i32", 0, "n + 1"),
        RangeCase("0-to-n+2-i32-n-2**31-1", big, big_shape, "i32", 0, "n + 2"),
        RangeCase("n-minus-1-to-n-i32-n-2**31-1", big, big_shape, "i32", "n - 1", "n"),
        RangeCase("0-to-2n-u32-n-2**31-1", big, big_shape, "u32", 0, "2*n"),
        RangeCase("0-to-2n+3-u32-n-2**31-1", big, big_shape, "u32", 0, "2*n + 3"),
        RangeCase("0-to-n-i16-n-2**31-1", big, big_shape, "i16", 0, "n"),
        RangeCase("0-to-n-i32-n-2**31", beyond, big_shape, "i32", 0, "n", other=(3, "dims['n'].max: 2147483648")),
        RangeCase("0-to-n+1-i32-n-2**31", beyond, big_shape, "i32", 0, "n + 1"),
        RangeCase("0-to-n-unbounded-i32", {"n": (1, None)}, ("n",), "i32", 0, "n"),
        RangeCase("0-to-n+1-unbounded-i32", {"n": (1, None)}, ("n",), "i32", 0, "n + 1"),
        RangeCase("0-to-n+2-unbounded-i32", {"n": (1, None)}, ("n",), "i32", 0, "n + 2"),
        RangeCase("0-to-2n-unbounded-i32", {"n": (1, None)}, ("n",), "i32", 0, "2*n"),
        RangeCase("0-to-n-unbounded-u8", {"n": (1, None)}, ("n",), "u8", 0, "n"),
        RangeCase("float-lo-0.5-to-n-f32", n64, ("n",), "f32", 0.5, "n"),
        RangeCase("float-lo-0.5-to-n-i32", n64, ("n",), "i32", 0.5, "n"),
        RangeCase("0-to-n-f32", n64, ("n",), "f32", 0, "n"),
        RangeCase("0-to-n-bool", n64, ("n",), "bool", 0, "n"),
        RangeCase("0-to-n-key", n64, ("n",), "key", 0, "n"),
        RangeCase("n-to-n", n64, ("n",), "i32", "n", "n"),
        RangeCase("n-to-n+1", n64, ("n",), "i32", "n", "n + 1"),
        RangeCase("n-to-2n", n64, ("n",), "u8", "n", "2*n"),
        RangeCase("n-minus-2-to-n-u8", n64, ("n",), "u8", "n - 2", "n"),
        RangeCase("n-minus-1-to-n-u8", n64, ("n",), "u8", "n - 1", "n"),
        RangeCase("0-to-a*b-i32", {"a": (1, 8), "b": (1, 8)}, ("a", "b"), "i32", 0, "a*b"),
        RangeCase("0-to-a*b-u8-16", {"a": (1, 16), "b": (1, 16)}, ("a", "b"), "u8", 0, "a*b"),
        RangeCase("0-to-a*b-u8-17", {"a": (1, 17), "b": (1, 16)}, ("a", "b"), "u8", 0, "a*b"),
        RangeCase("a-to-b-unconstrained", {"a": (1, 16), "b": (1, 16)}, ("a", "b"), "i32", "a", "b + 1"),
        RangeCase("a-to-b-constrained", {"a": (1, 16), "b": (1, 16)}, ("a", "b"), "i32", "a", "b + 1",
                  ("a <= b",)),
        RangeCase("0-to-b-minus-a-constrained", {"a": (1, 16), "b": (1, 16)}, ("a", "b"), "i32", 0, "b - a",
                  ("a + 1 <= b",)),
        RangeCase("0-to-a*b*c-u16", {"a": (1, 40), "b": (1, 40), "c": (1, 40)}, ("a", "b", "c"), "u16", 0,
                  "a*b*c"),
        RangeCase("0-to-a*b*c-u16-41", {"a": (1, 41), "b": (1, 40), "c": (1, 40)}, ("a", "b", "c"), "u16", 0,
                  "a*b*c"),
        RangeCase("floordiv-from-1", n64, ("n",), "i32", 0, "floordiv(n, 2)"),
        RangeCase("floordiv-from-2", {"n": (2, 64)}, ("n",), "i32", 0, "floordiv(n, 2)"),
        RangeCase("floordiv-by-n-minus-1", {"n": (1, 8)}, ("n",), "i32", 0, "floordiv(n, n - 1)"),
        RangeCase("floordiv-by-n-minus-1-from-2", {"n": (2, 8)}, ("n",), "i32", 0, "floordiv(n, n - 1)"),
        RangeCase("mod-between-corners", {"n": (3, 7)}, ("n",), "i32", 0, "mod(n, 4)"),
        RangeCase("mod-1-to-3", {"n": (1, 3)}, ("n",), "i32", 0, "mod(n, 4)"),
        RangeCase("mod-plus-1", n64, ("n",), "u8", 0, "mod(n, 5) + 1"),
        RangeCase("percent-and-slashes", {"n": (2, 64)}, ("n",), "i32", "n % 2", "n // 2 + 1"),
        RangeCase("max-keeps-it-open", n64, ("n",), "i32", 0, "max(n - 10, 1)"),
        RangeCase("min-of-n-and-100", n64, ("n",), "u8", 0, "min(n, 100)"),
        RangeCase("min-lo-equals-hi", n64, ("n",), "i32", "min(n, 5)", "n"),
        RangeCase("square-dips-between-corners", {"n": (1, 5)}, ("n",), "i32", 0, "n*n - 6*n + 9"),
        RangeCase("square-from-4", {"n": (4, 64)}, ("n",), "i32", 0, "n*n - 6*n + 9"),
        RangeCase("names-no-shape-variable", n64, ("n",), "i32", 0, "m"),
        RangeCase("overflow-2**62", n64, ("n",), "i32", 0, "n*4611686018427387904"),
        RangeCase("mod-dips-in-a-large-box", {"n": (1, 100001)}, ("n",), "i32", 0, "mod(n, 4)",
                  known="bounds over more than 4096 sizes are checked at their corners only (values.MAX_RANGE_SIZES):"
                        " mod(n, 4) is 0 at n=4, between the corners 1 and 100001; call at n=4 refuses it (exit 2)"),
    ]
    return out


def _python(expr: int | float | str, env: dict[str, int]) -> int | float:
    """A bound of this module's ranges as Python evaluates it (the ground truth): ``^`` is a power, ``floordiv`` and
    ``mod`` Python's ``//`` and ``%``. Only the texts of ``range_cases`` are evaluated, never a file's."""
    if not isinstance(expr, str):
        return expr
    names = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "max": max, "min": min, **env}
    return eval(expr.replace("^", "**"), {"__builtins__": {}}, names)  # noqa: S307 - this module's own text


def range_sizes(case: RangeCase) -> tuple[list[dict[str, int]], bool]:
    """The sizes ``case``'s truth is judged at (the constraints' allowed ones): every size when the bounds hold at most
    ``EVERY_SIZE``, else the corners and a seeded sample; and whether that is every size."""
    names = sorted(case.dims)
    spans = [(lo, UNBOUNDED if hi is None else hi) for lo, hi in (case.dims[v] for v in names)]
    count = 1
    for lo, hi in spans:
        count *= hi - lo + 1
    if count <= EVERY_SIZE:
        points = list(itertools.product(*(range(lo, hi + 1) for lo, hi in spans)))
    else:
        rng = random.Random(len(case.name))
        points = list(itertools.product(*({lo, hi} for lo, hi in spans)))
        points += [tuple(rng.randint(lo, hi) for lo, hi in spans) for _ in range(2000)]
    envs = [dict(zip(names, p)) for p in points]
    return [e for e in envs if all(_holds(c, e) for c in case.constraints)], count <= EVERY_SIZE


def _holds(constraint: str, env: dict[str, int]) -> bool:
    left, right = constraint.split("<=")
    return _python(left, env) <= _python(right, env)


def range_truth(case: RangeCase) -> str:
    """Why the export must refuse the range ('' when it must accept it), from the ground truth."""
    if not case.syntax:
        return "not an expression of the spec language"
    if isinstance(case.lo, str) or isinstance(case.hi, str):
        if case.dtype not in INT_LIMITS:
            return f"a {case.dtype} range names a dimension"
        if any(isinstance(b, float) for b in (case.lo, case.hi)):
            return "a bound of an integer range is not whole"
        used = {v for s in case.shape for v in case.dims if v in s}
        for b in (case.lo, case.hi):
            if isinstance(b, str) and not set(_names(b)) <= used:
                return "names a dimension no shape uses"
    least, most = INT_LIMITS[case.dtype]
    for env in range_sizes(case)[0]:
        try:
            lo, hi = _python(case.lo, env), _python(case.hi, env)
        except ZeroDivisionError:
            return f"divides by zero at {env}"
        if abs(lo) > 1 << 62 or abs(hi) > 1 << 62:
            return f"beyond 2**62 at {env}"
        if not lo < hi:
            return f"empty at {env}"
        if lo < least or hi > most + 1:
            return f"[{lo}, {hi}) leaves {case.dtype} at {env}"
    return ""


def _names(expr: str) -> list[str]:
    import re

    return [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr) if w not in ("floordiv", "mod", "max", "min")]


def _yaml(x: int | float | str) -> str:
    return f'"{x}"' if isinstance(x, str) else repr(x)


def range_spec(case: RangeCase) -> str:
    dims = "".join(f"  {v}: {{min: {lo}{'' if hi is None else f', max: {hi}'}}}\n"
                   for v, (lo, hi) in case.dims.items())
    cons = f"constraints: [{', '.join(repr(c) for c in case.constraints)}]\n" if case.constraints else ""
    dtype = "key<fry>" if case.dtype == "key" else case.dtype
    shape = ", ".join(f'"{s}"' for s in case.shape)
    return (f"jaxport: 1\ndims:\n{dims}{cons}args:\n  - {{shape: [{shape}], dtype: {dtype}, range: [{_yaml(case.lo)}, "
            f"{_yaml(case.hi)}]}}\n")


RANGE_MODEL = "def f(x):\n    return x\n"


def call_sizes(case: RangeCase) -> list[dict[str, int]]:
    """The sizes an accepted range is called at: each corner the constraints allow and one size between, each with
    at most ``CALL_ELEMENTS`` elements drawn."""
    names = sorted(case.dims)
    spans = [(lo, UNBOUNDED if hi is None else hi) for lo, hi in (case.dims[v] for v in names)]
    points = list(itertools.product(*({lo, hi} for lo, hi in spans)))
    points.append(tuple((lo + hi) // 2 if hi - lo < 1 << 20 else lo + 3 for lo, hi in spans))
    out = []
    for p in dict.fromkeys(points):
        env = dict(zip(names, p))
        elements = 1
        for s in case.shape:
            elements *= int(_python(s, env))
        if elements <= CALL_ELEMENTS and all(_holds(c, env) for c in case.constraints):
            out.append(env)
    return out


# --- bind-sources --------------------------------------------------------------------------------------------------

BIND_HEAD = '''\
import jax
import jax.numpy as jnp
import numpy as np


def f(params, x):
    arrays = [a for a in jax.tree_util.tree_leaves(params) if hasattr(a, "dtype")]
    return x * 2.0 + sum((jnp.sum(jnp.asarray(a, jnp.float32)) for a in arrays), jnp.float32(0))

'''
NO_ARRAYS = "holds no arrays"


@dataclass(frozen=True)
class BindSource:
    name: str
    source: str  # what the spec binds
    python: str = ""  # Python after BIND_HEAD (the attribute's definition)
    refused: str = ""  # text the refusal names (default: the source); empty with ``why``: accepted
    files: tuple[tuple, ...] = ()  # setup steps (run._setup_step) making the bound file
    codes: frozenset[int] = SPEC
    why: str = ""
    timeout: float = 0.0


def _safetensors_empty() -> bytes:
    header = b"{}      "
    return struct.pack("<Q", len(header)) + header


def bind_sources() -> list[BindSource]:
    good = _good_npy(shape=(3,))
    return [
        BindSource("generator", "model.py:P", "P = (np.zeros(3) for _ in range(2))\n", NO_ARRAYS),
        BindSource("coroutine", "model.py:P", "async def c():\n    return 1\n\nP = c()\nP.close()\n", NO_ARRAYS),
        BindSource("async-generator", "model.py:P", "async def g():\n    yield 1\n\nP = g()\n", NO_ARRAYS),
        BindSource("lambda-taking-args", "model.py:P", "P = lambda x: x\n", "takes arguments"),
        BindSource("class", "model.py:P", "class P:\n    w = np.zeros(3, np.float32)\n", NO_ARRAYS),
        BindSource("module", "model.py:P", "import os as P\n", NO_ARRAYS),
        BindSource("int", "model.py:P", "P = 3\n", NO_ARRAYS),
        BindSource("none", "model.py:P", "P = None\n", NO_ARRAYS),
        BindSource("string", "model.py:P", "P = 'weights.npz'\n", NO_ARRAYS),
        BindSource("empty-dict", "model.py:P", "P = {}\n",
                   why="an empty Python container binds as itself (a model's empty non_trainable_variables)"),
        BindSource("empty-list", "model.py:P", "P = []\n",
                   why="an empty Python container binds as itself (a model's empty non_trainable_variables)"),
        BindSource("empty-tuple", "model.py:P", "P = ()\n",
                   why="an empty Python container binds as itself (a model's empty non_trainable_variables)"),
        BindSource("list-of-empty-dicts", "model.py:P", "P = [{}, {}]\n",
                   why="a nest of empty containers binds as itself (no leaves at all)"),
        BindSource("list-of-none", "model.py:P", "P = [None]\n",
                   why="None is an empty subtree to JAX: the value has no leaves and binds as itself"),
        BindSource("list-of-strings", "model.py:P", "P = ['a', 'b']\n", NO_ARRAYS),
        BindSource("empty-npz", "w.npz", files=(("write", "w.npz", _raw_zip([])),), refused=NO_ARRAYS),
        BindSource("npz-only-object-array", "w.npz",
                   files=(("write", "w.npz", _raw_zip([("w.npy", _pickled_npy(), 0, zlib.crc32(_pickled_npy()),
                                                       len(_pickled_npy()))])),)),
        BindSource("npz-text-member", "w.npz", files=(("write", "w.npz", _raw_zip([("w.txt", b"hi", 0,
                                                                                     zlib.crc32(b"hi"), 2)])),)),
        BindSource("npz-one-array", "w.npz", files=(("write", "w.npz", _raw_zip([("w.npy", good, 0, zlib.crc32(good),
                                                                                   len(good))])),),
                   why="a well-formed .npz of one float32 array"),
        BindSource("empty-npy", "w.npy", files=(("write", "w.npy", b""),)),
        BindSource("safetensors-zero-tensors", "w.safetensors", files=(("write", "w.safetensors",
                                                                        _safetensors_empty()),), refused=NO_ARRAYS),
        BindSource("directory-not-orbax", "ckpt", files=(("dir", "ckpt"), ("write", "ckpt/readme.txt", b"hi\n")),
                   refused="not an orbax checkpoint"),
        BindSource("orbax-broken-metadata", "ckpt", files=(("dir", "ckpt"), ("write", "ckpt/_METADATA", b"{not json"),),
                   refused="cannot read the orbax checkpoint"),
        BindSource("orbax-metadata-is-a-list", "ckpt", files=(("dir", "ckpt"), ("write", "ckpt/_METADATA", b"[1, 2]"),),
                   refused="cannot read the orbax checkpoint"),
        BindSource("step-dir-without-items", "ckpt", files=(("dir", "ckpt"),
                                                            ("write", "ckpt/_CHECKPOINT_METADATA", b"{}"))),
        BindSource("symlink-loop", "loop.npz", refused="symbolic link that leads nowhere",
                   files=(("symlink", "loop.npz", "loop.npz"),)),
        BindSource("dangling-symlink", "gone.npz", refused="symbolic link that leads nowhere",
                   files=(("symlink", "gone.npz", "missing.npz"),)),
        BindSource("fifo", "w.npz", files=(("fifo", "w.npz"),), timeout=60.0),
        BindSource("fifo-safetensors", "w.safetensors", files=(("fifo", "w.safetensors"),), timeout=60.0),
        BindSource("function-raises", "model.py:P", "def P():\n    raise RuntimeError('no weights here')\n",
                   "raised RuntimeError", codes=frozenset({4})),
        BindSource("function-returns-generator", "model.py:P", "def P():\n    return (i for i in range(3))\n",
                   NO_ARRAYS),
        BindSource("function-returns-itself", "model.py:P", "def P():\n    return P\n",
                   "calling the bound function returned"),
        BindSource("function-returns-none", "model.py:P", "def P():\n    return None\n", NO_ARRAYS),
        BindSource("dict-of-a-generator", "model.py:P", "P = {'g': (i for i in range(3))}\n", "is a generator"),
        BindSource("dict-with-array-and-generator", "model.py:P",
                   "P = {'w': np.ones(3, np.float32), 'g': (i for i in range(3))}\n", "is a generator"),
        BindSource("dict-with-array-and-string", "model.py:P", "P = {'w': np.ones(3, np.float32), 'name': 'dense'}\n",
                   why="a bound value's non-array leaves (a string) are baked into the program, as documented"),
    ]


BIND_SPEC = 'jaxport: 1\nargs:\n  - bind: {source}\n  - "f32[4]"\n'


# --- building the cases ----------------------------------------------------------------------------------------------


def exported(files: dict[str, bytes], setup: tuple[tuple, ...] = ()) -> bytes | None:
    """The artifact ``jaxport.export("model.py:f", "spec.yaml")`` writes in a directory holding ``files`` (None when it
    refuses or fails): what ``call`` and ``verify`` of an accepted case read (each command runs in a fresh
    directory)."""
    import jaxport

    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            (Path(d) / name).write_bytes(data)
        for step in setup:
            if step[0] == "write":
                (Path(d) / step[1]).write_bytes(step[2])
        cwd = Path.cwd()
        os.chdir(d)
        try:
            jaxport.export("model.py:f", "spec.yaml", output="art.jaxport", write_manifest=False)
            return Path(d, "art.jaxport").read_bytes()
        except Exception:  # noqa: BLE001 - the CLI's export of the same files then fails the case
            return None
        finally:
            os.chdir(cwd)


def _case(cls: str, name: str, model: str, spec: str, *, refused: str = "", why: str = "",
          codes: frozenset[int] = SPEC, calls: list[tuple[str, tuple[str, ...]]] | None = None,
          setup: tuple[tuple, ...] = (), timeout: float = 0.0, known: str = "") -> Case:
    files = {"model.py": model.encode(), "spec.yaml": spec.encode()}
    steps = (*(("write", n, b) for n, b in files.items()), *setup)
    commands = [EXPORT]
    if not refused:
        art = exported(files, setup)
        if art is not None:
            steps = (*steps, ("write", "art.jaxport", art))
        commands += calls if calls is not None else [("call", ("call", "art.jaxport", "--random", "--no-cache"))]
        commands.append(VERIFY)
    return Case(cls, name, cls, None, frozenset() if not refused else codes,
                accept=frozenset(label for label, _ in commands) if not refused else frozenset(), why=why,
                file="spec.yaml", commands=tuple(commands), setup=steps, timeout=timeout, outputs=OUTPUTS,
                mention=refused, known=known)


def like_cases() -> Iterator[Case]:
    for v in like_values():
        yield _case("like-values", v.name, LIKE_HEAD + v.source, like_spec(v), refused=v.refused, why=v.why)


def dimension_range_cases() -> Iterator[Case]:
    for r in range_cases():
        truth = range_truth(r)
        calls = [(f"call-{'-'.join(f'{k}={x}' for k, x in env.items())}",
                  ("call", "art.jaxport", "--random", "--no-cache", "-o", "out.npz",
                   *itertools.chain.from_iterable(("--dim", f"{k}={x}") for k, x in env.items())))
                 for env in call_sizes(r)]
        checked = "every size checked" if range_sizes(r)[1] else "a monotone bound: corners and a sample checked"
        # a known gap: the export (its only command) accepts what the ground truth refuses
        if r.other and not truth:
            yield _case("dimension-ranges", r.name, RANGE_MODEL, range_spec(r), refused=r.other[1],
                        codes=frozenset({r.other[0]}))
            continue
        yield _case("dimension-ranges", r.name, RANGE_MODEL, range_spec(r), refused="range" if truth else "",
                    why=f"the range holds at every size within the bounds ({checked})", calls=calls, known=r.known)


def bind_cases() -> Iterator[Case]:
    for b in bind_sources():
        refused = b.refused or ("" if b.why else b.source)
        yield _case("bind-sources", b.name, BIND_HEAD + b.python, BIND_SPEC.format(source=b.source),
                    refused=refused, why=b.why, codes=b.codes, setup=b.files, timeout=b.timeout)


def cases(b: Base) -> Iterator[Case]:
    for gen in (like_cases, dimension_range_cases, bind_cases):
        yield from gen()
