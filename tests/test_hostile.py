"""Hostile input: a sample of the generated corpus through the real command line, and the regressions it found.

The whole corpus (thousands of cases) runs with ``python -m tests.hostile.run``; RELIABILITY.md has its figures.
Here a stratified sample runs in-process and a smaller one as real processes (signal deaths, peak memory).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jaxport.artifact.container import open_artifact
from jaxport.errors import FormatError
from jaxport.isolation import isolate
from tests.hostile import corpus, run

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    cwd = os.getcwd()
    try:
        return corpus.build(tmp_path_factory.mktemp("hostile") / "base")
    finally:
        os.chdir(cwd)


def _failures(report: run.Report) -> str:
    return "\n".join(f"{r.case.id} [{r.command}{' subprocess' if r.subprocess else ''}]: {r.detail}"
                     for r in report.failures)


def test_the_corpus_covers_every_class_of_the_issue(built):
    _, cases = built
    counts = {cls: sum(1 for c in cases if c.cls == cls) for cls in {c.cls for c in cases}}
    assert counts["prefix"] == 65
    assert counts["bit-flip"] == 2000
    assert counts["byte-overwrite"] > 900
    for cls in ("truncate-at-boundary", "truncate-random", "zip-field-value", "manifest-field-value",
                "manifest-json", "manifest-version", "shape", "dtype", "weights", "member-name", "trailing-bytes",
                "polyglot-prefix", "payload", "input-npy", "input-npz", "spec", "bind"):
        assert counts.get(cls, 0) >= 5, cls
    # the trust-boundary classes of issue 12 (tests/hostile/trust.py)
    for cls, at_least in (("native-nesting", 15), ("custom-call-grant", 8), ("arithmetic", 25),
                          ("special-file", 100), ("write", 30), ("terminal", 80), ("internal-error", 50),
                          ("code-import", 12), ("isolate", 8), ("known-gap", 20)):
        assert counts.get(cls, 0) >= at_least, cls
    # issue 24's (tests/hostile/runtime_classes.py; interrupts, rewrites and API types are runs of process_runs.py)
    for cls, at_least in (("run-time-program", 40), ("environment", 30), ("cache-trust", 8)):
        assert counts.get(cls, 0) >= at_least, cls
    # issue 36's imports (tests/hostile/import_classes.py): names by their value, collectives within the devices
    for cls, at_least in (("import-names", 25), ("collective-devices", 25)):
        assert counts.get(cls, 0) >= at_least, cls
    # issue 36's spec inputs (tests/hostile/spec_classes.py): like: values, dimension-dependent ranges, bind sources
    for cls, at_least in (("like-values", 60), ("dimension-ranges", 50), ("bind-sources", 30)):
        assert counts.get(cls, 0) >= at_least, cls
    assert sum(c.canary for c in cases) >= 20
    # whatever may hang or kill its process runs only as a real process, under a time limit
    for c in cases:
        if c.cls in ("native-nesting", "custom-call-grant", "arithmetic", "special-file", "isolate",
                     "run-time-program", "environment", "cache-trust"):
            assert c.timeout > 0, c.id


@pytest.mark.slow
def test_a_sample_of_the_corpus_is_rejected_cleanly_in_process(built, tmp_path):
    base, cases = built
    report = run.run(base, run.sample([c for c in cases if not c.timeout], 300, seed=0), tmp_path)
    assert _failures(report) == ""
    assert len(report.results) > 300


#: Trust-boundary cases cheap enough to run as real processes in the test suite (no JAX): one per rule they
#: check (a FIFO and /dev/zero at each light reader, a symlink loop, escapes in check and diff, a policy number of
#: 5000 digits, an artifact cut while it is read).
QUICK = ("special-file/artifact-inspect-fifo", "special-file/artifact-inspect-dev-zero",
         "special-file/policy-fifo", "special-file/policy-dev-urandom", "special-file/artifact-check-directory",
         "special-file/artifact-diff-symlink-loop", "terminal/custom-call-target-csi", "terminal/label-key-bidi",
         "terminal/name-rich-markup", "internal-error/policy-calling-convention-5000-digits",
         "internal-error/render-square-of-square", "known-gap/truncated-while-read-inspect")


@pytest.mark.slow
def test_the_trust_boundary_rules_hold_in_real_processes(built, tmp_path):
    base, cases = built
    chosen = [c for c in cases if c.id in QUICK]
    assert len(chosen) == len(QUICK)
    report = run.run(base, [], tmp_path, [dataclasses.replace(c, timeout=c.timeout or 30.0) for c in chosen])
    assert _failures(report) == ""


def test_the_classifier_sees_writes_outside_replaced_inputs_and_markup(tmp_path):
    """The runner's own checks: a file changed outside the work directory, an input replaced by another kind of
    file, rich markup interpreted, a bidi override printed."""
    before = {"work/x.npy": ("file", "a"), "outside/sentinel.txt": ("file", "b"), "work/dev": ("device", 259)}
    after = {"work/x.npy": ("file", "a"), "outside/sentinel.txt": ("file", "c"), "work/dev": ("file", "d"),
             "work/out.npz": ("file", "e")}
    created, changed = run._changes(before, after, {"out.npz"})
    assert (created, sorted(changed)) == ([], ["../outside/sentinel.txt changed", "dev replaced (device -> file)"])
    case = corpus.Case("t", "t", "t", None, frozenset({7}), accept=frozenset({"x"}))
    assert run.classify(case, "x", 0, "", "name: JXMARK\n")[1] == (
        "rich markup from the file was interpreted (its tags vanished from the output)")
    assert run.classify(case, "x", 0, "", "name: [bold]JXMARK[/bold]\n")[0] == "accepted"
    assert run.classify(case, "x", 0, "", "abc\u202egnp.exe\n")[1] == ("control character '\\u202e' from the file "
                                                                      "reached the terminal")


@pytest.mark.slow
def test_a_sample_of_the_corpus_is_rejected_cleanly_by_real_processes(built, tmp_path):
    base, cases = built
    report = run.run(base, [], tmp_path, run.sample(cases, 10, seed=1))
    assert _failures(report) == ""
    peaks = [r.peak_rss for r in report.results if r.command == "inspect"]
    assert peaks and max(peaks) < run.MEMORY_BOUND["inspect"]


def test_the_zip_bomb_and_huge_shapes_are_refused_in_bounded_memory(built, tmp_path):
    base, cases = built
    chosen = [c for c in cases if c.id in ("input-npz/zip-bomb-1GiB", "input-npy/huge-bounded-dim",
                                           "manifest-field-value/functions.f.dims.batch.min=2**31-1",
                                           "zip-field-value/central[weights.bin].size=2**63-1 (zip64)")]
    assert len(chosen) == 4
    report = run.run(base, [], tmp_path, chosen)
    assert _failures(report) == ""
    for r in report.results:
        assert r.peak_rss < (400 << 20), (r.case.id, r.command, r.peak_rss)


# --- regressions the corpus found --------------------------------------------------------------------------------


def _artifact(built, case_id: str, tmp_path: Path) -> Path:
    _, cases = built
    (case,) = [c for c in cases if c.id == case_id]
    path = tmp_path / "case.jaxport"
    path.write_bytes(case.data)
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(FormatError) as e:
        with open_artifact(path) as art:
            art.verify_all()
    return str(e.value).removeprefix(f"{path}: ")


@pytest.mark.parametrize(("case_id", "message"), [
    # fields that only inspect reads were not checked: inspect failed with exit 1 on a wrong type
    ("manifest-wrong-type/effects-ordered-int",
     "manifest.json: functions['f'].effects.ordered: expected a list, found int"),
    ("manifest-wrong-type/embedded-constants-bytes-string",
     "manifest.json: functions['f'].embedded_constants.bytes: expected an integer, found str"),
    ("manifest-wrong-type/sharding-int", "manifest.json: functions['f'].inputs[0].sharding: expected a string, "
                                         "found int"),
    ("manifest-wrong-type/derived-from-string",
     "manifest.json: functions['f'].dims['batch'].derived_from: expected an object, found str"),
    ("manifest-wrong-type/signature-args-int", "manifest.json: functions['f'].signature.args: expected a list, "
                                               "found int"),
    ("manifest-wrong-type/dim-min-above-max", "manifest.json: functions['f'].dims['batch']: min 65 is greater than "
                                              "max 64"),
    # unicode digits and a trailing newline passed the version check
    ("manifest-version/format_version=unicode-digits",
     "manifest.json: format_version: '١.0' is not of the form MAJOR.MINOR"),
    ("manifest-version/format_version=newline", "manifest.json: format_version: '1.0\\n' is not of the form "
                                                "MAJOR.MINOR"),
    # a bounded tensor layout with a hole in it was accepted
    ("weights/gap", "manifest.json: weights.tensors['params/w'].offset: 128 leaves a gap after the previous tensor, "
                    "which ends at 12"),
    ("weights/trailing-bytes-in-member", "manifest.json: members['weights.bin'].size: 176 bytes, but the tensors "
                                         "end at 112"),
])
def test_manifest_regressions(built, tmp_path, case_id, message):
    assert _refusal(_artifact(built, case_id, tmp_path)) == message


def test_a_newer_major_names_a_producer_with_control_characters_quoted(built, tmp_path):
    path = _artifact(built, "manifest-version/2.0 written by a newline producer", tmp_path)
    assert _refusal(path) == ("artifact format 2.0 was written by jaxport '9.9\\nerror: fake'; this jaxport (0.1.0) "
                              "reads format 1.x. Upgrade jaxport to read it.")


def test_a_flipped_bit_in_the_manifest_is_caught_by_its_crc(built, tmp_path):
    base, _ = built
    data = bytearray(base.data)
    at = data.index(b'"description": null') + len(b'"description": ')
    data[at:at + 4] = b'"ok"'  # still valid JSON, still a valid manifest
    path = tmp_path / "flipped.jaxport"
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as z:
        crc = z.getinfo("manifest.json").CRC
    message = _refusal(path)
    assert message.startswith("manifest.json is damaged: its CRC-32 is ")
    assert message.endswith(f", the zip directory says {crc:08x}. Re-download or re-export the artifact.")


@pytest.mark.parametrize(("case_id", "message"), [
    # the last directory entry's lengths ran into the end record, unnoticed
    ("zip-field-value/central[weights.bin].comment_length=1",
     "damaged artifact: the zip directory's entries end at offset "),
    # zipfile raised NotImplementedError for an unknown zip version: exit 1
    ("member-name/cp437-name", "member 'functions/µ.jaxexport' has a name with control characters, or non-ASCII "
                               "characters not marked as UTF-8."),
])
def test_container_regressions(built, tmp_path, case_id, message):
    assert _refusal(_artifact(built, case_id, tmp_path)).startswith(message)


def test_an_unknown_zip_version_is_a_format_error(built, tmp_path):
    base, _ = built
    at = next(f for f in base.fields if f.name == "central[manifest.json].version_needed").start
    data = bytearray(base.data)
    data[at:at + 2] = (0xD5).to_bytes(2, "little")  # 21.3, beyond what zipfile reads
    path = tmp_path / "v.jaxport"
    path.write_bytes(bytes(data))
    assert _refusal(path) == "damaged artifact: the zip directory cannot be read (zip file version 21.3)."


def test_npz_member_names_cut_at_nul_are_refused(built, tmp_path):
    from jaxport.run.values import npyio

    _, cases = built
    (case,) = [c for c in cases if c.id == "input-npz/name-nul"]
    path = tmp_path / "in.npz"
    path.write_bytes(case.data)
    with pytest.raises(npyio.InputError) as e:
        npyio.read_npz(path, {"x": "float32"})
    assert str(e.value) == (f"{path}: member 'x.npy\\x00.txt' has an unsafe name (absolute, an empty, '.' or '..' "
                            f"component, a drive, a backslash or NUL); refusing the file.")


@pytest.mark.parametrize(("text", "message"), [
    ("jaxport: 1\nargs: ['f32[" + "9" * 5000 + "]']\n",
     "spec.yaml:2: args[0].shape[0]: dimension 99999999999999999999... (5000 digits) is larger than 2**62."),
    ("jaxport: 1\ndims:\n  b: {max: " + "9" * 5000 + "}\nargs: ['f32[b]']\n",
     "spec.yaml:3: the number 99999999999999999999... has 5000 digits; a spec's numbers are at most 2**62. "
     "Shorten it."),
    ("jaxport: 1\ndims:\n  b: {max: 0x" + "f" * 40 + "}\nargs: ['f32[b]']\n",
     "spec.yaml:3: dims['b'].max: a number is larger than 2**62."),
    ("jaxport: 1\nargs: ['f32[" + ", ".join(["1"] * 65) + "]']\n",
     "spec.yaml:2: args[0]: the shape has 65 dimensions; at most 64 are allowed."),
    ("jaxport: 1\nargs: ['f32[4611686018427387904, 4611686018427387904]']\n",
     "spec.yaml:2: args[0]: the shape's constant dimensions multiply to 21267647932558653966460912964485513216 "
     "elements, more than 2**62."),
])
def test_spec_regressions(text, message):
    from jaxport.errors import SpecError
    from jaxport.spec import parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec(text, "spec.yaml")
    assert str(e.value) == message


def test_inspect_escapes_control_characters_from_the_manifest(built, run_cli, tmp_path):
    path = _artifact(built, "manifest-wrong-type/description-escape-sequence", tmp_path)
    res = run_cli("inspect", path)
    assert res.exit_code == 0
    assert "\x1b" not in res.stdout and "  \\x1b[2J\\x1b[31mpwned\n" in res.stdout


def test_an_error_message_is_one_line_with_control_characters_escaped():
    from jaxport_cli.errors import one_line

    assert one_line("bad\nline \x1b[31mred\x07") == "bad line \\x1b[31mred\\x07"


# --- native readers: a child process reads a program first ---------------------------------------------------------


def test_inspect_does_not_parse_programs(built, tmp_path):
    """A payload of garbage (digests recomputed) is shown by inspect, which never imports JAX; --mlir refuses it."""
    path = _artifact(built, "payload/random-1024", tmp_path)
    code = ("import sys; from jaxport_cli.main import main; sys.argv = ['jaxport', 'inspect', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'jax' not in sys.modules and 'jaxlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, capture_output=True)


def test_a_program_that_crashes_the_reader_is_refused_without_crashing_the_caller(monkeypatch):
    """The payload check's child dies by SIGSEGV (a real crash, in a stand-in for JAX's reader): a FormatError."""
    real = isolate.run
    monkeypatch.setattr(isolate, "run", lambda target, *a, **k: real("tests.hostile.crash:segfault", *a, **k))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv(isolate.ISOLATED_ENV, raising=False)
    with pytest.raises(FormatError) as e:
        isolate.check_payload(b"program bytes, first seen here", "m.jaxport", "f")
    assert str(e.value) == ("m.jaxport: function 'f': JAX's reader crashed with SIGSEGV (in native code, or on "
                            "reaching its memory limit of 2 GiB above what JAX itself uses) on this program in a test "
                            "process; the artifact is damaged or hostile. Do not load it; re-export it from its "
                            "source.")
    # refused once, refused again without a second child
    monkeypatch.setattr(isolate, "run", None)
    with pytest.raises(FormatError):
        isolate.check_payload(b"program bytes, first seen here", "m.jaxport", "f")


def test_a_child_is_held_to_its_memory_and_cpu_limits(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    memory = isolate.run("tests.hostile.crash:allocate", [], isolate.Limits(1 << 30, 60, 60.0))
    assert memory.returncode == 1 and b"MemoryError" in memory.stderr
    limits = isolate.Limits(None, 1, 60.0)
    cpu = isolate.run("tests.hostile.crash:spin", [], limits)
    assert cpu.death(limits) == "was killed by SIGXCPU (its CPU limit is 1 s, or it was killed from outside)"
    limits = isolate.Limits(None, None, 1.0)
    wall = isolate.run("tests.hostile.crash:spin", [], limits)
    assert wall.timed_out and wall.death(limits) == "ran longer than 1 s and was stopped"


def test_a_crashing_isolated_command_is_a_crash_error(run_cli, monkeypatch, tmp_path):
    """``--isolate``: the child that runs the command dies by a signal; the parent reports it, exit code 15."""
    import click
    from jaxport_cli import options

    from jaxport.errors import CrashError

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    ctx = click.Context(click.Command("call"), info_name="call")
    ctx.meta["jaxport.args"] = ["m.jaxport", "--isolate", "--memory-limit", "1G", "--random"]
    with pytest.raises(CrashError) as e:
        options.run_isolated(ctx, "m.jaxport", 1 << 30, 60, target="tests.hostile.crash:abort")
    assert str(e.value) == ("m.jaxport: the isolated process crashed with SIGABRT (in native code, or on reaching "
                            "its memory limit of 1 GiB). The artifact may be damaged or hostile; do not run it "
                            "without --isolate.")


def test_isolate_time_limit(run_cli, built, tmp_path, monkeypatch):
    base, _ = built
    monkeypatch.chdir(base.dir)
    # the child must outlast its limit whatever the machine's speed: it sleeps at start-up (sitecustomize, found on
    # the path the child is given: this process's own, not the environment's PYTHONPATH)
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text("import time\ntime.sleep(30)\n")
    monkeypatch.syspath_prepend(str(slow))
    res = run_cli("call", "base.jaxport", "--random", "--no-cache", "--isolate", "--time-limit", "1")
    assert res.exit_code == 15
    assert res.stderr.endswith("error[crash]: base.jaxport: the isolated process ran longer than 1 s and was "
                               "stopped. The artifact may be damaged or hostile; do not run it without --isolate.\n")


@pytest.mark.slow
def test_isolate_runs_call_and_inspect_mlir(run_cli, built, monkeypatch):
    base, _ = built
    monkeypatch.chdir(base.dir)
    direct = run_cli("call", "base.jaxport", "--random", "--no-cache", "--json")
    isolated = run_cli("call", "base.jaxport", "--random", "--no-cache", "--json", "--isolate", "--memory-limit", "8G")
    assert isolated.exit_code == 0, isolated.stderr
    import json

    assert json.loads(isolated.stdout)["outputs"] == json.loads(direct.stdout)["outputs"]
    mlir = run_cli("inspect", "--mlir", "base.jaxport", "--isolate")
    assert mlir.exit_code == 0 and "stablehlo" in mlir.stdout
    bad = run_cli("inspect", "--mlir", "missing.jaxport", "--isolate")
    assert (bad.exit_code, bad.stderr) == (7, "error[format]: missing.jaxport: file not found.\n")


@pytest.mark.slow
def test_the_readme_commands_for_untrusted_artifacts_run(tmp_path):
    import re
    import shlex
    import shutil

    section = (REPO / "README.md").read_text().split("## Untrusted artifacts", 1)[1]
    lines = re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip().splitlines()
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    jaxport = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]
    env = {**os.environ, "JAXPORT_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([*jaxport, "export", "examples/mlp/model.py:predict", "--shapes", "examples/mlp/spec.yaml", "-o",
                    "mlp.jaxport"], cwd=tmp_path, env=env, check=True, capture_output=True)
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "jaxport"
        res = subprocess.run([*jaxport, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert res.returncode == 0, f"{line}\n{res.stderr}"


def test_isolated_args_drop_only_the_isolate_options():
    from jaxport_cli.options import isolated_args

    assert isolated_args(["a.jaxport", "--isolate", "--memory-limit", "8G", "--time-limit=5", "-i", "x.npy",
                          "--json"]) == ["a.jaxport", "-i", "x.npy", "--json"]
