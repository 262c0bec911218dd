"""The ``jaxport.spec`` package: its names, each from the module that defines it, loaded on first use and without
JAX; and ``tree``, the one walk over a function's argument trees."""

from __future__ import annotations

import subprocess
import sys

import pytest

import jaxport.spec
from jaxport.spec import ArrayLeaf, BindLeaf, StaticLeaf, parse_spec
from jaxport.spec.tree import fold, leaves, map_leaves
from tests.support import REPO

SPEC = """\
jaxport: 1
dims: {b: {max: 8}}
args:
  - f32[b, 3]
  - w: {bind: params.npz}
    layers:
      - i32[b]
      - {static: 2}
kwargs:
  mode: {static: fast}
"""


@pytest.mark.parametrize("name", jaxport.spec.__all__)
def test_every_name_comes_from_the_module_that_defines_it(name):
    value = getattr(jaxport.spec, name)
    module = sys.modules[f"jaxport.spec.{jaxport.spec._HOMES[name]}"]
    assert getattr(module, name) is value


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match=r"^module 'jaxport.spec' has no attribute 'parse_specs'$"):
        jaxport.spec.parse_specs  # noqa: B018


def test_the_package_and_the_manifest_readers_values_import_neither_jax_nor_the_parser():
    code = ("import sys, jaxport.spec; from jaxport.spec import check_platform, input_range; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'numpy', 'yaml') "
            "or m.startswith('jaxport.spec'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["jaxport.spec", "jaxport.spec.values"]


def test_parsing_imports_no_jax():
    code = ("import sys; from jaxport.spec import Spec, parse_spec; parse_spec('jaxport: 1\\nargs:\\n  - f32[n]'); "
            "Spec(args=['f32[n]']); print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _arguments():
    fspec = parse_spec(SPEC, "s.yaml").functions[None]
    return [*fspec.args, fspec.kwargs]


def test_leaves_are_in_order_with_their_paths():
    found = leaves(_arguments())
    assert [(path, type(leaf).__name__) for path, leaf in found] == [
        ((0,), "ArrayLeaf"), ((1, "w"), "BindLeaf"), ((1, "layers", 0), "ArrayLeaf"), ((1, "layers", 1), "StaticLeaf"),
        ((2, "mode"), "StaticLeaf")]
    assert found[0][1].shape == ("b", 3)
    assert leaves(ArrayLeaf((), "float32", found[0][1].where)) == [((), ArrayLeaf((), "float32", found[0][1].where))]
    assert leaves({}) == [] and leaves([]) == []


def test_map_leaves_rebuilds_the_tree_and_leaves_it_as_it_was():
    tree = _arguments()

    def replaced(leaf):
        return None if isinstance(leaf, (StaticLeaf, BindLeaf)) else leaf.dtype

    assert map_leaves(replaced, tree) == ["float32", {"w": None, "layers": ["int32", None]}, {"mode": None}]
    assert isinstance(tree[1]["w"], BindLeaf) and isinstance(tree[2]["mode"], StaticLeaf)


def test_fold_builds_mappings_and_lists_its_own_way():
    def mapping(children):
        return "{" + ",".join(f"{k}:{v}" for k, v in children.items()) + "}"

    def sequence(children):
        return "[" + ",".join(children) + "]"

    text = fold(_arguments(), lambda leaf: type(leaf).__name__[0], mapping, sequence)
    assert text == "[A,{w:B,layers:[A,S]},{mode:S}]"
