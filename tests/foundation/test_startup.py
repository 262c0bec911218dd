"""jaxport.isolation.startup: the settings XLA, libtpu and JAX read as they start, refused with one line naming the
variable and exit 10 before JAX starts in the ``jaxport`` process (issue 46), as real processes: XLA's refusal ends
a process with exit 1 and its fatal log, which no in-process test survives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.isolation import startup

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]
MODEL = "import jax.numpy as jnp\ndef f(x):\n    return jnp.tanh(x) * 2\n"
SPEC = "jaxport: 1\nargs:\n  - f32[2, 4]\n"
#: The variables these tests set, cleared from the environment the processes inherit.
SETTINGS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "JAX_ENABLE_X64", "JAX_NUMPY_RANK_PROMOTION", "JAX_SERIALIZATION_VERSION")


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An artifact (``a.jaxport``), its model and spec, and a cache directory of its own, in the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "spec.yaml").write_text(SPEC)
    np.save(tmp_path / "x.npy", np.full((2, 4), 0.5, np.float32))
    jaxport.export("model.py:f", "spec.yaml", output=tmp_path / "a.jaxport", write_manifest=False)
    return tmp_path


def _run(work: Path, *args: str, **settings: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    env.update(settings, JAXPORT_CACHE_DIR=str(work / "cache"))
    return subprocess.run([*JAXPORT, *args], capture_output=True, text=True, env=env, timeout=300)


XLA_REFUSALS = [
    ("--xla_bogus", "Unknown flag in XLA_FLAGS: --xla_bogus"),
    ("--xla_cpu_enable_fast_math=maybe", "Couldn't interpret value maybe for flag xla_cpu_enable_fast_math"),
    ("--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=q",
     "Couldn't interpret value q for flag xla_backend_optimization_level"),
    ("junk", 'Could not open file "junk" to read flags for environment variable "XLA_FLAGS". (We assumed "junk" was a '
             'file name because it did not start with a "--".)'),
]


@pytest.mark.parametrize("flags, reason", XLA_REFUSALS, ids=["unknown", "bad-value", "second-flag", "no-such-file"])
def test_xla_flags_that_xla_refuses_are_one_line_and_exit_10(work, flags, reason):
    """Before: XLA's fatal log line (or its whole flag table) and exit 1, with no error line."""
    p = _run(work, "call", "a.jaxport", "--inputs", "x.npy", "--no-cache", XLA_FLAGS=flags)
    assert (p.returncode, p.stderr, p.stdout) == (10, (
        f"error[platform]: XLA_FLAGS is {flags!r}, which XLA refuses ({reason}) and would end the process on; correct "
        f"the flags or unset XLA_FLAGS.\n"), "")


def test_xla_flags_with_control_characters_are_shown_escaped(work):
    p = _run(work, "export", "model.py:f", "--shapes", "spec.yaml", "-o", "b.jaxport", "--json",
             XLA_FLAGS="\x1b[31m--xla_bogus")
    assert p.returncode == 10
    assert p.stderr.splitlines()[-1] == (
        "error[platform]: XLA_FLAGS is '\\x1b[31m--xla_bogus', which XLA refuses (Could not open file "
        "\"\\x1b[31m--xla_bogus\" to read flags for environment variable \"XLA_FLAGS\". (We assumed "
        "\"\\x1b[31m--xla_bogus\" was a file name because it did not start with a \"--\".)) and would end the "
        "process on; correct the flags or unset XLA_FLAGS.")
    assert '"kind": "platform"' in p.stdout and "\x1b" not in p.stdout + p.stderr
    assert not (work / "b.jaxport").exists()


@pytest.mark.parametrize("variable, value, said", [
    ("JAX_ENABLE_X64", "maybe", "invalid truth value 'maybe' for environment 'JAX_ENABLE_X64'"),
    ("JAX_NUMPY_RANK_PROMOTION", "bogus", 'Invalid value "bogus" for JAX flag jax_numpy_rank_promotion'),
    ("JAX_SERIALIZATION_VERSION", "abc", "invalid literal for int() with base 10: 'abc'"),
])
@pytest.mark.parametrize("isolated", [False, True], ids=["", "isolate"])
def test_a_jax_setting_jax_refuses_is_one_line_naming_it(work, variable, value, said, isolated):
    """Before: exit 2 naming jaxport.call()'s 'malformed argument' (call), error[internal] (verify, inspect
    --mlir), a traceback (export, --isolate)."""
    p = _run(work, "call", "a.jaxport", "--inputs", "x.npy", "--no-cache", *["--isolate"] * isolated,
             **{variable: value})
    assert (p.returncode, p.stderr) == (10, (
        f"error[platform]: {variable} is {value!r}, which JAX refuses as it starts ({said}); give a value JAX takes "
        f"or unset {variable}.\n"))


def test_a_jax_setting_refused_while_the_users_module_imports_jax(work):
    """export: the user's module is the first to import JAX; the refusal is the command's line, not the module's
    entry-point error with its traceback."""
    p = _run(work, "export", "model.py:f", "--shapes", "spec.yaml", "-o", "b.jaxport", JAX_ENABLE_X64="maybe")
    assert p.returncode == 10
    assert p.stderr.splitlines()[-1] == (
        "error[platform]: JAX_ENABLE_X64 is 'maybe', which JAX refuses as it starts (invalid truth value 'maybe' for "
        "environment 'JAX_ENABLE_X64'); give a value JAX takes or unset JAX_ENABLE_X64.")


def test_flags_xla_takes_run_and_are_checked_once(work):
    """A valid XLA_FLAGS runs as before; the verdict is remembered in the cache (one record), so the next command
    starts no probe."""
    flags = "--xla_force_host_platform_device_count=2"
    p = _run(work, "call", "a.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "out.npy", XLA_FLAGS=flags)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(work / "out.npy"), np.tanh(np.full((2, 4), 0.5, np.float32)) * 2, rtol=1e-6)
    records = sorted(p.name for p in (work / "cache").glob("jaxport-startup-*.json"))
    assert len(records) == 1
    p = _run(work, "inspect", "a.jaxport", "--mlir", XLA_FLAGS=flags)
    assert p.returncode == 0, p.stderr
    assert sorted(p.name for p in (work / "cache").glob("jaxport-startup-*.json")) == records


def test_without_settings_nothing_is_probed(monkeypatch):
    """The common path: no XLA_FLAGS, no libtpu setting: no child, no cache read."""
    def refused(*args, **kwargs):
        raise AssertionError("a probe ran")

    monkeypatch.setattr(startup, "run", refused)
    monkeypatch.setattr(startup.usercache, "read_record", refused)
    assert startup.settings_refusal({"PATH": "/usr/bin", "JAX_PLATFORMS": "cpu"}) is None
    assert startup.settings_refusal({"XLA_FLAGS": "", "TPU_WORKER_ID": "0", "JAX_PLATFORMS": "cpu"}) is None


@pytest.mark.libtpu
def test_libtpu_flags_it_refuses_are_one_line_where_jax_would_start_it(work):
    """Where libtpu is installed, JAX starts its plugin whenever it starts (a TPU or not), and libtpu ends the
    process on a flag it does not know ('ERROR: Unknown command line flag', exit 1)."""
    env = {"LIBTPU_INIT_ARGS": "--bogus_flag", "JAX_PLATFORMS": ""}
    p = _run(work, "call", "a.jaxport", "--inputs", "x.npy", "--no-cache", **env)
    assert (p.returncode, p.stderr) == (10, (
        "error[platform]: libtpu refuses its settings (LIBTPU_INIT_ARGS is '--bogus_flag'): Unknown command line flag "
        "'bogus_flag', and would end the process; correct it or unset LIBTPU_INIT_ARGS.\n"))
    p = _run(work, "call", "a.jaxport", "--inputs", "x.npy", "--no-cache", **{**env, "JAX_PLATFORMS": "cpu"})
    assert p.returncode == 0, p.stderr  # JAX does not start libtpu: nothing to refuse


def test_libtpu_refusals_name_the_variable_they_quote():
    """libtpu (absl) says 'ERROR: ...' and names a flag, not the variable: the message names the variable whose
    value it quotes, not every TPU_* variable a TPU machine sets (checked on a TPU v5e: the probe initializes the
    plugin without opening the device)."""
    stderr = "W0000 warnings.warn\nERROR: Illegal value 'x' specified for flag 'deepsea_host_bounds'; INVALID\n"
    reason = startup._reason(stderr)
    assert reason == "Illegal value 'x' specified for flag 'deepsea_host_bounds'; INVALID"
    tpu = {"TPU_PROCESS_BOUNDS": "x", "TPU_TOPOLOGY": "2x2", "TPU_WORKER_ID": "0"}
    assert startup._culprits(tpu, reason) == ["TPU_PROCESS_BOUNDS"]
    tpu = {"LIBTPU_INIT_ARGS": "--a=1 --bogus_flag", "TPU_TOPOLOGY": "2x2"}
    assert startup._culprits(tpu, startup._reason("ERROR: Unknown command line flag 'bogus_flag'\n")) == [
        "LIBTPU_INIT_ARGS"]


#: A script that uses JAX the way a user's does, with jaxport imported (first, or after JAX).
USES_JAX = {"jaxport first": "import jaxport\nimport jax\nprint(jax.numpy.ones(3).sum(), jax.devices()[0].platform)\n",
            "jax first": "import jax\nimport jaxport\nprint(jax.numpy.ones(3).sum(), jax.devices()[0].platform)\n",
            "jax alone": "import jax\nprint(jax.numpy.ones(3).sum(), jax.devices()[0].platform)\n"}


def _python(code: str, **settings: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python, without libtpu's variables that this test process set (tests/conftest.py)."""
    from jaxport._machine import QUIET_LIBTPU

    env = {k: v for k, v in os.environ.items() if k not in QUIET_LIBTPU and k not in ("JAX_PLATFORMS", *SETTINGS)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **settings},
                          timeout=300)


@pytest.mark.libtpu
@pytest.mark.parametrize("order", ["jaxport first", "jax first"])
def test_a_python_script_that_imports_jaxport_starts_jax_without_libtpus_lines(order):
    """Issue 57: the command line kept libtpu's start-up lines off stderr, the Python API did not; now importing
    jaxport does it too, whether JAX was imported before (its backends start at first use). The same script
    without jaxport prints them: this is what is kept out."""
    from jaxport.run.compile.targets import has_tpu_chip

    if has_tpu_chip():
        pytest.skip("a TPU is attached: libtpu starts it and has nothing to warn about")
    p = _python(USES_JAX[order])
    assert (p.returncode, p.stdout, p.stderr) == (0, "3.0 cpu\n", "")
    bare = _python(USES_JAX["jax alone"])
    assert bare.returncode == 0 and "TPU_ACCELERATOR_TYPE" in bare.stderr, bare.stderr


@pytest.mark.libtpu
def test_importing_jaxport_keeps_the_users_own_libtpu_settings():
    """A user's TPU_ACCELERATOR_TYPE (or TPU_WORKER_HOSTNAMES) means they configured libtpu: jaxport sets nothing."""
    show = "import os, jaxport; print([os.environ.get(k) for k in ('TPU_ACCELERATOR_TYPE', 'TPU_SKIP_MDS_QUERY')])"
    assert _python(show, TPU_ACCELERATOR_TYPE="v4-8").stdout == "['v4-8', None]\n"
    assert _python(show, TPU_WORKER_HOSTNAMES="h1").stdout == "[None, None]\n"
    assert _python(show).stdout == "['v5litepod-1', '1']\n"


def test_without_libtpu_importing_jaxport_sets_nothing():
    """Where libtpu is not installed, importing jaxport looks it up and changes nothing (nor imports _machine)."""
    hide = ("import importlib.util, os, sys\n"
            "find = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'libtpu' else find(name, *a)\n"
            "import jaxport\n"
            "print('jaxport._machine' in sys.modules)\n"
            "from jaxport._machine import QUIET_LIBTPU\n"
            "print([k for k in QUIET_LIBTPU if k in os.environ])\n")
    assert _python(hide).stdout == "False\n[]\n"
