"""Every command's ``--json`` output validates against its schema in specs/schemas/cli, errors included; the exit
codes and options are documented in specs/CLI.md exactly as the code defines them."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

import jaxport
from jaxport.artifact.window import compat
from tests.support import EXAMPLES, REPO

JAX = importlib.metadata.version("jax")

#: examples/ci/policy.yaml's max_producer_age_days (60) passes a fresh export only with a JAX at most 60 days behind the
#: newest this jaxport supports: the oldest (make test-compat runs the tests with it) fails it, as the rule means.
FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY = pytest.mark.skipif(
    (compat.dating(JAX).producer_age() or 0) > 60,
    reason=f"jax {JAX} is more than 60 days behind jax {compat.CURRENT.version}: a fresh export fails the example "
           f"policy's max_producer_age_days")

SCHEMAS = REPO / "specs" / "schemas"
CLI_SCHEMAS = SCHEMAS / "cli"
CLI_DOC = (REPO / "specs" / "CLI.md").read_text()
COMMANDS = ("export", "inspect", "call", "verify", "diff", "check", "extract", "compile", "import", "rebind",
            "upgrade", "serve", "sign", "warmup", "target")


def _registry() -> Registry:
    resources = []
    for path in [SCHEMAS / "manifest.schema.json", *sorted(CLI_SCHEMAS.glob("*.schema.json"))]:
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((CLI_SCHEMAS / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema, registry=REGISTRY)


def _errors(name: str, instance: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
            for e in _validator(name).iter_errors(instance)]


def _registered() -> set[str]:
    from jaxport_cli.commands import COMMANDS

    return set(COMMANDS)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A copy of examples/mlp with its artifact (predict), a bound-weights artifact and a policy."""
    d = tmp_path_factory.mktemp("json") / "mlp"
    shutil.copytree(EXAMPLES / "mlp", d)
    with contextlib.chdir(d):
        jaxport.export("model.py:predict", "spec.yaml", output="mlp.jaxport")
        jaxport.export("model.py:apply", "spec-bound.yaml", output="bound.jaxport")
        jaxport.export("model.py:predict", "spec.yaml", output="other.jaxport", version="2.0.0")
    (d / "strict.yaml").write_text("jaxport_policy: 1\nplatforms: {required: [tpu]}\n")
    return d


@pytest.fixture
def cli(work, run_cli, monkeypatch):
    """``jaxport ARGS... --json`` in the work directory: (exit code, parsed stdout)."""
    monkeypatch.chdir(work)

    def run(*args: str) -> tuple[int, object]:
        res = run_cli(*args, "--json")
        return res.exit_code, json.loads(res.stdout)

    return run


def test_every_command_has_a_valid_schema():
    assert {p.name for p in CLI_SCHEMAS.glob("*.schema.json")} == {f"{c}.schema.json" for c in COMMANDS} | {
        "error.schema.json"}
    for path in [*CLI_SCHEMAS.glob("*.schema.json"), SCHEMAS / "policy.schema.json"]:
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"].startswith("urn:jaxport:schema:")


def test_export_json(cli, tmp_path):
    code, out = cli("export", "model.py:predict", "--shapes", "spec.yaml", "-o", str(tmp_path / "x.jaxport"))
    assert code == 0
    assert _errors("export", out) == []
    assert out["manifest"]["functions"]["predict"]["inputs"][0]["shape"] == ["batch", 784]


def test_inspect_json_is_the_manifest(cli, work):
    code, out = cli("inspect", "mlp.jaxport")
    assert code == 0
    assert _errors("inspect", out) == []
    assert out == jaxport.open_artifact(work / "mlp.jaxport").manifest
    broken = dict(out, format="other")
    assert _errors("inspect", broken) == ["format: 'jaxport' was expected"]


def test_call_json(cli):
    code, out = cli("call", "mlp.jaxport", "--random", "--dim", "batch=3", "--print", "--benchmark", "2",
                    "--no-cache")
    assert code == 0
    assert _errors("call", out) == []
    assert out["dims"] == {"batch": 3} and out["benchmark"]["n"] == 2
    code, out = cli("call", "bound.jaxport", "--random", "--no-cache")
    assert code == 0 and _errors("call", out) == []


def test_verify_json_passing_and_failing(cli):
    code, out = cli("verify", "mlp.jaxport", "--dim", "batch=2")
    assert code == 0 and out["passed"] is True
    assert _errors("verify", out) == []
    code, out = cli("verify", "mlp.jaxport", "--against", "model.py:apply", "--dim", "batch=2")
    assert code == 12 and out["passed"] is False
    assert _errors("verify", out) == []
    assert out["cases"][0]["error"].startswith("the live function raised TypeError: ")
    code, out = cli("verify", "bound.jaxport", "--dim", "batch=2,5", "--atol", "0", "--rtol", "0")
    assert code == 0 and _errors("verify", out) == []


def test_diff_json(cli):
    code, out = cli("diff", "mlp.jaxport", "mlp.jaxport", "--fail-on", "any")
    assert code == 0 and out["identical"] is True
    assert _errors("diff", out) == []
    code, out = cli("diff", "mlp.jaxport", "other.jaxport", "--fail-on", "any")
    assert code == 13 and out["failed"] is True
    assert [c["kind"] for c in out["changes"]] == ["metadata_changed"]
    assert _errors("diff", out) == []
    code, out = cli("diff", "mlp.jaxport", "bound.jaxport")
    assert code == 0 and out["breaking"] > 0
    assert _errors("diff", out) == []


def test_upgrade_json(cli, work, tmp_path):
    with contextlib.chdir(work):
        jaxport.export("model.py:predict", "spec.yaml", output=tmp_path / "old.jaxport", for_jax="0.9.1")
    code, out = cli("upgrade", str(tmp_path / "old.jaxport"), "-o", str(tmp_path / "new.jaxport"))
    assert code == 0 and _errors("upgrade", out) == []
    assert (out["old_for_jax"], out["for_jax"], out["compared"]) == ("0.9.1", None, {"predict": 3})
    code, out = cli("upgrade", "mlp.jaxport", "-o", str(tmp_path / "same.jaxport"))
    assert code == 0 and _errors("upgrade", out) == []
    assert out["nothing_to_do"] is True and out["artifact"] == str(tmp_path / "same.jaxport")
    assert out["manifest"]["format_version"] == "1.0"  # the copy's, as it is


@FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY
def test_check_json(cli):
    code, out = cli("check", "mlp.jaxport", "--policy", str(REPO / "examples" / "ci" / "policy.yaml"))
    assert code == 0 and out["passed"] is True
    assert _errors("check", out) == []
    code, out = cli("check", "mlp.jaxport", "--policy", "strict.yaml")
    assert code == 14 and out["passed"] is False
    assert _errors("check", out) == []


def test_extract_json(cli, tmp_path):
    if "extract" not in _registered():
        pytest.skip("the extract command is not registered")
    for args, kind in ((["--payload", "predict", "-o", str(tmp_path / "p.jaxexport")], "payload"),
                       (["--mlir", "predict", "-o", str(tmp_path / "p.mlir")], "mlir"),
                       (["--mlir", "predict", "-o", str(tmp_path / "p.mlirbc")], "mlirbc")):
        code, out = cli("extract", "mlp.jaxport", *args)
        assert code == 0
        assert _errors("extract", out) == []
        assert out["written"][0]["kind"] == kind
        assert out["written"][0]["bytes"] == Path(out["written"][0]["path"]).stat().st_size
    code, out = cli("extract", "bound.jaxport", "--weights", str(tmp_path / "w.npz"))
    assert code == 0 and _errors("extract", out) == []


def test_warmup_json(cli, tmp_path):
    cache = tmp_path / "cache"
    code, out = cli("warmup", "mlp.jaxport", "--dim", "batch=1,3", "--cache-dir", str(cache))
    assert code == 0 and _errors("warmup", out) == []
    assert [s["dims"] for s in out["signatures"]] == [{"batch": 1}, {"batch": 3}]
    assert out["signatures"][1]["inputs"] == {"x": {"shape": [3, 784], "dtype": "float32"}}
    code, again = cli("warmup", "mlp.jaxport", "--dim", "batch=3", "--cache-dir", str(cache))
    assert code == 0 and _errors("warmup", again) == []
    assert again["check"] == {"verdict": "passed", "cache": "fetched"}


def test_sign_json(cli, work, tmp_path):
    pytest.importorskip("model_signing", reason="jaxport sign needs the extra jaxport[sign]")
    from tests.sign.keys import key_pair

    art = tmp_path / "mlp.jaxport"
    shutil.copy(work / "mlp.jaxport", art)
    private, _ = key_pair(tmp_path, "ci")
    code, out = cli("sign", str(art), "--key", str(private))
    assert code == 0 and _errors("sign", out) == []
    assert (out["signature"], out["method"]) == (f"{art}.sig", "key")
    assert out["sha256"] == hashlib.sha256(art.read_bytes()).hexdigest()


ERRORS = [
    (["inspect", "missing.jaxport"], 7, "format"),
    (["call", "mlp.jaxport", "-i", "nothing.npy", "--no-cache"], 9, "input"),
    (["call", "mlp.jaxport", "--random", "--dim", "batch=0", "--no-cache"], 2, "usage"),
    (["export", "model.py:predict", "--shapes", "missing.yaml"], 3, "spec"),
    (["verify", "mlp.jaxport", "--platform", "tpu"], 10, "platform"),
    (["verify", "mlp.jaxport", "--against", "nowhere.py:f"], 4, "entrypoint"),
    (["diff", "mlp.jaxport", "missing.jaxport"], 7, "format"),
    (["check", "mlp.jaxport", "--policy", "missing.yaml"], 2, "policy-file"),
    (["inspect", "mlp.jaxport", "--function", "nope"], 2, "usage"),
]


@pytest.mark.parametrize("args, code, kind", ERRORS, ids=[" ".join(a[:3]) for a, _, _ in ERRORS])
def test_error_object(args, code, kind, cli):
    got, out = cli(*args)
    assert got == code
    assert _errors("error", out) == []
    assert (out["error"]["kind"], out["error"]["exit_code"]) == (kind, code)


def test_schemas_refuse_fields_they_do_not_list(cli):
    _, out = cli("check", "mlp.jaxport", "--policy", "strict.yaml")
    out["surprise"] = 1
    assert _errors("check", out) == ["(top level): Additional properties are not allowed ('surprise' was unexpected)"]


# --- the documentation ---------------------------------------------------------------------------------------------


def _exit_code_table(text: str) -> dict[str, int]:
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    found: dict[str, int] = {}
    for line in section.splitlines():
        m = re.match(r"^\| (\d+) \| [^|]* \| ([^|]*) \|", line)
        if m:
            for name in re.findall(r"`(\w+)`", m.group(2)):
                found[name] = int(m.group(1))
    return found


def test_cli_doc_exit_codes_are_the_code_s():
    from jaxport_cli.errors import EXIT_CODES

    assert _exit_code_table(CLI_DOC) == {cls.__name__: code for cls, code in EXIT_CODES}
    readme = (REPO / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    readme_codes = {int(m) for m in re.findall(r"^\| (\d+) \|", readme, re.M)}
    assert readme_codes == {0, 1} | set(code for _, code in EXIT_CODES)


@pytest.mark.parametrize("name", COMMANDS)
def test_cli_doc_lists_every_option(name):
    if name not in _registered():
        pytest.skip(f"the {name} command is not registered")
    import click
    from jaxport_cli.main import cli

    command = cli.get_command(click.Context(cli), name)
    section = CLI_DOC.split(f"## `jaxport {name}`", 1)[1].split("\n## ", 1)[0]
    missing = [opt for p in command.params if isinstance(p, click.Option) for opt in p.opts
               if opt.startswith("--") and f"`{opt}" not in section and opt != "--help"]
    assert missing == []
    assert f"schemas/cli/{name}.schema.json" in CLI_DOC
