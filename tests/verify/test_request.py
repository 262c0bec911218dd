"""``VerifyRequest``: verify's options in one record, its rules checked where it is built, and
``jaxport.verify_artifact`` taking a request or the options as keywords."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

import jaxport
from jaxport import UsageError, VerifyRequest
from jaxport.run.options import LoadOptions
from jaxport.verify.api import verify

MODEL = '''
import jax.numpy as jnp


def f(x):
    return jnp.tanh(x) * 2.0
'''

SPEC = '''jaxport: 1
dims:
  b: {min: 1, max: 16}
args:
  - "f32[b, 3]"
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("request")
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    with contextlib.chdir(d):
        jaxport.export("model.py:f", "spec.yaml", output="f.jaxport")
    return d


EXPECT_NEEDS_INPUTS = ("--expect compares the outputs for given inputs with reference outputs; give those inputs "
                       "with --inputs (e.g. the file 'jaxport call --save-inputs FILE.npz' wrote).")


@pytest.mark.parametrize("options, message", [
    ({"expect": "out.npz"}, EXPECT_NEEDS_INPUTS),
    ({"inputs": ["in.npz"], "dims": {"b": [3]}},
     "--dim chooses the cases of random inputs; with --inputs the dimensions come from the inputs' shapes. Leave "
     "out --dim."),
    ({"inputs": ["in.npz"], "ranges": {"x": (0.0, 1.0)}},
     "--range chooses the values of random inputs; with --inputs they are given. Leave out --range."),
    ({"runtime": "tpu-magic"}, "unknown runtime 'tpu-magic': use 'jax' or 'iree'."),
])
def test_the_rules_are_checked_where_the_request_is_built(options, message):
    with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
        VerifyRequest("f.jaxport", **options)
    with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
        jaxport.verify_artifact("nowhere.jaxport", **options)  # refused before the artifact is read


def test_the_load_options_are_flat_keywords_too():
    request = VerifyRequest("f.jaxport", "model.py:f", function="f", runtime="iree", allow_custom_calls=["t"])
    assert request.load == LoadOptions(function="f", runtime="iree", allow_custom_calls=("t",))
    assert (request.against, request.load.runtime, request.across_compilers) == ("model.py:f", "iree", True)
    assert not VerifyRequest("f.jaxport", load=LoadOptions(function="f")).across_compilers
    assert VerifyRequest("f.jaxport", cache_dir="c", cache=False).load.module_directory() is None
    assert VerifyRequest("f.jaxport", runtime="iree", cache_dir="c").load.module_directory() == Path("c") / "iree"
    assert VerifyRequest("f.jaxport", runtime="iree", cache_dir="c", module_dir="m").load.module_directory() == \
        Path("m")
    given = VerifyRequest("f.jaxport", load=LoadOptions(runtime="iree", cache_dir="c"), cache=False)
    assert given.load == LoadOptions(runtime="iree", cache_dir="c", cache=False)  # keywords replace the given record's
    assert not hasattr(request, "runtime")  # the record is read whole: ``request.load.runtime``
    with pytest.raises(TypeError):
        VerifyRequest("f.jaxport", "model.py:f", "spec.yaml", 0)  # the options after spec are keywords only


def test_a_request_or_keywords_verify_alike(project, monkeypatch):
    monkeypatch.chdir(project)
    by_keywords = jaxport.verify_artifact("f.jaxport", dims={"b": [2, 5]}, seed=3)
    request = VerifyRequest("f.jaxport", dims={"b": [2, 5]}, seed=3)
    by_request = jaxport.verify_artifact(request)
    assert by_keywords.passed and by_keywords.as_dict() == by_request.as_dict()
    assert [c.dims for c in by_request.cases] == [{"b": 2}, {"b": 5}]
    replaced = verify(request, "model.py:f", seed=4)  # given arguments replace the request's fields
    assert (replaced.seed, replaced.functions[0].against) == (4, "model.py:f")
    assert request.seed == 3 and request.against is None


def test_the_facade_checks_each_option_by_its_type():
    cases = [({"seed": "1"}, "seed must be int, not str"),
             ({"allow_custom_calls": "t"}, "allow_custom_calls must be an iterable (list or tuple) or None, not str"),
             ({"platforms": "cpu"}, "platforms must be a list or None, not str"),
             ({"progress": 3}, "progress must be a callable or None, not int")]
    for options, message in cases:
        with pytest.raises(TypeError, match=f"^{re.escape('jaxport.verify_artifact(): ' + message)}$"):
            jaxport.verify_artifact("f.jaxport", **options)
    with pytest.raises(TypeError, match=r"^jaxport.verify_artifact\(\): got an unexpected keyword argument 'sed'$"):
        jaxport.verify_artifact("f.jaxport", sed=1)
    with pytest.raises(TypeError, match=r"^jaxport.verify_artifact\(\): artifact must be str or os.PathLike or "
                                        r"VerifyRequest, not int$"):
        jaxport.verify_artifact(3)
