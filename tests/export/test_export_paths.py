"""Recorded paths: the same bytes from any directory (paths relative to the export root), command-line binds that
``verify`` reproduces, and the root ``verify`` finds (``--root``, the current directory, ``--shapes``, a search for
the recorded spec by its sha256)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.artifact import model
from jaxport.artifact.container import open_artifact
from jaxport.errors import UsageError
from jaxport.verify import recorded
from tests.support import EXAMPLES, REPO, load_module

MLP = EXAMPLES / "mlp"


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _manifest(path: Path) -> dict:
    with open_artifact(path) as art:
        return art.manifest


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout-like tree: ``repo/examples/mlp`` (a copy of the example), and a decoy ``repo/examples/other``
    whose spec.yaml and model.py are different files of the same names."""
    root = tmp_path / "repo"
    shutil.copytree(MLP, root / "examples" / "mlp")
    other = root / "examples" / "other"
    other.mkdir()
    (other / "spec.yaml").write_text("jaxport: 1\nargs: ['f32[3]']\n")
    (other / "model.py").write_text("def predict(x):\n    return x\n")
    return root


def test_one_function_exported_from_three_directories_is_byte_identical(repo, tmp_path, run_cli, monkeypatch):
    outs = tmp_path / "outs"
    outs.mkdir()
    runs = [  # (current directory, entry point, spec)
        (repo, "examples/mlp/model.py:predict", "examples/mlp/spec.yaml"),  # the repository root
        (repo / "examples" / "mlp", "model.py:predict", "spec.yaml"),  # the example's directory
        (Path("/tmp"), f"{repo}/examples/mlp/model.py:predict", f"{repo}/examples/mlp/spec.yaml"),  # elsewhere
        (REPO, "examples/mlp/model.py:predict", "examples/mlp/spec.yaml"),  # the real checkout
    ]
    digests = []
    for i, (cwd, entry, spec) in enumerate(runs):
        monkeypatch.chdir(cwd)
        res = run_cli("export", entry, "--shapes", spec, "-o", outs / f"{i}.jaxport")
        assert res.exit_code == 0, res.stderr
        assert res.stderr == ""  # nothing lies outside the root: no warning
        digests.append((_sha(outs / f"{i}.jaxport"), _sha(outs / f"{i}.jaxport.manifest.json")))
    assert len(set(digests)) == 1, digests
    m = _manifest(outs / "0.jaxport")
    assert m["source"] == {"spec": "spec.yaml", "spec_sha256": _sha(MLP / "spec.yaml")}
    assert m["functions"]["predict"]["entrypoint"] == "model.py:predict"
    for blob in (outs / "0.jaxport").read_bytes(), (outs / "0.jaxport.manifest.json").read_bytes():
        assert str(tmp_path).encode() not in blob and b"examples" not in blob


def test_verify_finds_the_live_function_from_the_repo_root_and_the_spec_directory(repo, tmp_path, run_cli,
                                                                                   monkeypatch):
    art = tmp_path / "mlp.jaxport"
    monkeypatch.chdir(repo)
    assert run_cli("export", "examples/mlp/model.py:predict", "-s", "examples/mlp/spec.yaml", "-o", art).exit_code == 0
    # from the repository root: the recorded spec.yaml is not there; the search finds examples/mlp/spec.yaml by its
    # sha256 (not examples/other/spec.yaml, which has the same name)
    res = run_cli("verify", art, "--dim", "batch=3", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] and report["spec"]["path"] == "spec.yaml" and report["spec"]["differences"] == []
    assert report["notes"] == [
        "recorded paths are followed under examples/mlp, where the spec the artifact was exported from (spec.yaml) "
        "was found by its sha256 (choose another root with --root DIR)"]
    assert [f["against"] for f in report["functions"]] == ["model.py:predict"]
    # from the spec's directory: the recorded paths resolve in the current directory, no note
    monkeypatch.chdir(repo / "examples" / "mlp")
    res = run_cli("verify", art, "--dim", "batch=3", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] and report["notes"] == [] and report["spec"]["differences"] == []
    # from the decoy's directory, whose spec.yaml has another sha256 and nothing below it, --root says where
    monkeypatch.chdir(repo / "examples" / "other")
    res = run_cli("verify", art, "--dim", "batch=3", "--root", repo / "examples" / "mlp", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["notes"] == []


def test_verify_root_from_shapes_and_explicit_root(repo, tmp_path, run_cli, monkeypatch):
    art = tmp_path / "mlp.jaxport"
    monkeypatch.chdir(repo / "examples" / "mlp")
    assert run_cli("export", "model.py:predict", "-s", "spec.yaml", "-o", art).exit_code == 0
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # nothing below: only --shapes or --root can say where the files are
    res = run_cli("verify", art, "--dim", "batch=2", "--shapes", repo / "examples" / "mlp" / "spec.yaml", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["notes"] == [
        f"recorded paths are followed under {repo}/examples/mlp, the directory of --shapes (choose another with "
        f"--root DIR)"]
    res = run_cli("verify", art, "--dim", "batch=2", "--root", repo / "examples" / "mlp", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["notes"] == []
    res = run_cli("verify", art, "--dim", "batch=2")
    assert (res.exit_code, res.stderr) == (4, (
        "error[entrypoint]: entry point 'model.py:predict': file model.py not found. (the entry point recorded in "
        "the artifact, relative to the current directory; give the live function with --against FILE.py:NAME, or "
        "the directory it is relative to with --root DIR)\n"))


def _project_with_nested_spec(tmp_path: Path) -> Path:
    """``proj/model.py`` (apply and predict of the example), ``proj/weights/params.npz`` and
    ``proj/specs/mlp.yaml``, which binds ``../weights/params.npz``."""
    proj = tmp_path / "proj"
    (proj / "specs").mkdir(parents=True)
    (proj / "weights").mkdir()
    shutil.copy(MLP / "model.py", proj / "model.py")
    shutil.copy(MLP / "params.npz", proj / "weights" / "params.npz")
    (proj / "specs" / "mlp.yaml").write_text(
        "jaxport: 1\ndims: {batch: {max: 64}}\nargs:\n  - bind: ../weights/params.npz\n  - 'f32[batch, 784]'\n")
    return proj


def test_export_root_option_records_paths_under_it(tmp_path, run_cli, monkeypatch):
    proj = _project_with_nested_spec(tmp_path)
    monkeypatch.chdir(proj / "specs")
    res = run_cli("export", "../model.py:apply", "-s", "mlp.yaml", "--root", "..", "-o", tmp_path / "a.jaxport")
    assert res.exit_code == 0, res.stderr
    assert res.stderr == ""
    m = _manifest(tmp_path / "a.jaxport")
    assert m["source"]["spec"] == "specs/mlp.yaml"
    assert m["functions"]["apply"]["entrypoint"] == "model.py:apply"
    assert m["functions"]["apply"]["signature"]["args"][0] == {"bound": "weights/params.npz", "name": "params"}
    # the same from the project's root
    monkeypatch.chdir(proj)
    res = run_cli("export", "model.py:apply", "-s", "specs/mlp.yaml", "--root", ".", "-o", tmp_path / "b.jaxport")
    assert res.exit_code == 0, res.stderr
    assert _sha(tmp_path / "a.jaxport") == _sha(tmp_path / "b.jaxport")
    # verify from the project root (the recorded spec resolves there), and from far above it (found by the search)
    res = run_cli("verify", tmp_path / "a.jaxport", "--dim", "batch=2", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["spec"]["differences"] == []
    monkeypatch.chdir(tmp_path)
    res = run_cli("verify", "a.jaxport", "--dim", "batch=2", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["notes"][0].startswith("recorded paths are followed under proj, where the spec")
    # verify from the spec's directory with --shapes: the root is the one above, where specs/mlp.yaml lies
    monkeypatch.chdir(proj / "specs")
    res = run_cli("verify", tmp_path / "a.jaxport", "--dim", "batch=2", "--shapes", "mlp.yaml", "--json")
    assert res.exit_code == 0, res.stderr
    res = run_cli("export", "../model.py:apply", "-s", "mlp.yaml", "--root", "nowhere")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: --root nowhere: not a directory; give the directory the artifact's recorded paths (entry "
        "point, spec, bound sources) are to be relative to, or leave --root out to use the spec's directory.\n"))


def test_files_outside_the_root_are_recorded_by_name_with_a_warning(tmp_path, run_cli, monkeypatch):
    proj = _project_with_nested_spec(tmp_path)
    monkeypatch.chdir(proj)
    res = run_cli("export", "model.py:apply", "-s", "specs/mlp.yaml", "-o", tmp_path / "a.jaxport")
    assert res.exit_code == 0, res.stderr
    m = _manifest(tmp_path / "a.jaxport")
    assert m["source"]["spec"] == "mlp.yaml"
    assert m["functions"]["apply"]["entrypoint"] == "model.py:apply"
    assert m["functions"]["apply"]["signature"]["args"][0] == {"bound": "params.npz", "name": "params"}
    fix = "export with --root . (a directory holding the spec and every file the export reads)."
    assert res.stderr == (
        "warning: the entry point model.py:apply lies outside the export root specs, so the artifact records only its "
        f"name model.py, which 'jaxport verify' looks for under its root (else give it --against FILE.py:NAME); {fix}\n"
        "warning: the bound source ../weights/params.npz (specs/mlp.yaml:4) lies outside the export root specs, so "
        "the artifact records only its name params.npz, which 'jaxport verify' looks for under its root (else give "
        f"it --bind NAME=SOURCE); {fix}\n")
    # verify with the fix the warning names: the live function and the weights given by the user
    res = run_cli("verify", tmp_path / "a.jaxport", "--dim", "batch=2", "--shapes", "specs/mlp.yaml",
                  "--against", "model.py:apply", "--bind", "params=weights/params.npz", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["spec"]["checked"] and report["spec"]["differences"] == []
    # without them, the recorded model.py is looked for under the root (the spec's directory) and not found
    res = run_cli("verify", tmp_path / "a.jaxport", "--dim", "batch=2", "--shapes", "specs/mlp.yaml")
    assert res.exit_code == 4
    assert res.stderr.startswith("error[entrypoint]: entry point 'model.py:apply': file model.py not found.")


# --- command-line binds ----------------------------------------------------------------------------------------


def test_export_bind_then_verify_passes(tmp_path, run_cli, monkeypatch):
    """The spec has no bind; ``--bind params=...npz`` adds one; ``verify`` reproduces the export (it failed with
    exit code 12 when the recorded spec lacked the bind)."""
    work = tmp_path / "mlp"
    shutil.copytree(MLP, work)
    (work / "spec-x.yaml").write_text("jaxport: 1\ndims: {batch: {min: 1, max: 64}}\nkwargs:\n  x: 'f32[batch, 784]'\n")
    monkeypatch.chdir(work)
    res = run_cli("export", "model.py:apply", "-s", "spec-x.yaml", "--bind", "params=params.npz", "-o", "a.jaxport")
    assert res.exit_code == 0, res.stderr
    m = _manifest(work / "a.jaxport")
    assert m["source"] == {"spec": "spec-x.yaml", "spec_sha256": _sha(work / "spec-x.yaml"),
                           "binds": {"params": "params.npz"}}
    assert m["functions"]["apply"]["signature"] == {"args": [], "kwargs": {"x": {"input": 0},
                                                                           "params": {"bound": "params.npz"}}}
    res = run_cli("verify", "a.jaxport", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] and report["spec"]["checked"] and report["spec"]["differences"] == []
    assert len(report["cases"]) == 3
    # the artifact computes what the function does with those weights
    model = load_module(work / "model.py", "mlp_for_bind_test")
    x = np.random.default_rng(0).standard_normal((5, 784)).astype(np.float32)
    params = dict(np.load(work / "params.npz"))
    np.testing.assert_allclose(jaxport.load("a.jaxport")(x=x), model.apply(params, x), rtol=1e-5, atol=1e-6)
    # the same export from the parent directory names the file relative to there: same recorded source, same bytes
    monkeypatch.chdir(tmp_path)
    res = run_cli("export", "mlp/model.py:apply", "-s", "mlp/spec-x.yaml", "--bind", "params=mlp/params.npz",
                  "-o", "b.jaxport")
    assert res.exit_code == 0, res.stderr
    assert _sha(tmp_path / "b.jaxport") == _sha(work / "a.jaxport")
    res = run_cli("verify", "b.jaxport", "--dim", "batch=2")
    assert res.exit_code == 0, res.stdout + res.stderr


def test_export_bind_replacing_a_spec_bind_then_verify_passes(tmp_path, run_cli, monkeypatch):
    work = tmp_path / "mlp"
    shutil.copytree(MLP, work)
    monkeypatch.chdir(work)
    res = run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "--bind", "params=params.safetensors",
                  "-o", "a.jaxport")
    assert res.exit_code == 0, res.stderr
    m = _manifest(work / "a.jaxport")
    assert m["functions"]["apply"]["signature"]["args"][0] == {"bound": "params.safetensors", "name": "params"}
    assert m["source"]["binds"] == {"params": "params.safetensors"}
    res = run_cli("verify", "a.jaxport", "--dim", "batch=2", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["spec"]["differences"] == []


# --- the root search ---------------------------------------------------------------------------------------------


def _manifest_for(spec_text: str, digest: str, entry: str = "model.py:f") -> model.Manifest:
    f = model.Function("f.bin", 9, ("cpu",), (), (), model.Signature(), entrypoint=entry)
    return model.Manifest("1.0", model.Producer("0", "0", "0"), {}, {"f": f}, source=model.Source(spec_text, digest))


def test_search_matches_by_sha256_and_prefers_the_directory_with_the_entry_point(tmp_path, monkeypatch):
    text = b"jaxport: 1\nargs: ['f32[3]']\n"
    digest = hashlib.sha256(text).hexdigest()
    for d in ("a/x", "b", "c/y"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "b" / "spec.yaml").write_bytes(text + b"# edited\n")  # same name, other content
    (tmp_path / "a" / "x" / "spec.yaml").write_bytes(text)  # the spec, but no model.py beside it
    (tmp_path / "c" / "y" / "spec.yaml").write_bytes(text)
    (tmp_path / "c" / "y" / "model.py").write_text("")
    monkeypatch.chdir(tmp_path)
    notes: list[str] = []
    assert recorded.find_root(None, _manifest_for("spec.yaml", digest), None, notes) == Path("c/y")
    assert notes == ["recorded paths are followed under c/y, where the spec the artifact was exported from "
                     "(spec.yaml) was found by its sha256 (choose another root with --root DIR)"]
    os.remove(tmp_path / "c" / "y" / "model.py")
    assert recorded.find_root(None, _manifest_for("spec.yaml", digest), None, []) == Path("a/x")


def test_search_skips_hidden_and_virtualenv_directories_and_symlinks(tmp_path, monkeypatch):
    text = b"jaxport: 1\n"
    digest = hashlib.sha256(text).hexdigest()
    for d in (".git/x", ".venv/lib", "node_modules/pkg", "real"):
        (tmp_path / "proj" / d).mkdir(parents=True)
        (tmp_path / "proj" / d / "spec.yaml").write_bytes(text)
    os.remove(tmp_path / "proj" / "real" / "spec.yaml")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "spec.yaml").write_bytes(text)
    (tmp_path / "proj" / "link").symlink_to(tmp_path / "outside")
    monkeypatch.chdir(tmp_path / "proj")
    notes: list[str] = []
    assert recorded.find_root(None, _manifest_for("spec.yaml", digest), None, notes) == Path(".")
    assert notes == []
    # a recorded spec in a subdirectory of the root: the root is the directory above it
    (tmp_path / "proj" / "real" / "specs").mkdir()
    (tmp_path / "proj" / "real" / "specs" / "s.yaml").write_bytes(text)
    assert recorded.find_root(None, _manifest_for("specs/s.yaml", digest), None, []) == Path("real")


def test_search_is_capped(tmp_path, monkeypatch):
    text = b"jaxport: 1\n"
    digest = hashlib.sha256(text).hexdigest()
    deep = tmp_path.joinpath(*"abcdefgh")
    deep.mkdir(parents=True)
    (deep / "spec.yaml").write_bytes(text)
    monkeypatch.chdir(tmp_path)
    assert recorded.find_root(None, _manifest_for("spec.yaml", digest), None, []) == Path(".")  # deeper than 6
    monkeypatch.setattr(recorded, "SEARCH_ENTRIES", 3)
    notes: list[str] = []
    assert recorded.find_root(None, _manifest_for("spec.yaml", digest), None, notes) == Path(".")
    assert notes == ["the search for the spec the artifact was exported from (spec.yaml) stopped after 3 entries "
                     "below the current directory; give the directory the recorded paths are relative to with "
                     "--root DIR"]


def test_root_option_must_be_a_directory(tmp_path):
    with pytest.raises(UsageError) as e:
        recorded.find_root(tmp_path / "none", None, None, [])
    assert str(e.value) == (f"--root {tmp_path / 'none'}: not a directory; give the directory the artifact's "
                            f"recorded entry point, spec and bound sources are relative to.")


@pytest.mark.parametrize(("source", "message"), [
    ({"spec": "spec.yaml", "spec_sha256": "ABC"}, "source.spec_sha256: expected 64 lowercase hex digits"),
    ({"spec": "spec.yaml", "spec_sha256": 5}, "source.spec_sha256: expected a string, found int"),
    ({"spec": "spec.yaml", "binds": ["params.npz"]}, "source.binds: expected an object, found list"),
    ({"spec": "spec.yaml", "binds": {"params": 3}}, "source.binds['params']: expected a string, found int"),
])
def test_the_manifest_reader_checks_the_source_fields(tmp_path, source, message):
    from jaxport.artifact.container import write_artifact
    from jaxport.errors import FormatError

    art = jaxport.export(f"{MLP}/model.py:predict", MLP / "spec.yaml", output=tmp_path / "a.jaxport").path
    with open_artifact(art) as a:
        m = a.manifest
        members = {n: a.read(n) for n in a.members if n != "manifest.json"}
    m["source"] = source
    write_artifact(tmp_path / "bad.jaxport", m, members)
    with pytest.raises(FormatError) as e:
        open_artifact(tmp_path / "bad.jaxport")
    assert str(e.value) == f"{tmp_path / 'bad.jaxport'}: manifest.json: {message}"


def test_root_paths_record_relative_module_and_outside_paths(tmp_path, monkeypatch):
    from jaxport.export.entry.paths import RootPaths

    (tmp_path / "proj" / "src").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "proj")
    paths = RootPaths("src")
    assert paths.entrypoint("src/pkg/model.py:Model.apply", Path(".")) == "pkg/model.py:Model.apply"
    assert paths.entrypoint("pkg.model:apply", Path(".")) == "pkg.model:apply"  # a module: as written
    assert paths.source("./w/../params.npz", tmp_path / "proj" / "src", "the bound source") == "params.npz"
    assert paths.source("pkg.weights:PARAMS", Path("."), "a module attribute") == "pkg.weights:PARAMS"
    assert paths.warnings() == []
    assert paths.path("specs/s.yaml", Path("."), "the spec specs/s.yaml") == "s.yaml"
    assert paths.source("/data/ckpt/params.npz", Path("."), "the bound source /data/ckpt/params.npz") == \
        "params.npz"
    assert paths.warnings() == [
        "the spec specs/s.yaml lies outside the export root src, so the artifact records only its name s.yaml, which "
        "'jaxport verify' looks for under its root (else give it --shapes SPEC); put the spec and the files the "
        "export reads under one directory and export with --root DIR.",
        "the bound source /data/ckpt/params.npz lies outside the export root src, so the artifact records only its "
        "name params.npz, which 'jaxport verify' looks for under its root (else give it --bind NAME=SOURCE); put the "
        "spec and the files the export reads under one directory and export with --root DIR."]
