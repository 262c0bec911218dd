"""One way in (issue 58): inside the library a request travels as its record; the facade (``FACADE`` of
``scripts/check_layers.py``: ``jaxport.load``, ``jaxport.export``, ``CallRequest``, the batch engines' adapters, ...)
lists every field of the records it builds as a parameter of its own, with the field's default, so that
``inspect.signature``, ``help`` and an IDE show them, and builds the record once."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pydoc
import re

import pytest

import jaxport
from jaxport._api_types import changed, record_of
from jaxport.errors import UsageError
from jaxport.run.options import LoadOptions
from tests.support import layer_checker

check_layers = layer_checker()
#: The adapters import their engine, which an environment without it lacks: their entries are checked where it is.
ENGINES = {"jaxport.ray": "ray", "jaxport.beam": "apache_beam", "jaxport.spark": "pyspark"}


def _object(path: str) -> object:
    """``module.Name`` (or ``module.Class.method``) of the package, imported."""
    for i in range(path.count("."), 0, -1):
        module, *attributes = path.rsplit(".", path.count(".") - i + 1)
        try:
            obj: object = importlib.import_module(module)
        except ImportError:
            continue
        for attribute in attributes:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(path)


def _default(f: dataclasses.Field) -> object:
    """A field's default (built by its factory), or ``inspect.Parameter.empty`` for one without."""
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else inspect.Parameter.empty


ENTRIES = [(module, qualname, records) for module, functions in check_layers.FACADE.items()
           for qualname, records in functions.items()]


@pytest.mark.parametrize("module, qualname, records", ENTRIES, ids=[f"{m}.{q}" for m, q, _ in ENTRIES])
def test_the_facade_lists_each_field_with_its_default(module, qualname, records):
    if module in ENGINES:
        pytest.importorskip(ENGINES[module])
    fn = _object(f"{module}.{qualname}")
    parameters = inspect.signature(fn).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values()), f"{module}.{qualname} takes **kwargs"
    omitted = check_layers.FACADE_OMITS.get(f"{module}.{qualname}", {})
    for record in records:
        for f in dataclasses.fields(_object(record)):  # type: ignore[arg-type]
            if f.name in omitted:
                assert f.name not in parameters
                continue
            assert f.name in parameters, f"{module}.{qualname} does not list {record}.{f.name}"
            given, default = parameters[f.name].default, _default(f)
            # a field that holds a record (``load``) is given whole, or not (None: the record's defaults)
            whole = f.default_factory is not dataclasses.MISSING and given is None
            assert whole or given == default, f"{module}.{qualname}: {f.name}={given!r}, the record's is {default!r}"


@pytest.mark.parametrize("name, shown", [
    ("load", ["runtime", "cache_dir", "require_signature", "check_ranges", "verify"]),
    ("export", ["bind", "name", "platforms", "for_jax", "request"]),
    ("verify_artifact", ["dims", "against_artifact", "runtime", "localize_budget"]),
    ("localize", ["against_platform", "localize_out", "cache_dir"]),
    ("import_stablehlo", ["calling_convention", "function", "write_manifest"]),
])
def test_the_public_functions_show_their_parameters(name, shown):
    fn = getattr(jaxport, name)
    parameters = inspect.signature(fn).parameters
    assert set(shown) <= set(parameters) and all(p.kind is not p.VAR_KEYWORD for p in parameters.values())
    text = pydoc.render_doc(fn)
    assert all(re.search(rf"\b{p}\b", text) for p in shown)


def test_the_public_records_take_the_load_options_by_keyword():
    request = jaxport.CallRequest("m.jaxport", random=True, runtime="iree", cache_dir="c")
    assert request.load == LoadOptions(runtime="iree", cache_dir="c")
    assert "require_signature" in inspect.signature(jaxport.CallRequest).parameters
    assert "require_signature" in inspect.signature(jaxport.VerifyRequest).parameters
    assert jaxport.VerifyRequest("m.jaxport", load=LoadOptions(cache_dir="c"), runtime="iree").load == \
        LoadOptions(cache_dir="c", runtime="iree")


def test_load_builds_its_record_once_and_loads_by_it(monkeypatch):
    from jaxport.run import load as load_mod

    seen = []
    monkeypatch.setattr(load_mod, "load_by", lambda path, options, **kw: seen.append((path, options, kw)))
    jaxport.load("m.jaxport", "f", runtime="iree", allow_custom_calls=["k"], verify=False, defer_verify=True)
    assert seen == [("m.jaxport", LoadOptions(function="f", runtime="iree", allow_custom_calls=("k",),
                                              verify_weights=False), {"defer_verify": True})]


def test_a_keyword_at_its_default_leaves_the_given_records_value():
    given = LoadOptions(runtime="iree", cache_dir="c")
    assert record_of(LoadOptions, given, {"runtime": "jax", "cache": False, "cache_dir": None}, "load") == \
        LoadOptions(runtime="iree", cache_dir="c", cache=False)
    assert record_of(LoadOptions, None, {"allow_custom_calls": ["a"]}, "load") == LoadOptions(allow_custom_calls=("a",))
    assert changed(LoadOptions, {"verify_weights": True, "check_ranges": 1, "module_dir": "m"}) == {
        "check_ranges": 1, "module_dir": "m"}  # 1 is no bool: given, and the record refuses it where it checks types
    with pytest.raises(UsageError, match=re.escape("load must be a jaxport.LoadOptions, not dict.")):
        record_of(LoadOptions, {"runtime": "iree"}, {}, "load")  # type: ignore[arg-type]


def test_every_public_name_resolves():
    for name in jaxport.__all__:
        assert getattr(jaxport, name) is not None, name
