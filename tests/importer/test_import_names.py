"""``import`` reads a module's names as MLIR does and holds the program rules where every reader holds them (issue 36):
symbol names with escapes and quotes, custom-call targets spelled to pass for others, collectives naming devices the
program does not have; an exception while the program runs is the program's failure, not the caller's argument;
an allocation that fails under a memory limit is the out-of-memory crash.

The modules are those of the hostile corpus (``tests/hostile/import_classes.py``). Every one that imports takes an
``f32[3]`` and returns it: its outputs are compared with ``jax.jit`` of the identity.
"""

from __future__ import annotations

import re
import resource
from pathlib import Path

import jax
import numpy as np
import pytest
from jaxport_cli import errors as cli_errors

import jaxport
from jaxport._api_types import checked, raised_running, runs_program
from jaxport.errors import PlatformError, PolicyError, UsageError
from jaxport.program.module_scan import MAX_NESTING, ProgramLimitError, check_program_text, symbol_name
from jaxport.run.jax_backend import JaxBackend
from tests.hostile.import_classes import (
    ALL_MODULES,
    COLLECTIVE_MODULES,
    NAME_MODULES,
    TARGET_MODULES,
    func,
    imported,
    permute,
)
from tests.support import npz_arrays

LIMITS = ' (specs/IMPORT.md, "Limits"). Simplify the module (fewer nested regions or calls, smaller attributes) ' \
         'before importing it.\n'
HOW = ("Give MLIR text (.mlir), MLIR bytecode, or a StableHLO portable artifact (.mlirbc) whose functions use the "
       "func, stablehlo and chlo dialects, or a JAX serialization (.jaxexport: Exported.serialize()'s bytes).")
X = np.array([1.5, -2.0, 3.25], np.float32)


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", X)
    return tmp_path


def _import(run_cli, text: str):
    Path("module.mlir").write_text(text)
    return run_cli("import", "module.mlir", "-o", "out.jaxport")


def _runs_as_identity(run_cli) -> None:
    res = run_cli("call", "out.jaxport", "--inputs", "x.npy", "-o", "out.npz", "--no-cache")
    assert res.exit_code == 0, res.stderr
    np.testing.assert_array_equal(npz_arrays("out.npz")["output"], np.asarray(jax.jit(lambda x: x)(X)))
    assert run_cli("inspect", "--mlir", "out.jaxport").exit_code == 0


# --- names by their value ------------------------------------------------------------------------------------------


def test_symbol_names_compare_by_value():
    assert symbol_name("main") == symbol_name('"main"') == symbol_name('"m\\61in"') == "main"
    assert symbol_name('"\\6d\\61\\69\\6e"') == "main"
    assert symbol_name('"a\\nb"') == symbol_name('"a\\0Ab"') == symbol_name('"a\\0ab"') == "a\nb"
    assert symbol_name('"q\\"t\\\\"') == 'q"t\\'
    assert symbol_name('"\\ff"') != symbol_name('"\\fe"')  # not UTF-8: still one name per byte string


def test_the_scan_reads_names_as_mlir_does():
    with pytest.raises(ProgramLimitError, match=re.escape(
            "the program's function @main refers to itself (line 1); jaxport reads programs without recursion")):
        check_program_text(NAME_MODULES["escaped-self-call"][0])
    with pytest.raises(ProgramLimitError, match=re.escape("the program's function @main refers to itself")):
        check_program_text(NAME_MODULES["mutual-recursion-escaped"][0])
    check_program_text(NAME_MODULES["comment-mentions-main"][0])  # a comment is no call
    check_program_text(NAME_MODULES["newline-escape-call"][0])


# --- import holds the rules of every reader --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_MODULES))
def test_modules(name, work, run_cli):
    """Each module of the corpus imports or is refused with its exit code; what import accepts, every reader
    accepts, and it runs."""
    text, code = ALL_MODULES[name]
    res = _import(run_cli, text)
    assert res.exit_code == code, res.stderr
    if code == 0:
        _runs_as_identity(run_cli)
    else:
        assert not Path("out.jaxport").exists()


def test_exact_refusals_of_names(work, run_cli):
    res = _import(run_cli, NAME_MODULES["escaped-self-call"][0])
    assert res.stderr == ("error[export]: module.mlir: the program's function @main refers to itself (line 1); "
                          "jaxport reads programs without recursion" + LIMITS)
    res = _import(run_cli, NAME_MODULES["main-twice-by-escape"][0])
    assert res.stderr == (f"error[format]: module.mlir: cannot read a StableHLO module: module.mlir:4:1: "
                          f"redefinition of symbol named 'main'. {HOW}\n")
    res = _import(run_cli, NAME_MODULES["deep-once-wrapped"][0])
    assert res.stderr == (f"error[export]: module.mlir: the program nests more than {MAX_NESTING} levels deep through "
                          f"its function @main (line 9: calls, aliases, regions, attributes or types within one "
                          f"another); jaxport reads programs nested at most {MAX_NESTING} deep, as the artifact would "
                          f"store it (main wrapped to follow JAX's calling convention)" + LIMITS)


def test_a_module_within_the_limits_as_mlir_prints_it_imports(work, run_cli):
    """A type alias nested 200 deep that the module never uses is no part of its program (MLIR does not print it),
    so import takes the module every reader would read; text deeper than the parser takes is refused unparsed."""
    assert _import(run_cli, NAME_MODULES["unused-deep-alias"][0]).exit_code == 0
    _runs_as_identity(run_cli)


def test_exact_refusal_of_an_escaped_callback(work, run_cli):
    res = _import(run_cli, TARGET_MODULES["escaped-callback-target"][0])
    assert res.stderr.startswith("error[policy]: module.mlir: the program calls back into Python through "
                                 "host-callback custom calls:\n  xla_python_cpu_callback (used 1x, first at "
                                 "module.mlir:2:8)\n"), res.stderr


# --- collectives within the program's devices ---------------------------------------------------------------------

DEVICES = ("The program runs on 1 device (id 0; mhlo.num_partitions times mhlo.num_replicas), and XLA would read past "
           "its list of devices when it compiles or runs it. jaxport never compiles one (specs/FORMAT.md, \"Program "
           "limits\"). Produce the program for the devices its collectives name, or without those collectives.")


def test_exact_refusal_of_collectives_at_import(work, run_cli):
    res = _import(run_cli, COLLECTIVE_MODULES["permute-two-devices"][0])
    assert res.stderr == ("error[policy]: module.mlir: the program's collectives name devices it does not have: "
                          "stablehlo.collective_permute (1x, source_target_pairs naming device 1, at module.mlir:2:8). "
                          + DEVICES + "\n")
    text = func(permute("[[0, 1]]", 1) + permute("[[0, 7]]", 1, result="%1").replace("(%a)", "(%0)")
                + COLLECTIVE_MODULES["all-reduce-two-devices"][0].split("\n", 1)[1].split("  return")[0]
                .replace("%0 =", "%2 =").replace("(%a)", "(%1)"), "%2")
    res = _import(run_cli, text)
    assert res.stderr == ("error[policy]: module.mlir: the program's collectives name devices it does not have: "
                          "stablehlo.all_reduce (1x, replica_groups naming device 1, at module.mlir:4:8); "
                          "stablehlo.collective_permute (2x, source_target_pairs naming device 1, 7, at "
                          "module.mlir:2:8, module.mlir:3:8). " + DEVICES + "\n")


def test_collectives_are_refused_at_load(work, run_cli):
    """An artifact whose program names a device it lacks (as an import without the check wrote it) is refused before
    XLA sees it: at call (it was error[usage] 'a malformed argument (IndexError: Span::at failed bounds check)')."""
    Path("out.jaxport").write_bytes(imported(COLLECTIVE_MODULES["permute-two-devices"][0], unchecked=True))
    res = run_cli("call", "out.jaxport", "--random", "--no-cache")
    assert res.exit_code == 6
    assert res.stderr == ("error[policy]: out.jaxport: function 'module': the program's collectives name devices it "
                          "does not have: stablehlo.collective_permute (1x, source_target_pairs naming device 1, at "
                          "module.mlir:2:8). " + DEVICES + "\n")
    with pytest.raises(PolicyError, match=re.escape("source_target_pairs naming device 1")):
        jaxport.load("out.jaxport")


# --- the program's failure is not the caller's argument --------------------------------------------------------


def test_a_failure_while_running_is_no_malformed_argument():
    @runs_program
    def execute():
        raise IndexError("Span::at failed bounds check")

    def reads(value):
        return {}["missing"]

    with pytest.raises(PlatformError, match=re.escape(
            "jaxport.call(): the program failed while it was compiled or run (IndexError: Span::at failed bounds "
            "check): the program is damaged or hostile, or this platform cannot run it; 'jaxport call --isolate' "
            "runs it in a child process that contains what it does.")):
        checked("call", lambda: execute(), dict)()
    with pytest.raises(UsageError, match=re.escape("jaxport.call(): a malformed argument (KeyError: 'missing')")):
        checked("call", reads, dict)(1)
    try:
        execute()
    except IndexError as e:
        assert raised_running(e)

    def short_of_memory():
        try:
            raise MemoryError
        except MemoryError:
            raise ValueError("while memory ran short") from None

    with pytest.raises(ValueError, match="while memory ran short"):  # passes on, to the out-of-memory crash
        checked("call", short_of_memory, dict)()


def test_an_xla_failure_of_any_type_is_reported_as_the_program_failing(make_artifact, run_cli, monkeypatch):
    """XLA's native code raises an IndexError for a failed bounds check: ``call`` says the program could not run
    (exit 10), as for XLA's own runtime errors."""
    art = make_artifact("def f(x):\n    return x * 2\n", 'jaxport: 1\nargs: ["f32[3]"]\n')
    compile_ = JaxBackend.compile

    def compile_then_break(self, key):
        done = compile_(self, key)

        def broken(*args):
            raise IndexError("Span::at failed bounds check")

        self._executables[key] = broken
        return done

    monkeypatch.setattr(JaxBackend, "compile", compile_then_break)
    res = run_cli("call", art, "--random", "--no-cache")
    assert res.exit_code == 10
    assert res.stderr == (f"error[platform]: {art}: function 'f': XLA on cpu could not run the program "
                          f"(IndexError): Span::at failed bounds check.\n")


# --- memory short -----------------------------------------------------------------------------------------------

CRASH = ("error[crash]: out of memory. An artifact or input that declares huge sizes can cause this; run with "
         "--isolate and --memory-limit to bound what it may take.\n")


@pytest.fixture
def data_limit():
    """A soft RLIMIT_DATA far above what the test process uses (restored after)."""
    before = resource.getrlimit(resource.RLIMIT_DATA)
    hard = before[1]
    soft = 1 << 44 if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    yield
    resource.setrlimit(resource.RLIMIT_DATA, before)


def _ends(exc: BaseException, capsys) -> tuple[int, str]:
    def body():
        raise exc

    with pytest.raises(SystemExit) as stop:
        cli_errors.run(body, debug=False, as_json=False)
    return int(stop.value.code), capsys.readouterr().err


def test_system_error_under_a_data_limit_is_the_out_of_memory_crash(data_limit, capsys):
    assert _ends(SystemError("error return without exception set"), capsys) == (15, CRASH)
    assert _ends(SystemError("<built-in method copy> returned NULL without setting an exception"), capsys) == \
        (15, CRASH)
    code, err = _ends(SystemError("some other bug"), capsys)
    assert (code, err.startswith("error[internal]: SystemError: some other bug. This is a bug in jaxport")) == (1, True)


def test_system_error_without_a_limit_is_a_bug_unless_memory_ran_short(capsys):
    if resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY or \
            resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process runs under a memory limit")
    code, err = _ends(SystemError("error return without exception set"), capsys)
    assert code == 1 and err.startswith("error[internal]: SystemError: error return without exception set.")
    try:
        try:
            raise MemoryError
        except MemoryError:
            raise SystemError("error return without exception set")  # noqa: B904 - as native code chains it
    except SystemError as e:
        assert _ends(e, capsys) == (15, CRASH)
