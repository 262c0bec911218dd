"""Issue 24: programs that crash or block at run time, interrupts, weights rewritten after their check, hostile
environments, the Python API's types, shared caches. The corpus (``python -m tests.hostile.run --class ...``) runs
every class at length; these are one path per behaviour, with exact messages."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import interrupts, usercache
from jaxport.errors import IntegrityError, PolicyError
from jaxport.isolation import isolate, sandbox
from jaxport.program.checks import check_custom_calls
from jaxport.program.module_scan import ModuleScan, ProgramLimitError, check_program_text
from jaxport.program.rules import refused_op

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]
MODEL = "import jax.numpy as jnp\ndef f(params, x):\n    return jnp.tanh(x @ params['w'] + params['b'])\n"
SPEC = "jaxport: 1\nargs:\n  - bind: params.npz\n  - f32[2, 4]\n"


@pytest.fixture
def bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An artifact with bound weights, its inputs and the expected outputs, in the current directory."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "spec.yaml").write_text(SPEC)
    w, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    np.savez(tmp_path / "params.npz", w=w, b=b)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", np.tanh(x @ w + b))
    return jaxport.export("model.py:f", "spec.yaml", output=tmp_path / "bound.jaxport").path


# --- class 1: programs that would crash or block once compiled ----------------------------------------------------

def test_a_function_calling_itself_is_refused_by_the_program_check():
    text = ("func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  %0 = func.call @main(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n")
    with pytest.raises(ProgramLimitError, match=r"^the program's function @main refers to itself \(line 1\); "
                                                r"jaxport reads programs without recursion$"):
        check_program_text(text)


@pytest.mark.parametrize("name", ["stablehlo.outfeed", "stablehlo.infeed", "stablehlo.send", "stablehlo.recv",
                                  "mhlo.outfeed", "vhlo.recv_v1"])
def test_host_communication_ops_are_refused_whatever_is_allowed(name):
    assert refused_op(name)
    scan = ModuleScan(host_communication=[(name, "model.py:3:4")])
    with pytest.raises(PolicyError) as e:
        check_custom_calls("m.jaxport", scan, {"anything"})
    assert str(e.value).startswith(f"m.jaxport: the program holds host-communication operations: {name} (1x, at "
                                   f"model.py:3:4). Each waits for ")
    assert not refused_op("stablehlo.add") and not refused_op("mydialect.outfeed")


def test_import_refuses_recursion_and_outfeed_with_one_line(tmp_path: Path):
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs: ["f32[4]"]\n')
    (tmp_path / "rec.mlir").write_text(
        "module @m {\n  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        "    %0 = func.call @main(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n}\n")
    (tmp_path / "out.mlir").write_text(
        "module @m {\n  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        "    %t = stablehlo.create_token : !stablehlo.token\n"
        '    %t2 = "stablehlo.outfeed"(%arg0, %t) {outfeed_config = ""} : (tensor<4xf32>, !stablehlo.token) -> '
        "!stablehlo.token\n    return %arg0 : tensor<4xf32>\n  }\n}\n")
    for name, code, text in (("rec", 5, "function @main refers to itself"),
                             ("out", 6, "host-communication operations: stablehlo.outfeed")):
        p = subprocess.run([*JAXPORT, "import", f"{name}.mlir", "--shapes", "spec.yaml", "-o", "o.jaxport"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert p.returncode == code, p.stderr
        assert len(p.stderr.splitlines()) == 1 and text in p.stderr
        assert not (tmp_path / "o.jaxport").exists()


# --- class 2: interrupts ------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_call_ends_it_with_one_line_and_128_plus_the_signal(bound: Path, sig):
    p = subprocess.Popen([*JAXPORT, "call", "bound.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "out.npz"],
                         cwd=bound.parent, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.skip("the call finished before the signal came (a fast machine)")
    assert p.returncode == 128 + sig
    name = "SIGINT (Ctrl-C)" if sig == signal.SIGINT else "SIGTERM"
    assert err == (f"error[interrupted]: stopped by {name}; every output is as it was or complete, and no "
                   f"temporary file is left\n")
    assert sorted(x.name for x in bound.parent.iterdir() if x.name.startswith(".")) == []


def test_an_interrupt_removes_the_temporaries_and_kills_the_children(tmp_path: Path):
    """``interrupts.stop`` in a child process: its tracked temporary file is gone, its tracked child killed."""
    code = f"""
import os, signal, subprocess, sys, time
from jaxport import interrupts
interrupts.install()
open({str(tmp_path / ".out.tmp")!r}, "w").write("partial")
interrupts.track({str(tmp_path / ".out.tmp")!r})
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
interrupts.track_child(child.pid)
print(child.pid, flush=True)
time.sleep(60)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = int(p.stdout.readline())
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143
    assert err.startswith("error[interrupted]: stopped by SIGTERM;")
    assert not (tmp_path / ".out.tmp").exists()
    for _ in range(200):
        if not _alive(child):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the tracked child is still alive")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_signal_watcher_does_not_stop_the_check_from_forking():
    code = ("import jax, threading; from jaxport import interrupts\nfrom jaxport.isolation import isolate\n"
            "interrupts.install()\n"
            "print(sorted(t.name for t in threading.enumerate()), isolate._can_fork())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert p.stdout.strip() == f"['MainThread', '{interrupts.WATCHER_NAME}'] True", p.stderr


# --- class 3: weights rewritten after their check -------------------------------------------------------------------

def _weights_span(path: Path) -> tuple[int, int]:
    from tests.hostile.process_runs import _weights_span as span

    return span(path)


@pytest.mark.parametrize("defer", [True, False])
def test_weights_rewritten_after_load_do_not_change_what_runs(bound: Path, defer: bool):
    offset, size = _weights_span(bound)
    x = np.load("x.npy")
    expected = np.asarray(jaxport.load(bound)(x))  # the artifact's own outputs, by XLA
    np.testing.assert_allclose(expected, np.load("expected.npy"), rtol=1e-6)
    f = jaxport.load(bound, defer_verify=defer)
    with open(bound, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\x7f" * size)  # same size, in place: NaNs where the weights were
    np.testing.assert_array_equal(np.asarray(f(x)), expected)


def test_weights_rewritten_before_they_are_copied_are_refused(bound: Path):
    offset, size = _weights_span(bound)
    with open(bound, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\x7f" * size)
    f = jaxport.load(bound, defer_verify=True)
    with pytest.raises(IntegrityError, match="member 'weights.bin' is damaged: its sha256 is "):
        f(np.load("x.npy"))


# --- class 4: hostile environments ----------------------------------------------------------------------------------

def test_stdout_on_a_full_disk_is_exit_11_with_one_line(bound: Path):
    with open("/dev/full", "w") as full:
        p = subprocess.run([*JAXPORT, "inspect", "bound.jaxport"], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    assert p.returncode == 11
    assert p.stderr == ("error[output]: cannot write the standard output: No space left on device. Free space on "
                        "that disk, or redirect the output elsewhere.\n")


@pytest.mark.parametrize("platform", ["bogus", "tpu", "cuda"])
def test_jax_platforms_naming_a_platform_this_machine_lacks_is_a_platform_error(bound: Path, platform: str):
    """JAX fails to start its backend (an unknown name, no libtpu, no CUDA plugin: an AssertionError inside JAX):
    exit 10 and one line naming JAX_PLATFORMS, not error[internal]."""
    env = {**os.environ, "JAX_PLATFORMS": platform}
    p = subprocess.run([*JAXPORT, "call", "bound.jaxport", "--random", "--no-cache"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 10, p.stderr
    assert p.stderr.startswith("error[platform]: JAX cannot start its backend (")
    assert p.stderr.endswith(f"); JAX_PLATFORMS is {platform!r}: name platforms this machine has (cpu, or a GPU or "
                             f"TPU with its JAX plugin installed), or unset it.\n")
    assert len(p.stderr.splitlines()) == 1


@pytest.mark.parametrize("columns", ["\u00b2", "\u0663", "80x", ""])
def test_a_terminal_width_that_is_no_ascii_number_is_ignored(columns: str, monkeypatch: pytest.MonkeyPatch):
    """COLUMNS='\u00b2' is a digit to str.isdigit and no number to int(): the terminal's own width is used (80 where
    none can be measured)."""
    from jaxport_cli import render

    class Terminal:
        encoding = "utf-8"

        def isatty(self) -> bool:
            return True

    def unmeasured(fd: int = 1) -> os.terminal_size:
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", unmeasured)

    mode = render._plain_mode(Terminal(), {"COLUMNS": columns, "LINES": columns, "TERM": "xterm"})
    assert mode is not None and mode[1] == 80


def test_a_terminal_that_cannot_show_a_name_gets_it_escaped(bound: Path):
    os.rename(bound, bound.parent / "modèle-模型.jaxport")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    p = subprocess.run([*JAXPORT, "inspect", "modèle-模型.jaxport"], capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert b"mod\\xe8le-\\u6a21\\u578b.jaxport" in p.stdout
    p = subprocess.run([*JAXPORT, "inspect", "absent-é.jaxport"], capture_output=True, env=env, timeout=120)
    # click writes an ASCII-configured stderr as UTF-8 (its own rule); either way one line, no error[internal]
    assert p.returncode == 7
    assert p.stderr in (b"error[format]: absent-\\xe9.jaxport: file not found.\n",
                        "error[format]: absent-\u00e9.jaxport: file not found.\n".encode())


def test_a_deleted_working_directory_is_refused_with_one_line(tmp_path: Path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = f"import os; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); from jaxport_cli.main import main; main()"
    p = subprocess.run([sys.executable, "-c", code, "inspect", "x.jaxport"], capture_output=True, text=True,
                       timeout=120)
    assert (p.returncode, p.stderr) == (2, "error[usage]: the current directory no longer exists (it was deleted or "
                                           "moved away), so the relative path 'x.jaxport' names nothing; change to "
                                           "an existing directory, or give absolute paths, and run the command "
                                           "again.\n")
    gone.mkdir()
    p = subprocess.run([sys.executable, "-c", code, "verify", "/x.jaxport"],
                       capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stderr) == (2, "error[usage]: the current directory no longer exists (it was deleted or "
                                           "moved away); change to an existing directory and run the command "
                                           "again.\n")


def test_a_deleted_working_directory_runs_a_command_of_absolute_paths(tmp_path: Path, bound: Path):
    """``inspect``, ``call``, ``diff`` and ``check`` read only the paths they are given (issue 36, 6)."""
    art = bound.resolve()
    gone = tmp_path / "gone"
    code = (f"import os; os.mkdir({str(gone)!r}); os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
            f"from jaxport_cli.main import main; main()")
    for argv in (["inspect", str(art)], ["call", str(art), "--random", "--no-cache"],
                 ["diff", "--no-programs", str(art), str(art)]):
        p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (argv, p.stderr)
        assert p.stdout


def test_a_pipe_whose_reader_went_away_ends_the_command_with_its_own_code(tmp_path: Path, bound: Path):
    """``jaxport inspect ART | head -1``: the rest of the output goes nowhere, no BrokenPipeError, and the exit code
    is the command's (a missing file's 7 is kept)."""
    art = bound.resolve()
    for argv, code in ((["inspect", str(art)], 0), (["inspect", "--json", str(art)], 0), (["--help"], 0),
                       (["call", str(art), "--random", "--no-cache"], 0), (["inspect", str(tmp_path / "no")], 7)):
        read, write = os.pipe()
        os.close(read)
        p = subprocess.run([*JAXPORT, *argv], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        os.close(write)
        assert p.returncode == code, (argv, p.stderr)
        assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr


def test_a_limit_above_the_inherited_hard_limit_is_clamped_to_it():
    code = ("import resource; from jaxport.isolation import sandbox\n"
            "resource.setrlimit(resource.RLIMIT_DATA, (8 << 30, 8 << 30))\n"
            "resource.setrlimit(resource.RLIMIT_CPU, (100, 100))\n"
            "sandbox._apply_memory(sandbox.Limits(64 << 30, memory_kind='data'), 0)\n"
            "sandbox._apply(sandbox.Limits(cpu_seconds=1000))\n"
            "print(resource.getrlimit(resource.RLIMIT_DATA), resource.getrlimit(resource.RLIMIT_CPU))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == f"({8 << 30}, {8 << 30}) (100, 100)", p.stderr
    assert resource.getrlimit(resource.RLIMIT_CPU) != (100, 100)  # this process untouched


# --- class 5: the Python API's types --------------------------------------------------------------------------------

def test_every_public_function_rejects_wrong_types_and_malformed_values(tmp_path: Path):
    from tests.hostile.process_runs import api_types

    rows = api_types(tmp_path)
    assert {r.name for r in rows} >= {"parse_spec", "load", "export", "check", "verify_artifact", "rebind"}
    assert [p for r in rows for p in r.problems] == []
    assert sum(r.runs for r in rows) > 500


def test_wrong_types_and_self_containing_specs_say_which_parameter():
    with pytest.raises(TypeError, match=r"^jaxport.parse_spec\(\): text must be str, not bytes$"):
        jaxport.parse_spec(b"jaxport: 1")
    spec: dict = {"jaxport": 1, "args": []}
    spec["args"].append(spec)
    with pytest.raises(jaxport.SpecError, match=r"^jaxport.export\(\): spec contains itself "):
        jaxport.export(lambda x: x, spec)
    with pytest.raises(TypeError, match=r"^jaxport.load\(\): path must be str or os.PathLike or Artifact, not int$"):
        jaxport.load(3)


# --- class 6: shared caches -----------------------------------------------------------------------------------------

def test_verdicts_are_read_only_from_a_directory_no_one_else_can_write(tmp_path: Path):
    key = usercache.verdict_key("ab" * 32, "test")
    d = tmp_path / "cache"
    assert usercache.write_verdict(d, key)
    assert oct(d.stat().st_mode & 0o777) == "0o700" and usercache.has_verdict(d, key)
    for mode, reason in ((0o777, "others can write in it (mode 777)"), (0o770, "others can write in it (mode 770)")):
        d.chmod(mode)
        assert usercache.untrusted_reason(d) == reason and not usercache.has_verdict(d, key)
    d.chmod(0o755)
    assert usercache.has_verdict(d, key)
    usercache.verdict_path(d, key).chmod(0o666)
    assert not usercache.has_verdict(d, key)  # a verdict file others may rewrite
    if os.geteuid() == 0:
        usercache.verdict_path(d, key).chmod(0o644)
        os.chown(d, 65534, 65534)
        assert usercache.untrusted_reason(d) == "it belongs to another user (uid 65534)"
        assert not usercache.has_verdict(d, key)


def test_an_untrusted_compilation_cache_is_not_used_with_a_note(tmp_path: Path):
    from jaxport.run.cache import compilation_cache

    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    with compilation_cache(d) as state:
        assert state.directory is None
        assert state.problem == (f"not using the compilation cache {d}: others can write in it (mode 777), so what it "
                                 f"holds cannot be trusted; running without it (use a directory of your own, mode "
                                 f"0700)")


def test_the_isolated_marker_cannot_be_set_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(isolate.ISOLATED_ENV, "1")
    assert not isolate.isolated()
    assert sandbox.child_limits() is None


# --- the corpus's classes, a few cases as real processes -------------------------------------------------------------

QUICK = ("run-time-program/import-text-recursion-main", "run-time-program/import-text-outfeed-main",
         "environment/ascii-inspect", "environment/latin-1-call-o", "environment/deleted-cwd-inspect",
         "environment/stdout-full-inspect-json", "environment/hard-data-16G-memory-limit-32G",
         "cache-trust/planted-verdict-cache-777")


@pytest.mark.slow
def test_a_few_cases_of_issue_24s_classes_hold_in_real_processes(tmp_path: Path):
    from tests.hostile import run
    from tests.hostile.corpus import build

    base, cases = build(tmp_path / "base")
    chosen = [c for c in cases if c.id in QUICK]
    assert sorted(c.id for c in chosen) == sorted(QUICK)
    report = run.run(base, chosen, tmp_path / "runs")  # cases with a time limit run only as real processes
    assert [f"{r.case.id} [{r.command}]: {r.detail}" for r in report.failures] == []
    assert len(report.results) >= len(QUICK)
