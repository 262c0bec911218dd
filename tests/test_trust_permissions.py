"""Issue 12, classes 2 and 8: an artifact grants itself nothing.

Class 2: what may run is JAX's guaranteed-stable custom-call targets plus what the caller allows at call time
(``--allow-custom-call``, ``allow_custom_calls=``); the manifest's ``allowed_custom_calls`` is audit information;
host callbacks and malformed target names never run, on every path that compiles a program (``call`` with either
runtime, ``--batch-size``, ``--vjp``, ``verify``, ``compile``), in nested functions, regions and stored derivatives.

Class 8: ``verify`` follows the entry point, spec and bound sources a manifest records only under a root the user
controls (the current directory, or ``--root``); the user's own ``--against``, ``--shapes`` and ``--bind`` are taken
as given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact, write_artifact
from jaxport.errors import EntrypointError, PolicyError, UsageError
from jaxport.importer import build as importer
from jaxport.jaxprivate.exported import vjp_getter, with_vjp_getter
from jaxport.jaxprivate.mlir import make_ir_context, serialize_portable_artifact
from jaxport.program.checks import HOST_CALLBACK_TARGETS, caller_allowances, is_host_callback, refused_target
from jaxport.program.module_scan import stablehlo_version
from jaxport.verify import recorded
from jaxport.verify.api import verify

# --- building programs with any custom call ---------------------------------------------------------------------

MAIN = """\
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {{
{body}}}
{extra}"""
CALL = ('  %0 = stablehlo.custom_call @{target}(%arg0) {{api_version = 4 : i32, backend_config = {{index = 5 : ui64}}}}'
        ' : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n')
IN_PRIVATE = ('  %0 = func.call @helper(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n',
              'func.func private @helper(%arg0: tensor<4xf32>) -> tensor<4xf32> {{\n' + CALL + '}}\n')
IN_REGION = ('  %c = stablehlo.constant dense<0> : tensor<i32>\n'
             '  %r = "stablehlo.case"(%c) ({{\n'
             '    %0 = stablehlo.custom_call @{target}(%arg0) {{api_version = 4 : i32, backend_config = '
             '{{index = 5 : ui64}}}} : (tensor<4xf32>) -> tensor<4xf32>\n'
             '    stablehlo.return %0 : tensor<4xf32>\n'
             '  }}) : (tensor<i32>) -> tensor<4xf32>\n  return %r : tensor<4xf32>\n')


def _module(text: str, version: str) -> bytes:
    from jax.extend.mlir import ir

    with make_ir_context():
        return serialize_portable_artifact(ir.Module.parse(text), version, False)


def _program(target: str, where: str = "main") -> str:
    if where == "private":
        return MAIN.format(body=IN_PRIVATE[0], extra=IN_PRIVATE[1].format(target=target))
    if where == "region":
        return MAIN.format(body=IN_REGION.format(target=target), extra="")
    return MAIN.format(body=CALL.format(target=target), extra="")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """An imported artifact (function ``k``) whose program calls ``my_target``, allowed at import."""
    d = tmp_path_factory.mktemp("perm")
    (d / "k.mlir").write_text(_program("my_target"))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        importer.import_stablehlo("k.mlir", output="base.jaxport", allow_custom_calls=["my_target"],
                                  write_manifest=False)
    return d / "base.jaxport"


def _rewrite(src: Path, dst: Path, program: str | None = None, allowed: list[str] | None = None,
             vjp_program: str | None = None) -> Path:
    """``src`` with its program replaced (and the manifest's allowance set), digests recomputed."""
    from jax import export

    with open_artifact(src) as art:
        m = art.manifest
        members = {n: art.read(n) for n in art.members if n != "manifest.json"}
    (fname,) = m["functions"]
    f = m["functions"][fname]
    exported = export.deserialize(bytearray(members[f["payload"]]))
    version = stablehlo_version(exported.mlir_module_serialized) or "1.0.0"
    order = 0
    if program is not None:
        exported = dataclasses.replace(exported, mlir_module_serialized=_module(program, version))
    if vjp_program is not None:
        vjp = exported.vjp()
        vjp = dataclasses.replace(vjp, mlir_module_serialized=_module(vjp_program, version))
        exported = with_vjp_getter(exported, lambda _: vjp)
        order = 1
    elif vjp_getter(exported) is not None:
        order = 1
    members[f["payload"]] = bytes(exported.serialize(vjp_order=order))
    if allowed is not None:
        f["allowed_custom_calls"] = allowed
    write_artifact(dst, m, members)
    return dst


def _host_callback_message(where: str, target: str, location: str = "-:2:8") -> str:
    return (f"{where}: the program calls back into Python through host-callback custom calls:\n"
            f"  {target} (used 1x, first at {location})\n"
            "A host callback (jax.pure_callback, io_callback, jax.debug.print or jax.debug.callback, "
            "custom_partitioning) jumps to a Python function by an index or address that only the exporting process "
            "knew; run from an artifact it would call whatever this process holds there. jaxport never runs one, and "
            "--allow-custom-call cannot allow it. Re-export the function without host callbacks.")


# --- class 2: the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", sorted(HOST_CALLBACK_TARGETS) + [
    "XLA_FFI_PYTHON_CPU_CALLBACK", " xla_ffi_python_cpu_callback", "xla_ffi_python_cpu_callback\t",
    "xla_ffi_python_cpu_callback\0", "xla_ffi_python_cpu_callback\0evil", "xla_ffi_python_tpu_callback",
    "xla_buffer_python_gpu_callback", "Xla_Python_Cpu_Callback", "some_future_callback"])
def test_host_callbacks_in_any_spelling_are_refused_whatever_is_allowed(target):
    assert is_host_callback(target)
    assert refused_target(target) == "host callback"


@pytest.mark.parametrize("target", ["", "my target", "my_target\0", "my_target\n", "k\u00e9rnel", "a" * 257,
                                    "\x1b[31mred"])
def test_target_names_that_are_not_plain_are_refused(target):
    assert refused_target(target) == "malformed"


@pytest.mark.parametrize("target", ["my_target", "tpu_custom_call", "lapack_sgetrf_ffi", "__cudnn$fmha",
                                    "shape_assertion", "Sharding", "a" * 256])
def test_plain_targets_are_left_to_the_allowlist(target):
    assert refused_target(target) is None


def test_caller_allowances_are_a_list_of_names():
    assert caller_allowances(None) == frozenset()
    assert caller_allowances(("a", "b")) == {"a", "b"}
    with pytest.raises(UsageError, match=re.escape("allow_custom_calls='my_target': give a list of custom-call "
                                                   "target names, not one string.")):
        caller_allowances("my_target")
    with pytest.raises(UsageError, match=re.escape("allow_custom_calls: 5 is not a custom-call target name")):
        caller_allowances(["a", 5])


def test_the_artifacts_own_allowance_grants_nothing(base, run_cli):
    message = (f"{base}: function 'k': the program uses custom-call targets that JAX does not guarantee to keep "
               "stable:\n  my_target (used 1x, first at k.mlir:2:8)\nThe artifact's own list of allowed targets "
               "grants nothing: whoever runs it decides. If you trust the artifact and this process provides the "
               "kernels, allow them with --allow-custom-call my_target (allow_custom_calls=['my_target'] in Python).")
    with open_artifact(base) as art:
        assert art.manifest["functions"]["k"]["allowed_custom_calls"] == ["my_target"]  # audit information
    with pytest.raises(PolicyError) as e:
        jaxport.load(base)
    assert str(e.value) == message
    res = run_cli("call", base, "--random", "--no-cache")
    assert res.exit_code == 6
    assert res.stderr == f"error[policy]: {message.replace(chr(10), ' ')}\n"
    # the caller allows it: it loads, and XLA says plainly that this process has no kernel for it
    loaded = jaxport.load(base, allow_custom_calls=["my_target"])
    with pytest.raises(jaxport.PlatformError, match="No FFI handler registered for my_target"):
        loaded(np.zeros(4, np.float32))
    res = run_cli("call", base, "--random", "--no-cache", "--allow-custom-call", "my_target")
    assert res.exit_code == 10, res.stderr
    # an allowance is exact: another case or spelling allows nothing
    for spelling in ("MY_TARGET", "my_target ", "my_targe"):
        with pytest.raises(PolicyError, match="allow them with --allow-custom-call my_target"):
            jaxport.load(base, allow_custom_calls=[spelling])


HOSTILE = [("main", t) for t in ("xla_ffi_python_cpu_callback", "xla_python_cpu_callback",
                                 "xla_ffi_partitioned_python_cpu_callback", "xla_buffer_python_cpu_callback",
                                 "xla_ffi_python_gpu_callback", "XLA_FFI_PYTHON_CPU_CALLBACK")] + [
    ("private", "xla_ffi_python_cpu_callback"), ("region", "xla_ffi_python_cpu_callback")]


@pytest.mark.parametrize("where,target", HOSTILE, ids=[f"{w}-{t}" for w, t in HOSTILE])
def test_host_callback_never_runs_even_when_the_caller_allows_it(base, tmp_path, run_cli, where, target):
    """Without the rule, ``call`` of the main-function cases dies by SIGSEGV (jumping to callback index 5)."""
    path = _rewrite(base, tmp_path / "h.jaxport", _program(target, where), allowed=[target])
    location = {"main": "-:2:8", "private": "-:6:8", "region": "-:4:10"}[where]
    message = _host_callback_message(f"{path}: function 'k'", target, location)
    with pytest.raises(PolicyError) as e:
        jaxport.load(path, allow_custom_calls=[target])
    assert str(e.value) == message
    res = run_cli("call", path, "--random", "--no-cache", "--allow-custom-call", target)
    assert (res.exit_code, res.stderr) == (6, f"error[policy]: {message.replace(chr(10), ' ')}\n")


def test_host_callback_is_refused_on_every_path(base, tmp_path, run_cli):
    target = "xla_ffi_python_cpu_callback"
    path = _rewrite(base, tmp_path / "h.jaxport", _program(target), allowed=[target])
    message = _host_callback_message(f"{path}: function 'k'", target).replace("\n", " ")
    allow = ["--allow-custom-call", target]
    runs = {
        "iree": ["call", path, "--random", "--no-cache", "--runtime", "iree", *allow],
        "batch": ["call", path, "--random", "--no-cache", "--batch-size", "2", *allow],
        "compile": ["compile", path, "-o", tmp_path / "m.vmfb", *allow],
        "verify-iree": ["verify", path, "--runtime", "iree", *allow],
        "verify": ["verify", path, *allow],
    }
    for name, argv in runs.items():
        res = run_cli(*argv)
        if name == "batch":  # k's input has no dimension variable to stream along: refused before the program is read
            fixed = "error[usage]: input 'arg0' (f32[4]) has axis 0 of fixed size 4."
            assert res.exit_code == 2 and res.stderr.startswith(fixed), res.stderr
            assert res.stderr.endswith("the same dimension variable (times a constant) in every input and output.\n")
            continue
        assert (res.exit_code, res.stderr) == (6, f"error[policy]: {message}\n"), name
    assert not (tmp_path / "m.vmfb").exists()
    with pytest.raises(PolicyError, match=re.escape(_host_callback_message(f"{path}: function 'k'", target))):
        jaxport.compile_artifact(path, tmp_path / "m.vmfb", allow_custom_calls=[target])
    with pytest.raises(PolicyError, match="host-callback custom calls"):
        verify(path, runtime="iree", allow_custom_calls=[target])


def test_malformed_target_with_a_nul_is_refused(base, tmp_path, run_cli):
    path = _rewrite(base, tmp_path / "n.jaxport", _program('"my_target\\00evil"'), allowed=["my_target\0evil"])
    message = (f"{path}: function 'k': the program uses custom-call targets whose names are not plain (1 to 256 "
               "printable ASCII characters, no spaces):\n  'my_target\\x00evil' (used 1x, first at -:2:8)\nNo kernel "
               "is registered under such a name, and native code may read it differently from this check, so jaxport "
               "never compiles it, whatever is allowed. The artifact is damaged or hostile.")
    with pytest.raises(PolicyError) as e:
        jaxport.load(path, allow_custom_calls=["my_target\0evil", "my_target"])
    assert str(e.value) == message


def test_import_refuses_a_host_callback_even_when_allowed(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cb.mlir").write_text(_program("xla_ffi_python_cpu_callback"))
    res = run_cli("import", "cb.mlir", "--allow-custom-call", "xla_ffi_python_cpu_callback", "-o", "cb.jaxport")
    assert res.exit_code == 6
    assert res.stderr.startswith("error[policy]: cb.mlir: the program calls back into Python through host-callback "
                                 "custom calls:\n  xla_ffi_python_cpu_callback (used 1x, first at cb.mlir:2:8)\n")
    assert not (tmp_path / "cb.jaxport").exists()


VJP_MODEL = "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) * 2\n"


def test_stored_derivatives_are_checked_too(make_artifact, tmp_path, run_cli):
    path = make_artifact(VJP_MODEL, "jaxport: 1\nargs: ['f32[4]']\nvjp_order: 1\n")
    loaded = jaxport.load(path)  # a clean derivative loads
    assert loaded.vjp({"x": np.ones(4, np.float32)}).cotangents
    target = "xla_ffi_python_cpu_callback"
    from jax import export

    with open_artifact(path) as art:
        f = art.manifest["functions"]["f"]
        vjp = export.deserialize(bytearray(art.read(f["payload"]))).vjp()
    n_in = len(vjp.in_avals)
    args = ", ".join(f"%arg{i}: tensor<4xf32>" for i in range(n_in))
    program = (f"func.func @main({args}) -> tensor<4xf32> {{\n" + CALL.format(target=target) + "}\n")
    edited = _rewrite(path, tmp_path / "v.jaxport", vjp_program=program)
    where = f"{edited}: function 'f' (its stored derivative of order 1)"
    with pytest.raises(PolicyError) as e:
        jaxport.load(edited, allow_custom_calls=[target])
    assert str(e.value) == _host_callback_message(where, target)
    res = run_cli("call", edited, "--random", "--no-cache", "--vjp")
    assert res.exit_code == 6 and res.stderr.startswith(f"error[policy]: {where}: the program calls back")


# --- class 8: recorded paths --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,problem", [
    ("/abs/model.py", "is an absolute path"),
    ("../x/model.py", "climbs out of its directory with '..'"),
    ("sub/../../model.py", "climbs out of its directory with '..'"),
    ("sub/..", "climbs out of its directory with '..'"),
    ("C:\\x.py", "contains a backslash (jaxport records '/'-separated paths)"),
    ("C:x.py", "is an absolute path"),
    ("//server/share/x.py", "is an absolute path"),
    ("model.py\0.txt", "contains control characters (a NUL or a line break)"),
    ("model\n.py", "contains control characters (a NUL or a line break)"),
    ("", "is empty"),
    ("a/" * 3000, "is longer than 4096 characters"),
    (5, "is not a path"),
])
def test_recorded_path_problems(text, problem):
    assert recorded.path_problem(text) == problem


@pytest.mark.parametrize("text", ["model.py", "sub/model.py", "./model.py", "sub/./m.py", "~x/model.py"])
def test_plain_relative_paths_are_followed(text):
    assert recorded.path_problem(text) is None


MODEL = "import jax.numpy as jnp\n\ndef f(params, x):\n    return x * params['w']\n"
SPEC = "jaxport: 1\nargs:\n  - bind: params.npz\n  - 'f32[4]'\n"
EVIL = ("import pathlib\npathlib.Path(__file__).with_name('CANARY').write_text('ran')\n\n"
        "def f(params, x):\n    return x\n")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """``proj/`` with model.py, spec.yaml, params.npz and m.jaxport (recorded: model.py:f, spec.yaml, params.npz);
    ``outside/`` beside it holds a module that writes a canary when imported."""
    d = tmp_path / "proj"
    d.mkdir()
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    np.savez(d / "params.npz", w=np.full(4, 2, np.float32))
    out = tmp_path / "outside"
    out.mkdir()
    (out / "evil.py").write_text(EVIL)
    shutil.copy(d / "spec.yaml", out / "spec.yaml")
    shutil.copy(d / "params.npz", out / "params.npz")
    monkeypatch.chdir(d)
    jaxport.export("model.py:f", "spec.yaml", output="m.jaxport")
    return d


def _edit(src: Path, dst: Path, edit) -> Path:
    with open_artifact(src) as art:
        m = art.manifest
        members = {n: art.read(n) for n in art.members if n != "manifest.json"}
    edit(m)
    write_artifact(dst, m, members)
    return dst


def _entry(value):
    return lambda m: m["functions"]["f"].update(entrypoint=value)


def test_recorded_paths_under_the_root_verify(project, run_cli):
    with open_artifact("m.jaxport") as art:
        m = art.manifest
    assert (m["functions"]["f"]["entrypoint"], m["source"]["spec"]) == ("model.py:f", "spec.yaml")
    res = run_cli("verify", "m.jaxport")
    assert res.exit_code == 0, res.stderr
    # from elsewhere, --root names the project
    os.chdir(project.parent)
    res = run_cli("verify", "proj/m.jaxport", "--root", "proj")
    assert res.exit_code == 0, res.stderr
    res = run_cli("verify", "proj/m.jaxport", "--root", "nowhere")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: --root nowhere: not a directory; give the directory the "
                                              "artifact's recorded entry point, spec and bound sources are relative "
                                              "to.\n")


ENTRIES = {
    "absolute": ("{outside}/evil.py:f", "is an absolute path"),
    "escaping": ("../outside/evil.py:f", "climbs out of its directory with '..'"),
    "escaping-deep": ("sub/../../outside/evil.py:f", "climbs out of its directory with '..'"),
    "windows-drive": ("C:\\outside\\evil.py:f", "contains a backslash (jaxport records '/'-separated paths)"),
    "module-style": ("evil:f", "names a module imported from Python's path (package.module:NAME), not a file"),
    "stdlib-module": ("os.path:join", "names a module imported from Python's path (package.module:NAME), not a "
                                      "file"),
    "symlink": ("link/evil.py:f", "leads outside the root (through a symbolic link)"),
    "nul": ("model.py\0:f", "contains control characters (a NUL or a line break)"),
    "newline": ("model.py:f\nimport os", "contains control characters (a NUL or a line break)"),
    "no-name": ("model.py", "is not FILE.py:NAME"),
}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_recorded_entry_point_outside_the_root_is_never_imported(project, tmp_path, run_cli, name):
    outside = tmp_path / "outside"
    (project / "link").symlink_to(outside)
    sys_path = list(sys.path)
    sys.path.insert(0, str(outside))  # a module-style entry would find evil.py here
    try:
        text, problem = ENTRIES[name]
        text = text.format(outside=outside)
        path = _edit(Path("m.jaxport"), project / "e.jaxport", _entry(text))
        message = (f"e.jaxport: function 'f': the entry point the artifact records ({text!r}) {problem}. verify "
                   "imports a recorded entry point only from a file under the current directory, so that an artifact "
                   "cannot choose the code it runs; if you trust the code, give the live function yourself with "
                   "--against FILE.py:NAME (or choose the directory with --root DIR).")
        with pytest.raises(EntrypointError) as e:
            verify("e.jaxport")
        assert str(e.value) == message
        res = run_cli("verify", "e.jaxport")
        assert res.exit_code == 4
        assert res.stderr.startswith("error[entrypoint]: e.jaxport: function 'f': the entry point the artifact "
                                     "records (")
        assert res.stderr.count("\n") == 1
        assert not (outside / "CANARY").exists()
        # the user's own choice is taken as given
        res = run_cli("verify", path, "--against", "model.py:f")
        assert res.exit_code == 0, res.stderr
    finally:
        sys.path[:] = sys_path


@pytest.mark.parametrize("value,problem", [
    ("{outside}/spec.yaml", "is an absolute path"),
    ("../outside/spec.yaml", "climbs out of its directory with '..'"),
    ("link/spec.yaml", "leads outside the root (through a symbolic link)"),
    ("/dev/zero", "is an absolute path"),
    ("spec.yaml\0", "contains control characters (a NUL or a line break)"),
])
def test_recorded_spec_outside_the_root_is_not_read(project, tmp_path, run_cli, value, problem):
    (project / "link").symlink_to(tmp_path / "outside")
    value = value.format(outside=tmp_path / "outside")
    _edit(Path("m.jaxport"), project / "s.jaxport", lambda m: m["source"].update(spec=value))
    message = (f"the spec the artifact records ({value!r}) {problem}. verify reads a recorded spec only under the "
               "current directory; give the spec yourself with --shapes FILE (or choose the directory with --root "
               "DIR).")
    with pytest.raises(UsageError) as e:
        verify("s.jaxport")
    assert str(e.value) == message
    res = run_cli("verify", "s.jaxport")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {message}".replace("\0", "\\x00") + "\n")
    res = run_cli("verify", "s.jaxport", "--shapes", "spec.yaml")
    assert res.exit_code == 0, res.stderr


def _bound(value):
    return lambda m: m["functions"]["f"]["signature"]["args"][0].update(bound=value)


@pytest.mark.parametrize("value,problem,code", [
    ("{outside}/evil.py:W", "is an absolute path", 4),
    ("../outside/evil.py:W", "climbs out of its directory with '..'", 4),
    ("link/evil.py:W", "leads outside the root (through a symbolic link)", 4),
    ("evil:W", "names a module imported from Python's path (package.module:NAME), not a file", 4),
    ("{outside}/params.npz", "is an absolute path", 2),
    ("../outside/params.npz", "climbs out of its directory with '..'", 2),
    ("link/params.npz", "leads outside the root (through a symbolic link)", 2),
    ("/etc/passwd", "is an absolute path", 2),
])
def test_recorded_bound_source_outside_the_root_is_not_followed(project, tmp_path, run_cli, value, problem, code):
    outside = tmp_path / "outside"
    (project / "link").symlink_to(outside)
    value = value.format(outside=outside)
    _edit(Path("m.jaxport"), project / "b.jaxport", _bound(value))
    kind = "entrypoint" if code == 4 else "usage"
    for argv in (["verify", "b.jaxport"], ["verify", "b.jaxport", "--against", "model.py:f"]):
        res = run_cli(*argv)
        assert res.exit_code == code, res.stderr
        assert res.stderr == (
            f"error[{kind}]: b.jaxport: function 'f': params: the bound source the artifact records ({value!r}) "
            f"{problem}. verify reads recorded bound sources only under the current directory, so that an artifact "
            f"cannot choose what it reads or imports; if you trust the source, give it yourself with --bind "
            f"NAME=SOURCE (or choose the directory with --root DIR).\n")
        assert not (outside / "CANARY").exists()
    # named by the user, it is taken as given: every case runs and matches; only the recorded spec, which binds
    # params.npz, no longer describes the edited artifact
    res = run_cli("verify", "b.jaxport", "--bind", f"params={outside / 'params.npz'}", "--json")
    assert res.exit_code == 12, res.stderr
    report = json.loads(res.stdout)
    assert all(o["passed"] for c in report["cases"] for o in c["outputs"])
    assert report["spec"]["differences"][0].startswith("args[0]: weights bound to ")
    res = run_cli("verify", "b.jaxport", "--bind", "nothing=params.npz")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: --bind nothing: b.jaxport has no bound argument "
                                              "'nothing'; its bound arguments are params.\n")


def test_a_stable_target_called_wrongly_is_a_clean_error(base, tmp_path, run_cli):
    """``lapack_sgetrf_ffi`` is guaranteed stable, so no allowance is needed; called with the wrong number of
    results, XLA's kernel refuses it at run time: a platform error, not an internal one."""
    path = _rewrite(base, tmp_path / "l.jaxport", _program("lapack_sgetrf_ffi"), allowed=[])
    res = run_cli("call", path, "--random", "--no-cache")
    assert (res.exit_code, res.stderr) == (
        10, f"error[platform]: {path}: function 'k': XLA on cpu could not run the program: INVALID_ARGUMENT: "
            f"[execute] Wrong number of results: expected 3 but got 1.\n")
