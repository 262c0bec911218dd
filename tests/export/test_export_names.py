"""Function names independent of the Python name (``name:``, ``export --name``), and input ranges (``range:``) as
the spec declares them and the manifest records and validates them."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact, write_artifact
from jaxport.errors import FormatError, SpecError
from jaxport.spec import parse_spec

MODEL_F = "import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x) * 2\n"
MODEL_G = MODEL_F.replace("def f(", "def g(")
SPEC = "jaxport: 1\nname: model\ndims: {b: {max: 16}}\nargs: ['f32[b, 3]']\n"


def _write(d: Path, model: str, spec: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.py").write_text(model)
    (d / "spec.yaml").write_text(spec)
    return d


def _manifest(path: Path) -> dict:
    with open_artifact(path) as art:
        return art.manifest


def test_spec_name_names_the_function(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(_write(tmp_path / "a", MODEL_F, SPEC))
    res = run_cli("export", "model.py:f", "-s", "spec.yaml")
    assert res.exit_code == 0, res.stderr
    assert "  model(x: f32[b, 3]) -> f32[b, 3]   where 1 <= b <= 16" in res.stdout
    m = _manifest(tmp_path / "a" / "model.jaxport")  # the artifact is named after the function
    assert list(m["functions"]) == ["model"] and m["metadata"]["name"] == "model"
    assert m["functions"]["model"]["entrypoint"] == "model.py:f"
    assert m["functions"]["model"]["payload"] == "functions/model.jaxexport"
    assert list(json.loads(run_cli("inspect", "model.jaxport", "--json").stdout)["functions"]) == ["model"]
    res = run_cli("call", "model.jaxport", "--function", "model", "--random", "--dim", "b=2", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["function"] == "model"
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(jaxport.load("model.jaxport")(x), np.sin(x) * 2, rtol=1e-6)
    res = run_cli("verify", "model.jaxport", "--dim", "b=2")
    assert res.exit_code == 0, res.stdout + res.stderr


def test_renamed_python_function_gives_the_same_program(tmp_path, monkeypatch):
    """The program and the manifest do not depend on the Python function's name; the bytes neither, without source
    locations (JAX 0.12.1 and later record the function's name in each operation's location, as its line)."""
    paths = []
    for d, model, entry in (("a", MODEL_F, "model.py:f"), ("b", MODEL_G, "model.py:g")):
        monkeypatch.chdir(_write(tmp_path / d, model, SPEC))
        paths.append(jaxport.export(entry, "spec.yaml", output=tmp_path / d / "m.jaxport", strip_locations=True).path)
    payloads = [zipfile.ZipFile(p).read("functions/model.jaxexport") for p in paths]
    assert hashlib.sha256(payloads[0]).hexdigest() == hashlib.sha256(payloads[1]).hexdigest()
    for payload in payloads:
        exported = jax.export.deserialize(bytearray(payload))
        assert exported.fun_name == "model"
        assert "module @jit_model" in exported.mlir_module()
    a, b = (_manifest(p) for p in paths)
    assert (a["functions"]["model"]["entrypoint"], b["functions"]["model"]["entrypoint"]) == ("model.py:f",
                                                                                              "model.py:g")
    a["functions"]["model"].pop("entrypoint")
    b["functions"]["model"].pop("entrypoint")
    assert a["functions"] == b["functions"]


def test_name_option_names_the_function_and_the_artifact(tmp_path, monkeypatch):
    monkeypatch.chdir(_write(tmp_path, MODEL_F, "jaxport: 1\nargs: ['f32[3]']\nmetadata: {name: spec-name}\n"))
    m = jaxport.export("model.py:f", "spec.yaml", output="a.jaxport", name="model").manifest
    assert list(m["functions"]) == ["model"] and m["metadata"]["name"] == "model"
    # --name replaces the spec's name: too
    (tmp_path / "named.yaml").write_text(SPEC)
    m = jaxport.export("model.py:f", "named.yaml", output="b.jaxport", name="other").manifest
    assert list(m["functions"]) == ["other"] and m["metadata"]["name"] == "other"
    # an artifact name that is not an identifier names the artifact only (as --name always did)
    m = jaxport.export("model.py:f", "named.yaml", output="c.jaxport", name="model-v2.1").manifest
    assert list(m["functions"]) == ["model"] and m["metadata"]["name"] == "model-v2.1"
    m = jaxport.export("model.py:f", "spec.yaml", output="d.jaxport", name="my-model").manifest
    assert list(m["functions"]) == ["f"] and m["metadata"]["name"] == "my-model"
    # without --name: metadata.name names the artifact, name: (else the Python name) the function
    (tmp_path / "both.yaml").write_text(SPEC + "metadata: {name: encoder}\n")
    m = jaxport.export("model.py:f", "both.yaml", output="e.jaxport").manifest
    assert list(m["functions"]) == ["model"] and m["metadata"]["name"] == "encoder"


def test_name_option_does_not_rename_functions_of_a_multi_function_spec(tmp_path, monkeypatch):
    spec = "jaxport: 1\nfunctions:\n  enc: {entrypoint: model.py:f, args: ['f32[3]']}\n"
    monkeypatch.chdir(_write(tmp_path, MODEL_F, spec))
    m = jaxport.export(None, "spec.yaml", output="a.jaxport", name="bundle").manifest
    assert list(m["functions"]) == ["enc"] and m["metadata"]["name"] == "bundle"
    assert jax.export.deserialize(bytearray(zipfile.ZipFile("a.jaxport").read("functions/enc.jaxexport"))) \
        .fun_name == "enc"


@pytest.mark.parametrize(("text", "message"), [
    ("jaxport: 1\nname: 3d\nargs: ['f32[3]']\n",
     "spec.yaml:2: name: '3d' is not a valid function name: use letters, digits and '_', not starting with a digit "
     "(at most 256 characters)."),
    ("jaxport: 1\nname: my-model\nargs: ['f32[3]']\n",
     "spec.yaml:2: name: 'my-model' is not a valid function name: use letters, digits and '_', not starting with a "
     "digit (at most 256 characters)."),
    ("jaxport: 1\nname: [a]\nargs: ['f32[3]']\n",
     "spec.yaml:2: name: ['a'] is not a valid function name: use letters, digits and '_', not starting with a digit "
     "(at most 256 characters)."),
    ("jaxport: 1\nname: model\nfunctions:\n  f: {args: []}\n",
     "spec.yaml:2: with 'functions:', each function is named by its key there; remove the top-level 'name'."),
])
def test_name_errors(text, message):
    with pytest.raises(SpecError) as e:
        parse_spec(text, "spec.yaml")
    assert str(e.value) == message


def test_cli_name_error_exit_code(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(_write(tmp_path, MODEL_F, "jaxport: 1\nname: 1x\nargs: ['f32[3]']\n"))
    res = run_cli("export", "model.py:f", "-s", "spec.yaml")
    assert (res.exit_code, res.stderr) == (3, "error[spec]: spec.yaml:2: name: '1x' is not a valid function name: "
                                              "use letters, digits and '_', not starting with a digit (at most 256 "
                                              "characters).\n")
    assert not list(tmp_path.glob("*.jaxport"))


# --- input ranges ---------------------------------------------------------------------------------------------

TOKENS = "import jax.numpy as jnp\n\n\ndef f(tok, scale):\n    return jnp.take(jnp.arange(32.0), tok) * scale\n"
RANGE_SPEC = """jaxport: 1
dims: {b: {max: 8}}
args:
  - {shape: [b], dtype: i32, range: [0, 32]}
  - {shape: [], dtype: f32, range: [0.5, 2]}
"""


def test_ranges_are_parsed_and_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(_write(tmp_path, TOKENS, RANGE_SPEC))
    spec = jaxport.load_spec("spec.yaml")
    tok, scale = spec.functions[None].args
    assert (tok.range, scale.range) == ((0, 32), (0.5, 2.0))
    assert isinstance(tok.range[1], int) and isinstance(scale.range[0], float)
    m = jaxport.export("model.py:f", "spec.yaml", output="a.jaxport").manifest
    inputs = m["functions"]["f"]["inputs"]
    assert [i["range"] for i in inputs] == [[0, 32], [0.5, 2.0]]
    raw = json.loads(Path("a.jaxport.manifest.json").read_text())
    assert json.dumps(raw["functions"]["f"]["inputs"][0]["range"]) == "[0, 32]"  # integers for an integer dtype
    assert _manifest(tmp_path / "a.jaxport")["functions"]["f"]["inputs"][1]["range"] == [0.5, 2.0]
    # no range declared: no key
    (tmp_path / "plain.yaml").write_text("jaxport: 1\nargs: ['i32[4]', 'f32[]']\n")
    m = jaxport.export("model.py:f", "plain.yaml", output="b.jaxport").manifest
    assert all("range" not in i for i in m["functions"]["f"]["inputs"])


@pytest.mark.parametrize(("leaf", "message"), [
    ("{shape: [3], dtype: bool, range: [0, 1]}",
     "args[0].range: a bool input takes no range (its values are false and true); remove 'range'."),
    ("{shape: [3], dtype: i32, range: [5, 5]}",
     "args[0].range: LO 5 is not below HI 5; the range is half-open [LO, HI), so give LO < HI ([0, 10] is 0..9)."),
    ("{shape: [3], dtype: f32, range: [1.0, 0.5]}",
     "args[0].range: LO 1.0 is not below HI 0.5; the range is half-open [LO, HI), so give LO < HI."),
    ("{shape: [3], dtype: f32, range: [.nan, 1]}", "args[0].range: LO must be a finite number, found nan."),
    ("{shape: [3], dtype: f32, range: [0, .inf]}", "args[0].range: HI must be a finite number, found inf."),
    ("{shape: [3], dtype: u8, range: [0, 257]}",
     "args[0].range: [0, 257) does not fit uint8, whose values are 0..255; give LO >= 0 and HI <= 256."),
    ("{shape: [3], dtype: i8, range: [-129, 0]}",
     "args[0].range: [-129, 0) does not fit int8, whose values are -128..127; give LO >= -128 and HI <= 128."),
    ("{shape: [3], dtype: i32, range: [0, 2.5]}",
     "args[0].range: int32 values are integers, but HI is 2.5; give whole numbers."),
    ("{shape: [3], dtype: f32, range: [0, a]}",
     "args[0].range: HI must be a number, found 'a'; write [LO, HI] such as [0, 1]."),
    ("{shape: [3], dtype: f32, range: [0, true]}",
     "args[0].range: HI must be a number, found True; write [LO, HI] such as [0, 1]."),
    ("{shape: [3], dtype: f32, range: [0, 1, 2]}",
     "args[0].range: must be a list of two numbers [LO, HI], such as [0, 32000], found [0, 1, 2]."),
    ("{shape: [3], dtype: f32, range: 1}",
     "args[0].range: must be a list of two numbers [LO, HI], such as [0, 32000], found 1."),
])
def test_range_errors(leaf, message):
    with pytest.raises(SpecError) as e:
        parse_spec(f"jaxport: 1\nargs:\n  - {leaf}\n", "spec.yaml")
    assert str(e.value) == f"spec.yaml:3: {message}"


def test_token_range_bounds():
    spec = parse_spec("jaxport: 1\nargs:\n  - {shape: [b, t], dtype: i32, range: [0, 32000]}\n"
                      "  - {shape: [2], dtype: u8, range: [0, 256]}\n  - {shape: [2], dtype: i64, range: [3.0, 4]}\n")
    assert [a.range for a in spec.functions[None].args] == [(0, 32000), (0, 256), (3, 4)]


@pytest.mark.parametrize(("value", "message"), [
    ([0, 32, 1], "has 3 entries; at most 2 are allowed"),
    ([0], "expected [LO, HI], found 1 entry"),
    ([4, 4], "LO 4 is not below HI 4"),
    ([0.0, 32], "expected two integers for a int32 input"),
    ([0, 1 << 40], "[0, 1099511627776) does not fit int32, whose values are -2147483648..2147483647"),
    (["0", 1], "expected two integers for a int32 input"),
    ("0:32", "expected a list, found str"),
])
def test_the_manifest_reader_refuses_a_bad_range(tmp_path, monkeypatch, run_cli, value, message):
    monkeypatch.chdir(_write(tmp_path, TOKENS, RANGE_SPEC))
    jaxport.export("model.py:f", "spec.yaml", output="a.jaxport")
    with open_artifact("a.jaxport") as art:
        m = art.manifest
        members = {n: art.read(n) for n in art.members if n != "manifest.json"}
    m["functions"]["f"]["inputs"][0]["range"] = value
    write_artifact(tmp_path / "bad.jaxport", m, members)
    with pytest.raises(FormatError) as e:
        open_artifact(tmp_path / "bad.jaxport")
    assert str(e.value).endswith(f"manifest.json: functions['f'].inputs[0].range: {message}")
    res = run_cli("inspect", "bad.jaxport")
    assert res.exit_code == 7 and res.stderr.count("\n") == 1
    # a range on a bool input
    m["functions"]["f"]["inputs"][0].update(dtype="bool", range=[0, 1])
    write_artifact(tmp_path / "bool.jaxport", m, members)
    with pytest.raises(FormatError, match=r"inputs\[0\]\.range: a bool input takes no range"):
        open_artifact(tmp_path / "bool.jaxport")


def test_manifest_with_ranges_names_and_binds_matches_the_schema(tmp_path, monkeypatch):
    import jsonschema

    from tests.support import EXAMPLES, REPO

    schema = json.loads((REPO / "specs" / "schemas" / "manifest.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    monkeypatch.chdir(_write(tmp_path, TOKENS, RANGE_SPEC.replace("jaxport: 1\n", "jaxport: 1\nname: lookup\n")))
    m = jaxport.export("model.py:f", "spec.yaml", output="a.jaxport").manifest
    assert list(m["functions"]) == ["lookup"]
    assert [e.message for e in validator.iter_errors(m)] == []
    m = jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml", output="b.jaxport",
                       bind={"params": str(EXAMPLES / "mlp" / "params.safetensors")}).manifest
    assert m["source"]["binds"] == {"params": "params.safetensors"}
    assert [e.message for e in validator.iter_errors(m)] == []
