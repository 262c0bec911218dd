"""The ``like-values`` of the hostile corpus (``tests/hostile/spec_classes.py``) through the Python API, where the
corpus runs only command lines: ``jaxport.export(fn, jaxport.Spec(args=[jaxport.like(V)]))`` with the value in
memory. Each refused value is a ``SpecError`` naming what the corpus case's message names (and never a
RecursionError, a SystemError or JAX's own error); each accepted one exports an artifact that loads and, called on
the value itself, returns what the live function returns (compared with the function run eagerly: some values hold
leaves that ``jax.jit`` cannot take, a generator, a lambda, a string).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import jaxport
from tests.hostile import spec_classes as sc

VALUES = {v.name: v for v in sc.like_values()}


def _value(v: sc.LikeValue, tmp_path: Path) -> dict:
    """The namespace of the case's model (the helpers, ``f`` and ``V``), run as a module of its own."""
    path = tmp_path / f"like_{abs(hash(v.name))}.py"
    path.write_text(sc.LIKE_HEAD + v.source)
    namespace: dict = {"__name__": path.stem, "__file__": str(path)}
    sys.modules[path.stem] = type(sys)(path.stem)  # dataclasses look their module up
    try:
        exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the corpus's own model text
    finally:
        del sys.modules[path.stem]
    return namespace


def _spec(v: sc.LikeValue, value: object) -> jaxport.Spec:
    leaves = yaml.safe_load(v.leaves) if v.leaves else None
    like = jaxport.like(value, leaves=leaves)
    if v.place == "mapping":
        return jaxport.Spec(args=[{"a": like}])
    if v.place == "keyword":
        return jaxport.Spec(kwargs={"v": like})
    return jaxport.Spec(args=[like])


@pytest.mark.parametrize("name", list(VALUES))
def test_like_values_through_the_api(tmp_path, name):
    v = VALUES[name]
    ns = _value(v, tmp_path)
    out = tmp_path / "a.jaxport"
    if v.refused:
        # jaxport.like() itself refuses a dict or list that holds itself (a caller's error, UsageError)
        kinds = (jaxport.SpecError, jaxport.UsageError) if "itself" in v.refused else jaxport.SpecError
        with pytest.raises(kinds) as e:
            jaxport.export(ns["f"], _spec(v, ns["V"]), output=out, write_manifest=False)
        assert v.refused in str(e.value)
        assert "\n" not in str(e.value)
        assert not out.exists()
        return
    jaxport.export(ns["f"], _spec(v, ns["V"]), output=out, write_manifest=False)
    loaded = jaxport.load(out)
    value = {"a": ns["V"]} if v.place == "mapping" else ns["V"]
    got = loaded(v=value) if v.place == "keyword" else loaded(value)
    # the program takes a Python number as an input (jax.jit's weakly typed scalar): so does the reference
    # (one pinned with {static: true} stays the Python number, baked into the program)
    pinned = {k for k, x in (yaml.safe_load(v.leaves) if v.leaves else {}).items() if isinstance(x, dict)}

    def typed(path: tuple, x: object) -> object:
        number = isinstance(x, (bool, int, float)) and str(getattr(path[-1], "key", "")) not in pinned
        return jnp.asarray(x) if number else x

    traced = jax.tree_util.tree_map_with_path(typed, value)
    want = ns["f"](v=traced) if v.place == "keyword" else ns["f"](traced)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
