"""Native readers and limits: programs nested past the documented limits, and ``--isolate`` with realistic limits.

Class 1 of the trust-boundary issue: a program that deserializes fine but crashes MLIR's printer or XLA's compiler
must be refused (exit 7 for an artifact, 5 for ``import``, 15 for a reader that crashes the checking child), never
kill the jaxport process. Class 9: ``--isolate --memory-limit`` below what the child needs to start is a usage
error naming the floor; a child that runs out of memory under its limit is exit 15 naming ``--memory-limit``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jaxport.program import module_scan
from jaxport.program.module_scan import MAX_NESTING, PARSER_NESTING, ProgramLimitError, check_program_text

REPO = Path(__file__).resolve().parents[1]
JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]
BASE_MODULE = "module {\n  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n" \
              "    return %arg0 : tensor<2xf32>\n  }\n}\n"


def nested_cases(n: int) -> str:
    """``main`` with ``n`` ``stablehlo.case`` regions nested in one another (XLA's CPU compiler crashed at 250)."""
    body = "stablehlo.return %x : tensor<f32>"
    for i in range(n):
        body = (f'%r{i} = "stablehlo.case"(%i) ({{\n {body}\n}}, {{\n stablehlo.return %x : tensor<f32>\n}}) : '
                f'(tensor<i32>) -> tensor<f32>\n stablehlo.return %r{i} : tensor<f32>')
    return (f'module {{\n func.func public @main(%i: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {{\n %r = '
            f'"stablehlo.case"(%i) ({{\n {body}\n}}, {{\n stablehlo.return %x : tensor<f32>\n}}) : (tensor<i32>) -> '
            f'tensor<f32>\n return %r : tensor<f32>\n }}\n}}\n')


def call_chain(n: int) -> str:
    """``main`` calling ``f0``, which calls ``f1``, ... ``f{n-1}`` (XLA's CPU compiler crashed at 200)."""
    fs = []
    for i in range(n):
        nxt = (f"%r = func.call @f{i + 1}(%x) : (tensor<f32>) -> tensor<f32>\n return %r : tensor<f32>"
               if i < n - 1 else "return %x : tensor<f32>")
        fs.append(f"func.func private @f{i}(%x: tensor<f32>) -> tensor<f32> {{\n {nxt}\n}}")
    return ("module {\n" + "\n".join(fs) + "\nfunc.func public @main(%x: tensor<f32>) -> tensor<f32> {\n %r = "
            "func.call @f0(%x) : (tensor<f32>) -> tensor<f32>\n return %r : tensor<f32>\n}\n}\n")


def too_deep(line: int) -> str:
    return (f"the program nests more than {MAX_NESTING} levels deep at line {line} (regions, attributes or types "
            f"within one another); jaxport reads programs nested at most {MAX_NESTING} deep")


# --- the pure-Python scan ------------------------------------------------------------------------------------------


def test_scan_accepts_shallow_programs():
    check_program_text(BASE_MODULE)
    check_program_text(nested_cases(20))
    check_program_text(call_chain(20))
    check_program_text('module attributes {s = "[[[[[[" } {}\n')  # brackets in strings do not count


@pytest.mark.parametrize("text, line", [
    ("module attributes {x = " + "[" * 200 + "]" * 200 + "} {}\n", 1),
    ("module attributes {x = " + "{a = " * 200 + "unit" + "}" * 200 + "} {}\n", 1),
    ("module attributes {x = " + "tuple<" * 200 + "i32" + ">" * 200 + "} {}\n", 1),
    (nested_cases(100), 66),
])
def test_scan_refuses_deep_nesting(text, line):
    with pytest.raises(ProgramLimitError, match=re.escape(too_deep(line))):
        check_program_text(text)


def test_scan_counts_calls_and_aliases():
    with pytest.raises(ProgramLimitError, match=re.escape(
            f"the program nests more than {MAX_NESTING} levels deep through its function @f7 (line 30: calls, "
            f"aliases, regions, attributes or types within one another)")):
        check_program_text(call_chain(40))
    aliases = "\n".join(['#loc0 = loc("a")'] + [f"#loc{i} = loc(callsite(#loc{i - 1} at #loc0))"
                                                   for i in range(1, 200)])
    with pytest.raises(ProgramLimitError, match=re.escape("through its alias #loc64 (line 67:")):
        check_program_text("module {\n} loc(#loc199)\n" + aliases)  # aliases printed after their use count too
    check_program_text("\n".join(aliases.splitlines()[:30]) + "\nmodule {\n} loc(#loc29)\n")


def test_scan_refuses_recursion():
    text = ("module {\n func.func private @f(%x: tensor<f32>) -> tensor<f32> {\n %r = func.call @g(%x) : "
            "(tensor<f32>) -> tensor<f32>\n return %r : tensor<f32>\n }\n func.func private @g(%x: tensor<f32>) -> "
            "tensor<f32> {\n %r = func.call @f(%x) : (tensor<f32>) -> tensor<f32>\n return %r : tensor<f32>\n }\n}\n")
    with pytest.raises(ProgramLimitError, match=re.escape(
            "the program's function @f refers to itself (line 2); jaxport reads programs without recursion")):
        check_program_text(text)


def test_operation_count_limit(monkeypatch):
    module_scan.check_operation_count(module_scan.MAX_OPERATIONS)
    with pytest.raises(ProgramLimitError, match=re.escape(
            f"the program holds {module_scan.MAX_OPERATIONS + 1} operations; jaxport reads programs of at most "
            f"{module_scan.MAX_OPERATIONS}")):
        module_scan.check_operation_count(module_scan.MAX_OPERATIONS + 1)


def test_programs_jax_writes_pass():
    """A program with nested jit, scan, cond, remat and a gradient nests a few dozen levels: well within."""
    import jax
    import jax.numpy as jnp
    from jax import export

    from jaxport.jaxprivate.mlir import deserialize_portable_artifact, make_ir_context

    @jax.jit
    def layer(x, w):
        return jax.nn.gelu(x @ w) + jax.nn.softplus(x)

    def f(x, w):
        def body(c, _):
            c = jax.lax.cond(c.sum() > 0, lambda c: jax.checkpoint(layer)(c, w), jnp.tanh, c)
            c, _ = jax.lax.scan(lambda c2, _: (jax.lax.fori_loop(0, 3, lambda i, v: jnp.sin(v), c2), None), c,
                                None, length=2)
            return c, None
        return jax.lax.scan(body, x, None, length=3)[0]

    g = jax.jit(jax.grad(lambda x, w: f(x, w).sum(), argnums=(0, 1)))
    s = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    exported = export.export(g)(s, s)
    with make_ir_context():
        module_scan.checked_text(deserialize_portable_artifact(exported.mlir_module_serialized))


# --- artifacts and imports ---------------------------------------------------------------------------------------


#: Writes BASE_MODULE with an attribute nested N deep (``dict`` or ``array``) as a portable artifact, on a 1 GiB
#: stack: a hostile writer's tools have no recursion limit.
_WRITER = """
import sys, threading
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jaxport.jaxprivate.mlir import make_ir_context, serialize_portable_artifact
kind, n = sys.argv[1], int(sys.argv[2])
def work():
    with make_ir_context(), ir.Location.unknown():
        m = ir.Module.parse(sys.stdin.read())
        a = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
        for _ in range(n):
            a = ir.DictAttr.get({"a": a}) if kind == "dict" else ir.ArrayAttr.get([a])
        if n:
            m.body.operations[0].attributes["x"] = a
        sys.stdout.buffer.write(serialize_portable_artifact(m, stablehlo.get_current_version()))
        done.append(True)
done = []
threading.stack_size(1 << 30)
t = threading.Thread(target=work)
t.start()
t.join()
sys.exit(0 if done else 1)
"""


def _deep_bytecode(kind: str, n: int) -> bytes:
    out = subprocess.run([sys.executable, "-c", _WRITER, kind, str(n)], input=BASE_MODULE.encode(),
                         capture_output=True, timeout=600, check=True)
    return out.stdout


@pytest.fixture(scope="module")
def base_artifact(tmp_path_factory):
    d = tmp_path_factory.mktemp("native")
    (d / "base.mlir").write_text(BASE_MODULE)
    from jaxport.importer import import_stablehlo

    import_stablehlo(d / "base.mlir", output=d / "base.jaxport", write_manifest=False)
    return d / "base.jaxport"


def _with_module(base: Path, module: bytes, out: Path) -> Path:
    """``base`` with its payload's StableHLO replaced by ``module``, digests recomputed (only parsing can tell)."""
    from jax import export

    from tests.hostile.corpus import artifact

    with zipfile.ZipFile(base) as z:
        manifest = json.loads(z.read("manifest.json"))
        members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    name = next(n for n in members if n.endswith(".jaxexport"))
    exported = export.deserialize(bytearray(members[name]))
    members[name] = bytes(dataclasses.replace(exported, mlir_module_serialized=module).serialize())
    out.write_bytes(artifact(manifest, members))
    return out


def _commands(path: Path, other: Path, out: Path) -> dict[str, list[str]]:
    return {"inspect --mlir": ["inspect", str(path), "--mlir"],
            "extract --mlir": ["extract", str(path), "--mlir", "base", "-o", str(out)],
            "diff": ["diff", str(other), str(path)],
            "call": ["call", str(path), "--random", "--no-cache"]}


@pytest.mark.slow
def test_an_artifact_nested_past_the_limit_is_refused(base_artifact, run_cli, tmp_path):
    """Nested 300 deep: every native reader survives it, but it is over the documented limit (exit 7)."""
    art = _with_module(base_artifact, _deep_bytecode("array", 300), tmp_path / "deep.jaxport")
    for label, argv in _commands(art, base_artifact, tmp_path / "out.mlir").items():
        res = run_cli(*argv)
        assert res.exit_code == 7, (label, res.stderr)
        assert res.stderr == (f"error[format]: {art}: function 'base': {too_deep(3)} (specs/FORMAT.md, \"Program "
                              f"limits\"), so it is not read further. Do not load the artifact; re-export it from "
                              f"its source.\n"), label
    assert not (tmp_path / "out.mlir").exists()


@pytest.mark.slow
def test_an_artifact_that_crashes_the_printer_is_refused(base_artifact, tmp_path):
    """30 000 nested dictionaries deserialize and walk fine, and crash MLIR's printer: the checking child prints
    the program, so the jaxport process never does (it used to die with SIGSEGV in inspect --mlir)."""
    art = _with_module(base_artifact, _deep_bytecode("dict", 30000), tmp_path / "deep.jaxport")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for label, argv in _commands(art, base_artifact, tmp_path / "out.mlir").items():
        res = subprocess.run([*JAXPORT, *argv], capture_output=True, text=True,
                             env=env, timeout=600)
        assert res.returncode == 7, (label, res.returncode, res.stderr)
        crashed = f"error[format]: {art}: function 'base': JAX's reader crashed with SIGSEGV "
        assert res.stderr.startswith(crashed), label


def test_import_refuses_deep_text_before_parsing(run_cli, tmp_path):
    """Text is held before parsing to what MLIR's parser is safe with (PARSER_NESTING); the module as MLIR prints
    it then to the program limits (tests/importer/test_import_names.py)."""
    parses = (f"jaxport parses text nested at most {PARSER_NESTING} deep, and reads programs nested at most "
              f"{MAX_NESTING} deep")
    for name, text, where in [("cases", nested_cases(3000),
                               f"the program nests more than {PARSER_NESTING} levels deep at line 258 (regions, "
                               f"attributes or types within one another); {parses}"),
                              ("chain", call_chain(300), f"the program nests more than {PARSER_NESTING} levels deep "
                                                         f"through its function @f")]:
        path = tmp_path / f"{name}.mlir"
        path.write_text(text)
        res = run_cli("import", path, "-o", tmp_path / "out.jaxport")
        assert res.exit_code == 5, res.stderr
        assert res.stderr.startswith(f"error[export]: {path}: {where}"), res.stderr
        assert res.stderr.endswith(" (specs/IMPORT.md, \"Limits\"). Simplify the module (fewer nested regions or "
                                   "calls, smaller attributes) before importing it.\n")
    assert not (tmp_path / "out.jaxport").exists()


@pytest.mark.slow
def test_import_reads_bytecode_in_a_child_first(run_cli, tmp_path):
    path = tmp_path / "deep.mlirbc"
    path.write_bytes(_deep_bytecode("array", 300))
    res = run_cli("import", path, "-o", tmp_path / "out.jaxport")
    assert res.exit_code == 5, res.stderr
    assert res.stderr.startswith(f"error[export]: {path}: {too_deep(3)} (specs/IMPORT.md"), res.stderr
    path.write_bytes(_deep_bytecode("array", 0))  # the same module, shallow: imported
    assert run_cli("import", path, "-o", tmp_path / "out.jaxport").exit_code == 0


# --- --isolate with realistic limits ------------------------------------------------------------------------------


def _isolated(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*JAXPORT, *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def _below_floor(limit: str) -> re.Pattern[str]:
    return re.compile(rf"--memory-limit {limit} is below what the isolated process needs to start Python and JAX "
                      rf"here \((\d+)M, measured\); give --memory-limit \1M or more.")


@pytest.mark.slow
def test_memory_limit_below_the_floor_is_a_usage_error(base_artifact, tmp_path):
    """The floor is measured, not assumed: what JAX's imports take (it differs between JAX releases: 288M to 304M
    here on 2 cores under jax 0.9.0 and 0.10.2, 256M or less under jax 0.9.2 in an earlier tree) plus a thread stack
    per core. A limit under the floor measured here is refused naming it; the command line's smallest limit (256M)
    too, where the floor is above it."""
    from jaxport.errors import UsageError
    from jaxport.isolation import isolate

    argv = ["call", str(base_artifact), "--random", "--no-cache"]
    with pytest.raises(UsageError) as e:  # 1M: below any floor
        isolate.run("jaxport_cli.main:main", argv, isolate.command_limits(1 << 20, 120), cwd=tmp_path)
    m = _below_floor("1M").fullmatch(str(e.value))
    assert m, str(e.value)
    floor = int(m.group(1))
    assert floor >= 160 and floor % 16 == 0, floor  # the start margin (160M) on top of the imports, in 16M steps
    below = floor - 48  # under the floor, with room for it to be measured 16M or 32M lower the next time
    with pytest.raises(UsageError) as e:
        isolate.run("jaxport_cli.main:main", argv, isolate.command_limits(below << 20, 120), cwd=tmp_path)
    assert _below_floor(f"{below}M").fullmatch(str(e.value)), str(e.value)
    # The command line: 256M is refused where the floor is above it (measured again: 16M either way, at most), and
    # runs where the floor is at or below it.
    res = _isolated(*argv, "--isolate", "--memory-limit", "256M", cwd=tmp_path)
    m = re.fullmatch(r"error\[usage\]: (.*)\n", res.stderr)
    refused = res.returncode == 2 and m is not None and _below_floor("256M").fullmatch(m.group(1)) is not None
    assert refused or (floor <= 256 + 16 and res.returncode == 0), (floor, res.returncode, res.stderr)


@pytest.mark.slow
def test_out_of_memory_under_the_limit_names_the_limit(tmp_path, run_cli):
    """A program that needs more than the limit: exit 15 naming --memory-limit, not a bug, not the artifact."""
    (tmp_path / "bc.mlir").write_text(
        "module {\n func.func public @main(%arg0: tensor<f32>) -> tensor<20000x8000xf32> {\n %0 = "
        "stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<20000x8000xf32>\n return %0 : "
        "tensor<20000x8000xf32>\n }\n}\n")
    assert run_cli("import", tmp_path / "bc.mlir", "-o", tmp_path / "bc.jaxport").exit_code == 0
    res = _isolated("call", "bc.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit", "400M",
                    cwd=tmp_path)
    assert res.returncode == 15, res.stderr
    assert res.stderr.endswith("error[crash]: bc.jaxport: the isolated process ran out of memory under its limit of "
                               "400M (--memory-limit): the command needs more. Raise --memory-limit (to 800M, say); "
                               "without it the limit is the machine's physical memory.\n"), res.stderr
    assert "bug in jaxport" not in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_a_realistic_limit_runs(base_artifact, tmp_path):
    res = _isolated("call", str(base_artifact), "--random", "--no-cache", "--isolate", "--memory-limit", "1G",
                    "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr


def print_threads() -> None:
    """Child target: the thread-pool variables the child sees."""
    from jaxport.isolation import isolate

    print(json.dumps({k: os.environ.get(k) for k in isolate.CHILD_THREADS}))


def test_child_thread_pools_and_default_time_limit(monkeypatch):
    from jaxport_cli.options import DEFAULT_TIME_LIMIT

    from jaxport.isolation import isolate

    assert DEFAULT_TIME_LIMIT == 600
    for name in isolate.CHILD_THREADS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    out = isolate.run("tests.test_trust_native:print_threads", [], isolate.Limits(wall_seconds=120))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {k: "1" for k in isolate.CHILD_THREADS}
    assert (isolate._mib(300 << 20), isolate._mib(2 << 30), isolate._mib(1)) == ("300M", "2G", "1M")
