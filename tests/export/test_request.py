"""``jaxport.ExportRequest`` and ``jaxport.ImportRequest``: the options of ``export`` and ``import`` in one record
each, which the command line's option groups build, ``jaxport.export`` and ``jaxport.import_stablehlo`` take as
``request=`` or as keywords (checked with the messages the keywords always had), and the pipelines read."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from jaxport_cli.requests import EXPORT_REQUEST, IMPORT_REQUEST

import jaxport
from jaxport.errors import UsageError

SPEC = {"jaxport": 1, "args": ["f32[3]"]}
FOREIGN = Path(__file__).resolve().parents[1] / "foreign"


def scale(x):
    return x * 2.0


def test_a_request_gives_the_bytes_its_keywords_give(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = {"name": "scaled", "version": "3", "platforms": ["cpu"], "strip_locations": True, "vjp_order": 1}
    by_keywords = jaxport.export(scale, SPEC, **options).to_bytes()
    request = jaxport.ExportRequest(**options)
    assert jaxport.export(scale, SPEC, request=request).to_bytes() == by_keywords
    # keywords replace the request's fields
    assert jaxport.export(scale, SPEC, request=dataclasses.replace(request, version="9"), version="3").to_bytes() \
        == by_keywords


def test_a_request_is_frozen_and_normalised():
    request = jaxport.ExportRequest(platforms=("cpu",), allow_custom_calls=["a"], bind={"params": "w.npz"})
    assert (request.platforms, request.allow_custom_calls, dict(request.bind)) == (["cpu"], ("a",),
                                                                                  {"params": "w.npz"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        request.bind["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        jaxport.ExportRequest("cpu")  # type: ignore[misc]  # every field by keyword


@pytest.mark.parametrize(("call", "message"), [
    (lambda: jaxport.export(scale, SPEC, platforms=3),
     "jaxport.export(): platforms must be a list or None, not int"),
    (lambda: jaxport.export(scale, SPEC, vjp_order=True),
     "jaxport.export(): vjp_order must be int or None, not bool"),
    (lambda: jaxport.export(scale, SPEC, bind=["w.npz"]),
     "jaxport.export(): bind must be a mapping (dict) or None, not list"),
    (lambda: jaxport.export(scale, SPEC, root=3),
     "jaxport.export(): root must be str or os.PathLike or None, not int"),
    (lambda: jaxport.export(scale, SPEC, nope=1), "jaxport.export(): got an unexpected keyword argument 'nope'"),
    (lambda: jaxport.export(scale, SPEC, request=3),
     "jaxport.export(): request must be ExportRequest or None, not int"),
    (lambda: jaxport.ExportRequest(strip_locations="yes"),  # type: ignore[arg-type]
     "jaxport.ExportRequest(): strip_locations must be bool, not str"),
    (lambda: jaxport.import_stablehlo("m.mlir", bind={}),
     "jaxport.import_stablehlo(): got an unexpected keyword argument 'bind'"),
    (lambda: jaxport.import_stablehlo("m.mlir", calling_convention="9"),
     "jaxport.import_stablehlo(): calling_convention must be int or None, not str"),
    (lambda: jaxport.ImportRequest(function=3),  # type: ignore[arg-type]
     "jaxport.ImportRequest(): function must be str or None, not int"),
])
def test_wrong_types_name_the_option(call, message):
    with pytest.raises(UsageError, match=f"^{re.escape(message)}$") as e:
        call()
    assert isinstance(e.value, TypeError)


def test_the_rules_keep_their_messages(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=re.escape("--root absent: not a directory; give the directory")):
        jaxport.export(scale, SPEC, root="absent")
    with pytest.raises(jaxport.SpecError, match=re.escape("--platform: unknown platform 'gpu'.")):
        jaxport.export(scale, SPEC, request=jaxport.ExportRequest(platforms=["gpu"]))
    with pytest.raises(UsageError, match=re.escape("--bind a/b: not a parameter name;")):
        jaxport.export(scale, SPEC, bind={"a/b": np.zeros(3, np.float32)})


def test_import_takes_a_request_or_its_keywords(tmp_path, monkeypatch):
    shutil.copy(FOREIGN / "scale_rows.mlir", tmp_path)
    shutil.copy(FOREIGN / "scale_rows.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    by_keywords = jaxport.import_stablehlo("scale_rows.mlir", "scale_rows.yaml", function="rows", version="2")
    request = jaxport.ImportRequest(function="rows", version="2")
    by_request = jaxport.import_stablehlo("scale_rows.mlir", "scale_rows.yaml", request=request)
    assert by_request.to_bytes() == by_keywords.to_bytes()
    assert list(by_request.manifest["functions"]) == ["rows"]


@pytest.mark.parametrize(("record", "fields"), [(jaxport.ExportRequest, EXPORT_REQUEST),
                                                (jaxport.ImportRequest, IMPORT_REQUEST)])
def test_every_field_of_a_request_has_its_command_line_option(record, fields):
    assert sorted(f[0] for f in fields) == sorted(f.name for f in dataclasses.fields(record))


def test_the_command_builds_the_request(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text("def scale(x):\n    return x * 2.0\n")
    Path("spec.yaml").write_text("jaxport: 1\nargs: ['f32[3]']\n")
    res = run_cli("export", "model.py:scale", "-s", "spec.yaml", "-o", "cli.jaxport", "--name", "scaled",
                  "--version", "3", "--platform", "cpu", "--strip-locations", "--no-manifest", "--vjp-order", "1")
    assert res.exit_code == 0, res.stderr
    api = jaxport.export("model.py:scale", "spec.yaml", name="scaled", version="3", platforms=["cpu"],
                         strip_locations=True, vjp_order=1)
    assert Path("cli.jaxport").read_bytes() == api.to_bytes()
    assert not Path("cli.jaxport.manifest.json").exists()
