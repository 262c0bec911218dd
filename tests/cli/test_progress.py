"""Stage lines of long commands on stderr when it is not a terminal (issue 17): ``jaxport: STAGE ... 0.8 s``, one
per stage, never on stdout, never with --json."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jaxport_cli.progress import Stages

from tests.support import EXAMPLES

LINE = re.compile(r"jaxport: (.+) \.\.\. (failed after )?\d+\.\d s")


def _jaxport(cwd: Path, *args: str, progress: str | None = None) -> subprocess.CompletedProcess:
    """``jaxport ARGS`` in a process of its own, stdout and stderr each a pipe (as in a CI job)."""
    env = {k: v for k, v in os.environ.items() if k != "JAXPORT_PROGRESS"}
    if progress is not None:
        env["JAXPORT_PROGRESS"] = progress
    return subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def _stages(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    assert all(LINE.fullmatch(line) for line in lines), stderr
    return [LINE.fullmatch(line).group(1) for line in lines]  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("progress")
    res = _jaxport(tmp_path, "export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes",
                   str(EXAMPLES / "mlp" / "spec.yaml"), "-o", "mlp.jaxport")
    assert res.returncode == 0, res.stderr
    assert _stages(res.stderr) == [f"loading {EXAMPLES}/mlp/model.py:predict", "lowering predict",
                                   "serializing predict", "writing the artifact"]
    assert res.stdout.startswith("Exported mlp.jaxport (") and "jaxport:" not in res.stdout
    return tmp_path


def test_export_lines_on_stderr_only_and_none_with_json(mlp):
    res = _jaxport(mlp, "export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", str(EXAMPLES / "mlp" / "spec.yaml"),
                   "-o", "again.jaxport", "--json")
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.startswith("{") and "jaxport: " not in res.stdout
    res = _jaxport(mlp, "export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", str(EXAMPLES / "mlp" / "spec.yaml"),
                   "-o", "quiet.jaxport", progress="0")
    assert res.returncode == 0 and res.stderr == ""


def test_a_failed_stage_says_so_before_the_error(tmp_path):
    res = _jaxport(tmp_path, "export", f"{EXAMPLES}/mlp/model.py:nope", "--shapes", str(EXAMPLES / "mlp" / "spec.yaml"))
    assert res.returncode == 4 and res.stdout == ""
    first, error = res.stderr.splitlines()
    assert re.fullmatch(rf"jaxport: loading {re.escape(str(EXAMPLES))}/mlp/model.py:nope \.\.\. failed after \d+\.\d s",
                        first)
    assert error.startswith("error[entrypoint]: ")


def test_verify_lines_per_case(mlp):
    res = _jaxport(mlp, "verify", "mlp.jaxport", "--dim", "batch=1,7", "--against",
                   f"{EXAMPLES}/mlp/model.py:predict")
    assert res.returncode == 0, res.stderr
    assert _stages(res.stderr) == ["preparing the cases", "case 1/2: predict on cpu at batch=1 (--dim)",
                                   "case 2/2: predict on cpu at batch=7 (--dim)"]
    assert "OK: 2 cases match." in res.stdout and "jaxport: " not in res.stdout
    res = _jaxport(mlp, "verify", "mlp.jaxport", "--dim", "batch=1,7", "--against",
                   f"{EXAMPLES}/mlp/model.py:predict", "--json")
    assert res.returncode == 0 and res.stderr == "" and res.stdout.startswith("{")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("iree") is None, reason="needs the iree extra")
def test_compile_lines(mlp):
    res = _jaxport(mlp, "compile", "mlp.jaxport", "-o", "mlp.vmfb", "--dim", "batch=1,8")
    assert res.returncode == 0, res.stderr
    assert _stages(res.stderr) == ["loading the artifact", "specializing predict for 2 buckets",
                                   "checking which dimensions may be padded", "compiling with IREE",
                                   "writing the module"]
    assert res.stdout.startswith("Compiled mlp.vmfb") and "jaxport: " not in res.stdout
    res = _jaxport(mlp, "compile", "mlp.jaxport", "-o", "mlp2.vmfb", "--dim", "batch=1,8", "--json")
    assert res.returncode == 0 and res.stderr == ""


def test_in_process_capture_gets_no_lines(run_cli, tmp_path, monkeypatch):
    """Click's test runner (no OS stream) gets none, so every exact stderr of the suite holds."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JAXPORT_PROGRESS", raising=False)
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml")
    assert res.exit_code == 0 and res.stderr == ""
    monkeypatch.setenv("JAXPORT_PROGRESS", "1")
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml")
    assert res.exit_code == 0 and _stages(res.stderr)[-1] == "writing the artifact"


def test_stages_unit(capsys):
    with Stages(True) as stages:
        stages("one")
        stages("two \x1b[31m")
    assert _stages(capsys.readouterr().err) == ["one", "two \\x1b[31m"]
    with pytest.raises(RuntimeError), Stages(True) as stages:
        stages("three")
        raise RuntimeError
    assert re.fullmatch(r"jaxport: three \.\.\. failed after \d\.\d s\n", capsys.readouterr().err)
    with Stages(False) as stages:
        stages("four")
    assert capsys.readouterr().err == ""


def test_warmup_lines_per_signature(mlp):
    """Issue 57: warmup of many buckets printed nothing until its table."""
    res = _jaxport(mlp, "warmup", "mlp.jaxport", "--dim", "batch=1,2,3", "--cache-dir", "warm")
    assert res.returncode == 0, res.stderr
    assert _stages(res.stderr) == ["loading mlp.jaxport", "compiling predict at batch=1",
                                   "compiling predict at batch=2", "compiling predict at batch=3"]
    assert res.stdout.startswith("Warmed up predict of mlp.jaxport on cpu: 3 shape signatures")
    res = _jaxport(mlp, "warmup", "mlp.jaxport", "--target", "cpu", "--dim", "batch=1,2", "--cache-dir", "shipped")
    assert res.returncode == 0, res.stderr
    assert _stages(res.stderr) == ["compiling predict at batch=1 for cpu", "compiling predict at batch=2 for cpu"]
    res = _jaxport(mlp, "warmup", "mlp.jaxport", "--dim", "batch=4", "--cache-dir", "warm", "--json")
    assert res.returncode == 0 and res.stderr == "" and res.stdout.startswith("{")


#: What rich draws on a terminal between the spinner's frames: cursor movements, line erasures, carriage returns
#: (colours, ``ESC[...m``, are taken out first).
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
#: A line XLA's own logging writes on stderr (``W1207 09:18:01.458071   13546 file.cc:638] ...``), with the lines that
#: continue it.
_XLA_LOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] .*(?:\n(?![IWEF]\d{4} ).*)*\n?", re.M)
_DRAWN = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def test_on_a_terminal_a_spinner_names_the_stage_and_leaves_no_line(mlp):
    """On a terminal (TTY_COMPATIBLE=1: what rich takes as one), the stage under way is drawn in place with its
    elapsed time, and erased when the command ends: no 'jaxport:' line stays, stdout is the command's result."""
    env = {**os.environ, "TTY_COMPATIBLE": "1"}
    env.pop("JAXPORT_PROGRESS", None)
    res = subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", "warmup", "mlp.jaxport",
                          "--dim", "batch=5,6", "--cache-dir", "spun"], cwd=mlp, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    drawn = [line.strip() for line in _DRAWN.sub("\n", _COLOUR.sub("", res.stderr)).splitlines() if line.strip()]
    shown = {re.fullmatch(r". (.+) \d+:\d\d:\d\d", line).group(1) for line in drawn}  # type: ignore[union-attr]
    assert shown == {"loading mlp.jaxport", "compiling predict at batch=5", "compiling predict at batch=6"}, drawn
    assert res.stderr.endswith("\x1b[?25h\n\x1b[1A\x1b[2K")  # the cursor back, the spinner's line erased
    assert "jaxport: " not in res.stderr and "Warmed up" in res.stdout
    env["JAXPORT_PROGRESS"] = "0"
    res = subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", "warmup", "mlp.jaxport",
                          "--dim", "batch=5", "--cache-dir", "spun"], cwd=mlp, env=env, capture_output=True,
                         text=True, timeout=600)
    # nothing of jaxport's (jax 0.9.1's XLA logs loading a cached CPU executable with lines of its own: not ours)
    assert res.returncode == 0 and _XLA_LOG.sub("", res.stderr) == ""
