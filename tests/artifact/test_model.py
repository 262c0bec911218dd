"""The format's records (``jaxport.artifact.model``): ``validate`` builds them, ``to_json`` gives back the manifest
key for key, and they hold exactly the fields of ``specs/schemas/manifest.schema.json``."""

from __future__ import annotations

import copy
import json
import zipfile

import pytest

from jaxport.artifact import container, manifest, model
from jaxport.artifact.bounds import Bounds
from tests.support import REPO

GOLDEN = sorted((REPO / "tests" / "golden").glob("*/*.jaxport"))
SCHEMA = json.loads((REPO / "specs" / "schemas" / "manifest.schema.json").read_text())


def _golden(name: str) -> dict:
    return json.loads(zipfile.ZipFile(REPO / "tests" / "golden" / "1.0" / name).read("manifest.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_records_give_back_the_golden_manifests_byte_for_byte(path):
    raw = zipfile.ZipFile(path).read("manifest.json")
    assert container.manifest_bytes(manifest.validate(json.loads(raw))) == raw


def _every_field() -> dict:
    """A manifest using every optional field of the format: a sharded function with bound weights, PartitionSpecs,
    an input range, command-line binds, a spec digest, metadata keys in a spec's order, every output-tree node."""
    m = _golden("mlp-bound.jaxport")
    m["metadata"] = {"name": "every", "labels": {"team": "x"}, "version": "2", "description": None}
    m["source"] = {"spec": "spec.yaml", "spec_sha256": "ab" * 32, "binds": {"params": "params.npz"}}
    (f,) = m["functions"].values()
    f["nr_devices"] = 4
    f["mesh"] = {"axis_names": ["data", "model"], "axis_sizes": [2, 2]}
    f["weights_partition_specs"] = {n: (["model"] if i % 2 else None) for i, n in enumerate(f["weights"])}
    f["inputs"][0]["partition_spec"] = ["data", None]
    f["inputs"][0]["range"] = [-1.5, 2]
    f["outputs"][0]["partition_spec"] = [["data", "model"]]
    f["output_tree"] = {"tuple": [{"output": 0}, {"none": True}, {"list": []}, {"dict": {}},
                                  {"node": "Out", "children": []}]}
    f["custom_calls"] = [{"target": "shape_assertion", "count": 2, "stability": "guaranteed"}]
    f["effects"] = {"ordered": ["E"], "unordered": []}
    f["vjp_order"] = 2
    f["signature"]["kwargs"] = {"scale": {"static": [1, [2.5, None], "s", True]}}
    f["embedded_constants"] = {"count": 3, "bytes": 40,
                               "largest": [{"type": "tensor<8xf32>", "bytes": 32, "location": "m.py:1:2"}]}
    return m


def test_records_give_back_every_optional_field():
    m = _every_field()
    typed = manifest.validate(copy.deepcopy(m))
    assert json.dumps(typed.to_json()) == json.dumps(m)
    f = typed.functions["apply"]
    assert f.mesh == model.Mesh(("data", "model"), (2, 2))
    assert f.inputs[0].partition_spec == ("data", None) and f.inputs[0].range == (-1.5, 2)
    assert f.outputs[0].partition_spec == (("data", "model"),)
    assert f.output_tree is not None and [c.kind for c in f.output_tree.value] == \
        ["output", "none", "list", "dict", "node"]
    assert f.signature.kwargs["scale"] == model.CallNode("static", [1, [2.5, None], "s", True])
    assert typed.metadata.key_order == ("name", "labels", "version", "description")
    assert typed.source.binds == {"params": "params.npz"}


def test_absent_optional_fields_read_as_the_format_says():
    m = _golden("encoder.jaxport")
    (f,) = m["functions"].values()
    for k in ("signature", "dims", "output_tree", "kept_inputs", "nr_devices", "vjp_order", "x64", "entrypoint"):
        f.pop(k)
    m.pop("metadata")
    typed = manifest.validate(m)
    g = typed.functions["encode"]
    assert (g.nr_devices, g.vjp_order, g.x64, g.entrypoint, g.output_tree, g.kept_inputs, dict(g.dims)) == \
        (1, 0, False, None, None, None, {})
    # without a call tree, the inputs are the positional arguments in order
    assert g.signature.args == tuple(model.CallNode("input", i, a.name) for i, a in enumerate(g.inputs))
    assert typed.metadata == model.Metadata(key_order=())
    assert typed.weights is None and dict(typed.tensors) == {}


def test_a_dimension_variable_holds_its_bounds():
    typed = manifest.validate(_golden("encoder.jaxport"))
    dims = typed.functions["encode"].dims
    assert dims["batch"].bounds == Bounds(1, 4096) and dims["h"].bounds == Bounds(2, None)
    assert dims["batch"].derived_from == model.Derivation("x", 0, "batch")


def test_records_are_frozen():
    typed = manifest.validate(_golden("encoder.jaxport"))
    with pytest.raises(AttributeError, match="cannot assign to field 'shape'"):
        typed.functions["encode"].inputs[0].shape = (1,)  # type: ignore[misc]
    changed = model.replace(typed.functions["encode"], vjp_order=1)
    assert (changed.vjp_order, typed.functions["encode"].vjp_order) == (1, 0)


# --- the records and the schema agree field by field ---------------------------------------------------------------

DEFS = SCHEMA["$defs"]
FUNCTION = DEFS["function"]["properties"]
#: Each record, and the schema object whose properties are its fields.
OBJECTS = {
    model.Manifest: SCHEMA,
    model.Producer: SCHEMA["properties"]["producer"],
    model.Metadata: SCHEMA["properties"]["metadata"],
    model.Source: SCHEMA["properties"]["source"],
    model.MemberInfo: SCHEMA["properties"]["members"]["additionalProperties"],
    model.Weights: SCHEMA["properties"]["weights"],
    model.StoredTensor: SCHEMA["properties"]["weights"]["properties"]["tensors"]["additionalProperties"],
    model.Function: DEFS["function"],
    model.Input: DEFS["input"],
    model.Output: DEFS["output"],
    model.Signature: FUNCTION["signature"],
    model.Derivation: FUNCTION["dims"]["additionalProperties"]["properties"]["derived_from"],
    model.CustomCall: FUNCTION["custom_calls"]["items"],
    model.Effects: FUNCTION["effects"],
    model.EmbeddedConstants: FUNCTION["embedded_constants"],
    model.Constant: FUNCTION["embedded_constants"]["properties"]["largest"]["items"],
    model.Mesh: FUNCTION["mesh"],
    model.UpgradedFrom: SCHEMA["properties"]["producer"]["properties"]["upgraded_from"],
}
#: Record fields that hold several schema properties, and fields that are not the format's.
COMBINED = {(model.DimVar, "bounds"): {"min", "max"}}
NOT_IN_FORMAT = {(model.Metadata, "key_order")}


def _fields(record: type) -> dict[str, str]:
    """A record's fields and their annotations (strings: the module uses ``from __future__ import annotations``)."""
    return {n: record.__annotations__[n] for n in record.__match_args__}  # type: ignore[attr-defined]


def _properties(record: type, fields: dict[str, str]) -> set[str]:
    out: set[str] = set()
    for name in fields:
        if (record, name) not in NOT_IN_FORMAT:
            out |= COMBINED.get((record, name), {name})
    return out


@pytest.mark.parametrize("record", [*OBJECTS, model.DimVar], ids=lambda r: r.__name__)
def test_a_record_has_exactly_the_fields_of_its_schema_object(record):
    schema = OBJECTS.get(record) or FUNCTION["dims"]["additionalProperties"]
    fields = _fields(record)
    assert _properties(record, fields) == set(schema["properties"])
    for name, annotation in fields.items():
        prop = schema["properties"].get(name, {})
        if prop.get("type") == "array" and "prefixItems" not in prop:  # a list: a tuple of its items
            assert annotation.startswith("tuple[") and annotation.replace(" | None", "").endswith(", ...]"), name
        if prop.get("type") == "object" and "additionalProperties" in prop and "properties" not in prop:
            assert annotation.startswith("Mapping[str, "), name  # an object keyed by names


def test_every_schema_object_of_the_manifest_has_its_record():
    """Every object the schema describes with named properties is a record above (or a call/output-tree node)."""
    covered = {id(s) for s in OBJECTS.values()} | {id(FUNCTION["dims"]["additionalProperties"])}
    found = []

    def visit(node, path):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "oneOf" not in node:
                found.append((path, id(node) in covered))
            for k, v in node.items():
                if k not in ("call_node", "positional_node", "output_node", "static_value"):
                    visit(v, f"{path}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                visit(v, f"{path}/{i}")

    visit(SCHEMA, "")
    assert [p for p, ok in found if not ok] == []


def test_the_tree_node_kinds_are_the_schemas():
    call = {next(iter(o["required"])) for o in DEFS["call_node"]["oneOf"]}
    output = {next(iter(o["required"])) for o in DEFS["output_node"]["oneOf"]}
    assert set(model.NODE_KINDS) == call and set(model.OUTPUT_KINDS) == output
    node = next(o for o in DEFS["output_node"]["oneOf"] if o["required"] == ["node"])
    assert set(node["properties"]) == {"node", "children", "module", "keys"}  # type_name, value, module, keys
