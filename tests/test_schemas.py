"""The JSON schemas under specs/schemas agree with what jaxport reads and writes."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

import jaxport
from jaxport import dtypes
from tests.support import EXAMPLES, REPO

SCHEMAS = REPO / "specs" / "schemas"
SPEC_FILES = sorted((REPO / "specs" / "examples").glob("*.yaml")) + sorted(EXAMPLES.glob("*/spec*.yaml"))


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def spec_schema() -> jsonschema.Draft202012Validator:
    return _validator("spec.schema.json")


@pytest.fixture(scope="module")
def manifest_schema() -> jsonschema.Draft202012Validator:
    return _validator("manifest.schema.json")


def _errors(validator: jsonschema.Draft202012Validator, instance: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
            for e in validator.iter_errors(instance)]


def test_there_are_example_specs():
    names = {p.name for p in SPEC_FILES if p.parent.name == "examples"}
    assert {"bounds.yaml", "leaves.yaml", "pytree.yaml", "constraints.yaml", "platforms.yaml",
            "functions.yaml"} <= names


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_example_spec_matches_schema_and_parses(path: Path, spec_schema):
    assert _errors(spec_schema, yaml.safe_load(path.read_text())) == []
    spec = jaxport.load_spec(path)
    assert spec.version == 1
    assert spec.functions


# Specs that the schema and the reader must both refuse.
INVALID_SPECS = {
    "version 2": "jaxport: 2\n",
    "unknown top-level key": "jaxport: 1\ndim: {batch: {min: 1}}\nargs: ['f32[batch]']\n",
    "functions with args": "jaxport: 1\nargs: ['f32[3]']\nfunctions: {f: {args: ['f32[3]']}}\n",
    "bind needs a source": "jaxport: 1\nargs: [{bind: ''}]\n",
    "static mapping": "jaxport: 1\nargs: [{static: {a: 1}}]\n",
    "unknown dtype": "jaxport: 1\nargs: ['f33[3]']\n",
    "long leaf without dtype": "jaxport: 1\nargs: [{shape: [3]}]\n",
    "number as argument": "jaxport: 1\nargs: [3]\n",
    "null argument": "jaxport: 1\nargs: [null]\n",
    "bound below 1": "jaxport: 1\ndims: {b: {min: 0}}\nargs: ['f32[b]']\n",
    "reserved variable name": "jaxport: 1\ndims: {max: {min: 1}}\nargs: ['f32[max]']\n",
    "strict inequality": "jaxport: 1\nargs: ['f32[b]']\nconstraints: ['b > 2']\n",
    "unknown platform": "jaxport: 1\nargs: ['f32[3]']\nplatforms: [gpu]\n",
    "bad artifact name": "jaxport: 1\nargs: ['f32[3]']\nmetadata: {name: ../model}\n",
}


@pytest.mark.parametrize("text", INVALID_SPECS.values(), ids=INVALID_SPECS.keys())
def test_schema_and_reader_refuse_the_same_specs(text: str, spec_schema):
    assert _errors(spec_schema, yaml.safe_load(text)) != []
    with pytest.raises(jaxport.SpecError):
        jaxport.parse_spec(text, "bad.yaml")


def _export_example(example_dir, tmp_path: Path, name: str, entry: str) -> jaxport.ExportResult:
    example_dir(name)
    return jaxport.export(entry, "spec.yaml", output=tmp_path / f"{name}.jaxport")


@pytest.mark.parametrize("name, entry", [("mlp", "model.py:predict"), ("pytree", "model.py:encode")])
def test_exported_manifest_matches_schema(name: str, entry: str, example_dir, tmp_path: Path, manifest_schema):
    result = _export_example(example_dir, tmp_path, name, entry)
    assert _errors(manifest_schema, result.manifest) == []
    with jaxport.open_artifact(result.path) as art:
        assert _errors(manifest_schema, json.loads(art.manifest_bytes)) == []


def test_multi_function_manifest_matches_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest_schema):
    monkeypatch.chdir(tmp_path)
    result = jaxport.export(None, REPO / "specs" / "examples" / "functions.yaml", output=tmp_path / "suite.jaxport")
    assert list(result.manifest["functions"]) == ["predict", "encode"]
    assert _errors(manifest_schema, result.manifest) == []


@pytest.mark.parametrize("name, entry", [("mlp", "model.py:predict"), ("pytree", "model.py:encode")])
def test_sidecar_is_the_manifest_member(name: str, entry: str, example_dir, tmp_path: Path):
    result = _export_example(example_dir, tmp_path, name, entry)
    assert result.manifest_path == tmp_path / f"{name}.jaxport.manifest.json"
    with jaxport.open_artifact(result.path) as art:
        assert result.manifest_path.read_bytes() == art.manifest_bytes
        assert json.loads(art.manifest_bytes) == result.manifest


def test_schema_refuses_fields_it_does_not_describe(example_dir, tmp_path: Path, manifest_schema):
    manifest = _export_example(example_dir, tmp_path, "mlp", "model.py:predict").manifest
    manifest["functions"]["predict"]["inputs"][0]["dtype"] = "float128"
    manifest["functions"]["predict"]["new_field"] = 1
    assert sorted(_errors(manifest_schema, manifest)) == [
        "functions/predict/inputs/0/dtype: 'float128' is not one of ['bool', 'int8', 'int16', 'int32', 'int64', "
        "'uint8', 'uint16', 'uint32', 'uint64', 'bfloat16', 'float16', 'float32', 'float64', 'complex64', "
        "'complex128', 'float8_e4m3fn', 'float8_e5m2', 'int4', 'uint4', 'float4_e2m1fn', 'key<fry>', 'key<rbg>', "
        "'key<urbg>']",
        "functions/predict: Additional properties are not allowed ('new_field' was unexpected)",
    ]


def test_the_schemas_dtype_enums_are_the_dtype_table():
    """A dtype added to (or removed from) ``jaxport.dtypes.TABLE`` must reach the schemas in the same change."""
    manifest = json.loads((SCHEMAS / "manifest.schema.json").read_text())["$defs"]
    spec = json.loads((SCHEMAS / "spec.schema.json").read_text())["$defs"]
    assert manifest["dtype"]["enum"] == [d.name for d in dtypes.TABLE if not d.key]
    assert manifest["input_dtype"]["enum"] == [d.name for d in dtypes.TABLE]
    assert spec["dtype"]["enum"] == dtypes.spellings()
    shapes = [v["pattern"] for v in spec.values() if isinstance(v, dict) and "(key<" in str(v.get("pattern", ""))]
    assert shapes, "the spec schema's shape pattern"
    for pattern in shapes:
        spelled = set(pattern.split("(", 1)[1].split(")\\s*", 1)[0].replace("(?:", "").replace(")", "").split("|"))
        missing = [s for s in dtypes.spellings() if not s.startswith("key") and s not in spelled]
        assert not missing, missing
