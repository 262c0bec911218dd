"""Trust boundary, outputs: what jaxport writes (one write helper, ``_fsio.atomic_output``) and what it shows (one
escape function, ``_text.visible``).

Writes: an output is never an input of the command, never a device, FIFO, socket or directory; temporary files are
created exclusively with random names and never followed through a planted link, and none is left after any error.
Terminal: no control, bidirectional or invisible character and no rich markup from an artifact, a spec or a file
name reaches the terminal as such, in any command's text output or error message.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import socket
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from jaxport._fsio import atomic_output, atomic_write, check_output, command_inputs, note_input
from jaxport._text import visible
from jaxport.errors import OutputError
from tests.hostile.corpus import artifact as build_artifact
from tests.support import EXAMPLES

# The characters that drive or fool a terminal: ESC (CSI and OSC sequences), BEL, C1 CSI, DEL, CR, backspace,
# bidirectional overrides and isolates, zero-width and invisible characters, a lone surrogate.
HOSTILE = "\x1b]8;;http://x\x07[bold red]R[/][link=http://x]L\x1b[2J\x9b\x7f\r\b\u202e\u2066\u200b\u3164\ud800"
RAW = ["\x1b", "\x07", "\x9b", "\x7f", "\r", "\b", "\u202e", "\u2066", "\u200b", "\u3164", "\ud800"]
SHOWN = r"\x1b]8;;http://x\x07[bold red]R[/][link=http://x]L\x1b[2J\x9b\x7f\r\x08\u202e\u2066\u200b\u3164\ud800"


def _clean(text: str) -> None:
    """``text`` holds no character that drives the terminal (rich's own table rules are printable)."""
    bad = [c for c in RAW if c in text]
    assert bad == [], f"raw {bad!r} in output: {text!r}"


# --- the escape function -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, shown", [
    ("plain f32[batch, 784] µs ✓ 日本", "plain f32[batch, 784] µs ✓ 日本"),
    ("\x1b[31mred", r"\x1b[31mred"),
    ("\x1b]0;title\x07", r"\x1b]0;title\x07"),
    ("a\x9bb\x85c\x7f", r"a\x9bb\x85c\x7f"),
    ("tab\tcr\rnl\nbs\b", r"tab\tcr\rnl\nbs\x08"),
    ("\u202eevil\u202c \u2066x\u2069", r"\u202eevil\u202c \u2066x\u2069"),
    ("zero\u200bwidth\u200d\ufeff\u00ad", r"zero\u200bwidth\u200d\ufeff\xad"),
    ("filler\u3164\u115f\u034f\ufe0f", r"filler\u3164\u115f\u034f\ufe0f"),
    ("surrogate\udcff\ud800", r"surrogate\udcff\ud800"),
    ("line\u2028para\u2029", r"line\u2028para\u2029"),
])
def test_visible_escapes_every_character_that_is_not_shown_as_itself(raw, shown):
    assert visible(raw) == shown
    assert visible(visible(raw)) == shown  # idempotent: escaping twice shows the same


def test_visible_keeps_only_our_own_line_breaks():
    assert visible("one\ntwo\x1b\r\nthree", newlines=True) == "one\ntwo\\x1b\\r\nthree"
    assert visible("one\ntwo") == r"one\ntwo"


def test_rich_rendering_shows_markup_and_escapes_literally():
    from jaxport_cli import render
    from rich.console import Console

    out = io.StringIO()
    console = render.stdout()
    console.file = out
    console.print(f"[bold]{render.escape(HOSTILE)}[/] after")
    console.print(f"[bold]{render.escape('ends in a backslash ' + chr(92) * 3)}[/] after")
    console.print(HOSTILE.replace("[", "("), markup=False)  # a renderer that forgot to escape: the console does
    text = out.getvalue()
    _clean(text)
    lines = text.splitlines()
    assert lines[0] == SHOWN + " after"
    assert lines[1].endswith(" after") and "[/]" not in lines[1]
    assert "\\x1b" in lines[2]
    assert isinstance(console, Console)


def test_json_output_escapes_control_and_bidirectional_characters(capsys):
    from jaxport_cli import render

    render.print_json({"name": HOSTILE})
    text = capsys.readouterr().out
    _clean(text)
    assert json.loads(text) == {"name": HOSTILE}


# --- hostile strings in artifacts, through every command --------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """examples/mlp copied, with an artifact that binds weights (``w.jaxport``, function ``apply``)."""
    import jaxport

    d = tmp_path_factory.mktemp("trust_output")
    for name in ("model.py", "spec-npz.yaml", "params.npz"):
        shutil.copy(EXAMPLES / "mlp" / name, d / name)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        jaxport.export("model.py:apply", "spec-npz.yaml", output="w.jaxport", write_manifest=False)
    finally:
        os.chdir(cwd)
    return d


def _rewrite(src: Path, dst: Path, edit) -> Path:
    with zipfile.ZipFile(src) as z:
        m = json.loads(z.read("manifest.json"))
        members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    edit(m)
    dst.write_bytes(build_artifact(m, members))
    return dst


def _hostile_manifest(m):
    e = "\x1b]8;;h\x07[red]R[/]\u202e\x9b"  # platform names are at most 32 characters
    m["metadata"].update(name="n" + e, description=HOSTILE, labels={HOSTILE: HOSTILE})
    m["producer"]["jax"] += e
    f = m["functions"]["apply"]
    f.update(platforms=["c" + e], entrypoint="model.py:apply" + HOSTILE)


@pytest.fixture(scope="module")
def hostile(work):
    return _rewrite(work / "w.jaxport", work / "hostile.jaxport", _hostile_manifest)


@pytest.mark.parametrize("args", [
    ["inspect", "{h}"],
    ["check", "{h}", "--max-age", "1"],
    ["diff", "{w}", "{h}"],
    ["diff", "{h}", "{w}", "--no-programs"],
])
def test_manifest_strings_never_reach_the_terminal_raw(run_cli, work, hostile, args):
    res = run_cli(*[a.format(h=hostile, w=work / "w.jaxport") for a in args])
    assert res.exit_code in (0, 14), res.stderr
    _clean(res.stdout)
    _clean(res.stderr)
    assert "\\x1b]8;;h\\x07[red]R[/]\\u202e\\x9b" in res.stdout  # shown, markup and all


def test_check_violation_line_escapes_the_recorded_version(run_cli, hostile):
    res = run_cli("check", hostile, "--max-age", "1")
    assert res.exit_code == 14
    assert "written with jax 0.10.2\\x1b]8;;h\\x07[red]R[/]\\u202e\\x9b" in res.stdout or \
           "\\x1b]8;;h\\x07[red]R[/]\\u202e\\x9b" in res.stdout
    assert res.stderr.startswith("error[violation]: ") and res.stderr.count("\n") == 1
    _clean(res.stderr)


@pytest.mark.parametrize("command", ["inspect", "diff", "check"])
def test_json_views_of_hostile_manifests_are_json_with_escapes(run_cli, work, hostile, command):
    args = {"inspect": [hostile], "diff": [work / "w.jaxport", hostile], "check": [hostile, "--max-age", "100000"]}
    res = run_cli(command, *args[command], "--json")
    _clean(res.stdout)
    json.loads(res.stdout)


def test_file_names_are_escaped_in_headers_and_wrote_lines(run_cli, work, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = "a\x1b]0;pwn\x07[red]r[bold]\u202e.jaxport"
    shutil.copy(work / "w.jaxport", name)
    res = run_cli("inspect", name)
    assert res.exit_code == 0, res.stderr
    _clean(res.stdout)
    assert "(a\\x1b]0;pwn\\x07[red]r[bold]\\u202e.jaxport, " in res.stdout
    out = "o\x1b[2J[bold]\u202e.npz"
    res = run_cli("call", name, "--random", "--no-cache", "-o", out)
    assert res.exit_code == 0, res.stderr
    _clean(res.stdout + res.stderr)
    assert res.stdout.splitlines()[-1] == "Wrote o\\x1b[2J[bold]\\u202e.npz (1 array)"
    res = run_cli("extract", name, "--payload", "apply", "-o", "p\x1b[1m.bin")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("wrote p\\x1b[1m.bin (payload, ")


def test_error_messages_escape_file_names_and_keep_one_line(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run_cli("inspect", "missing\x1b[31m\u202e\nnext.jaxport")
    assert res.exit_code == 7
    assert res.stderr == "error[format]: missing\\x1b[31m\\u202e next.jaxport: file not found.\n"
    res = run_cli("inspect", "missing\x1b[31m.jaxport", "--json")
    _clean(res.stdout)
    assert json.loads(res.stdout)["error"]["message"] == "missing\\x1b[31m.jaxport: file not found."


def test_inspect_mlir_text_is_made_visible_line_by_line():
    from jaxport_cli.render import plain_lines

    text = 'module {\n  func.func @main() loc("m\x1b[2J\u202e.py":1:1)\n}'
    assert plain_lines(text) == 'module {\n  func.func @main() loc("m\\x1b[2J\\u202e.py":1:1)\n}'


# --- outputs: one write helper ----------------------------------------------------------------------------------


def _no_temporaries(d: Path) -> None:
    assert [p.name for p in d.iterdir() if p.name.endswith(".tmp")] == []


def test_a_symlink_planted_at_the_output_is_replaced_never_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "result.bin").symlink_to(victim)
    atomic_write(out_dir / "result.bin", lambda f: f.write(b"new"))
    assert victim.read_text() == "precious"
    assert not (out_dir / "result.bin").is_symlink()
    assert (out_dir / "result.bin").read_bytes() == b"new"
    _no_temporaries(out_dir)


def test_temporary_names_are_random_and_created_exclusively(tmp_path, monkeypatch):
    """Links planted at every name the old writers used (``.NAME.PID-...tmp``) are never followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    for tag in ("output", "a", "b", "x", ""):
        (out / f".r.npy.{os.getpid()}-{tag}.npy.tmp").symlink_to(victim)
    seen = []

    def write(f):
        seen.extend(p.name for p in out.iterdir() if not p.is_symlink() and p.name.endswith(".tmp"))
        f.write(b"data")

    atomic_write(out / "r.npy", write)
    atomic_write(out / "r.npy", write)
    assert victim.read_text() == "precious"
    assert seen[0] != seen[1] and all(s.startswith(f".r.npy.{os.getpid()}-") for s in seen)
    assert (out / "r.npy").read_bytes() == b"data"


def _bound_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: _bound_socket(p), "a socket"),
])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path, make, kind):
    target = tmp_path / "out.npz"
    make(target)
    with pytest.raises(OutputError) as e:
        atomic_write(target, lambda f: f.write(b"x"))
    assert str(e.value) == (f"{target}: is {kind}, not a regular file; jaxport writes each output as a new regular "
                            f"file and will not replace {kind}. Give the path of a file.")
    _no_temporaries(tmp_path)


def test_a_device_output_is_refused():
    with pytest.raises(OutputError, match=r"^/dev/null: is a character device, not a regular file; "):
        check_output("/dev/null")


def test_an_output_that_is_an_input_is_refused_by_identity(tmp_path):
    source = tmp_path / "in.npy"
    source.write_bytes(b"input")
    (tmp_path / "hard.npy").hardlink_to(source)
    (tmp_path / "soft.npy").symlink_to(source)
    with command_inputs():
        note_input(source)
        for name in ("in.npy", "hard.npy", "soft.npy"):
            with pytest.raises(OutputError) as e:
                atomic_write(tmp_path / name, lambda f: f.write(b"output"))
            assert str(e.value) == (f"{tmp_path / name}: is the same file as the input {source}; writing the output "
                                    f"there would destroy that input. Choose another output file.")
    assert source.read_bytes() == b"input"
    atomic_write(tmp_path / "hard.npy", lambda f: f.write(b"later"))  # outside the command: an ordinary file
    _no_temporaries(tmp_path)


def test_a_loaded_python_module_is_never_replaced():
    import jaxport._text as module

    with pytest.raises(OutputError, match=r"is the same file as the input .*_text\.py \(Python module "
                                          r"jaxport\._text\)"):
        check_output(module.__file__)


@pytest.mark.parametrize("failure", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_failed_write_leaves_no_temporary_and_the_old_file(tmp_path, failure):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def write(f):
        f.write(b"x" * 100)
        raise OSError(failure, os.strerror(failure))

    with pytest.raises(OutputError, match=f"^{target}: cannot write: {os.strerror(failure)}"):
        atomic_write(target, write)
    assert target.read_bytes() == b"old"
    _no_temporaries(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_at_flush_and_close_leaves_no_temporary(tmp_path, monkeypatch):
    """The buffered data fails to flush with ENOSPC, and fails again when the file is closed."""
    real = tempfile.mkstemp

    def full(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        os.dup2(os.open("/dev/full", os.O_WRONLY), fd)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", full)
    target = tmp_path / "out.bin"
    with pytest.raises(OutputError, match=f"^{target}: cannot write: No space left on device. Free space"):
        atomic_write(target, lambda f: f.write(b"x" * 100))
    assert not target.exists()
    _no_temporaries(tmp_path)


@pytest.mark.parametrize("error", [KeyboardInterrupt, ValueError])
def test_an_interrupted_or_failing_writer_leaves_no_temporary(tmp_path, error):
    target = tmp_path / "out.bin"

    def write(f):
        f.write(b"partial")
        raise error()

    with pytest.raises(error):
        atomic_write(target, write)
    assert not target.exists()
    _no_temporaries(tmp_path)
    with pytest.raises(error), atomic_output(target) as f:
        f.write(b"partial")
        raise error()
    _no_temporaries(tmp_path)


def test_a_fifo_planted_as_a_stale_temporary_does_not_block(tmp_path):
    os.mkfifo(tmp_path / ".out.bin.1-abcdef.tmp")
    (tmp_path / ".out.bin.999999999-x.tmp").symlink_to("/etc/passwd")
    (tmp_path / ".out.bin.99999999999999-x.tmp").write_bytes(b"")
    atomic_write(tmp_path / "out.bin", lambda f: f.write(b"ok"))
    assert (tmp_path / "out.bin").read_bytes() == b"ok"
    assert (tmp_path / ".out.bin.1-abcdef.tmp").exists()  # not a regular file: left alone


def test_an_overlong_output_name_keeps_its_temporary_name_valid(tmp_path):
    target = tmp_path / ("n" * 250)
    atomic_write(target, lambda f: f.write(b"ok"))
    assert target.read_bytes() == b"ok"
    with pytest.raises(OutputError, match=r"cannot write: File name too long\.$"):
        atomic_write(tmp_path / ("n" * 300), lambda f: f.write(b"ok"))
    with pytest.raises(OutputError, match=r"the path contains a NUL byte\.$"):
        atomic_write(tmp_path / "a\0b", lambda f: f.write(b"ok"))


# --- every command's outputs -------------------------------------------------------------------------------------


SAME = ("is the same file as the input {}; writing the output there would destroy that input. Choose another output "
        "file.")


def test_export_refuses_to_replace_its_spec_model_or_bound_weights(run_cli, work, monkeypatch):
    monkeypatch.chdir(work)
    before = {n: (work / n).read_bytes() for n in ("spec-npz.yaml", "model.py", "params.npz")}
    for output, source in (("spec-npz.yaml", "spec-npz.yaml"), ("params.npz", "params.npz")):
        res = run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "-o", output)
        assert res.exit_code == 11, res.stderr
        assert res.stderr == f"error[output]: {output}: {SAME.format(source)}\n"
    res = run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "-o", "model.py")
    assert res.exit_code == 11
    assert res.stderr.startswith("error[output]: model.py: is the same file as the input ")
    res = run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "-o", "x.jaxport", "--no-manifest")
    assert res.exit_code == 0
    (work / "x.jaxport").unlink()
    assert {n: (work / n).read_bytes() for n in before} == before
    _no_temporaries(work)


def test_export_refuses_a_sidecar_over_the_spec_before_writing_anything(run_cli, work, monkeypatch):
    monkeypatch.chdir(work)
    shutil.copy("spec-npz.yaml", "a.jaxport.manifest.json")
    res = run_cli("export", "model.py:apply", "-s", "a.jaxport.manifest.json", "-o", "a.jaxport")
    assert res.exit_code == 11
    assert res.stderr == f"error[output]: a.jaxport.manifest.json: {SAME.format('a.jaxport.manifest.json')}\n"
    assert not Path("a.jaxport").exists()
    Path("a.jaxport.manifest.json").unlink()


@pytest.mark.parametrize("args", [
    ["--payload", "apply", "-o", "{a}"],
    ["--mlir", "apply", "-o", "{a}"],
    ["--payload", "apply", "-o", "hard.jaxport"],
    ["--payload", "apply", "-o", "soft.jaxport"],
])
def test_extract_refuses_to_replace_the_artifact(run_cli, work, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    shutil.copy(work / "w.jaxport", "a.jaxport")
    Path("hard.jaxport").hardlink_to("a.jaxport")
    Path("soft.jaxport").symlink_to("a.jaxport")
    before = Path("a.jaxport").read_bytes()
    res = run_cli("extract", "a.jaxport", *[a.format(a="a.jaxport") for a in args])
    assert res.exit_code == 11
    output = args[-1].format(a="a.jaxport")
    assert res.stderr == f"error[output]: {output}: {SAME.format('a.jaxport')}\n"
    assert Path("a.jaxport").read_bytes() == before


@pytest.mark.parametrize("command", [
    ["extract", "{a}", "--payload", "apply", "-o", "/dev/null"],
    ["extract", "{a}", "--payload", "apply", "-o", "fifo"],
    ["call", "{a}", "--random", "--no-cache", "-o", "fifo.npz"],
    ["call", "{a}", "--random", "--no-cache", "--batch-size", "1", "-o", "fifo.npz"],
])
def test_commands_refuse_outputs_that_are_not_regular_files(run_cli, work, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    os.mkfifo("fifo.npz")
    res = run_cli(*[c.format(a=work / "w.jaxport") for c in command])
    assert res.exit_code == 11, res.stderr
    kind = "a character device" if "/dev/null" in command else "a FIFO (named pipe)"
    assert f"is {kind}, not a regular file; jaxport writes each output as a new regular file" in res.stderr
    _no_temporaries(tmp_path)


def test_call_refuses_to_replace_its_inputs(run_cli, work, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.ones((3, 784), np.float32))
    before = Path("x.npy").read_bytes()
    for extra in ([], ["--batch-size", "2"]):
        res = run_cli("call", work / "w.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "x.npy", *extra)
        assert res.exit_code == 11, res.stderr
        assert res.stderr.splitlines()[-1] == f"error[output]: x.npy: {SAME.format('x.npy')}"
        assert Path("x.npy").read_bytes() == before
    res = run_cli("call", work / "w.jaxport", "--random", "--no-cache", "-o", str(work / "w.jaxport").replace(
        ".jaxport", ".npz"))
    assert res.exit_code == 0, res.stderr
    (work / "w.npz").unlink()
    _no_temporaries(tmp_path)


def test_streamed_output_never_follows_planted_links(run_cli, work, tmp_path, monkeypatch):
    """The old streaming writer used ``.NAME.PID-OUTPUT.npy.tmp``: a link planted there was written through."""
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    np.save("x.npy", np.ones((5, 784), np.float32))
    out = tmp_path / "out"
    out.mkdir()
    for pid in range(os.getpid() - 5, os.getpid() + 50):
        for name in ("output.npz", "output.npy"):
            (out / f".{name}.{pid}-output.npy.tmp").symlink_to(victim)
    for name in ("output.npz", "output.npy"):
        res = run_cli("call", work / "w.jaxport", "--inputs", "x.npy", "--no-cache", "--batch-size", "2", "-o",
                      out / name)
        assert res.exit_code == 0, res.stderr
        assert victim.read_bytes() == b"precious"
    whole = run_cli("call", work / "w.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "whole.npy")
    assert whole.exit_code == 0
    np.testing.assert_allclose(np.load(out / "output.npy"), np.load("whole.npy"), rtol=1e-6)
    with np.load(out / "output.npz") as z:
        np.testing.assert_allclose(z["output"], np.load("whole.npy"), rtol=1e-6)


def test_a_failing_streamed_call_leaves_no_file(work, tmp_path, monkeypatch):
    import jaxport
    from jaxport.run.calls import streaming

    loaded = jaxport.load(work / "w.jaxport")
    x = np.ones((6, 784), np.float32)
    calls = [0]
    real = type(loaded).run

    def failing(self, arrays, *a, **k):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real(self, arrays, *a, **k)

    monkeypatch.setattr(type(loaded), "run", failing)
    for name in ("o.npy", "o.npz"):
        calls[0] = 0
        with pytest.raises(KeyboardInterrupt):
            streaming.call(loaded, {"x": x}, 2, tmp_path / name)
        assert list(tmp_path.iterdir()) == []


def test_extract_safetensors_refuses_a_tensor_named_metadata(run_cli, work, tmp_path, monkeypatch):
    def rename(m):
        t = m["weights"]["tensors"]
        t["__metadata__"] = t.pop("params/b1")
        m["weights"]["tensors"] = dict(sorted(t.items(), key=lambda kv: kv[1]["offset"]))
        f = m["functions"]["apply"]
        f["weights"] = ["__metadata__" if n == "params/b1" else n for n in f["weights"]]

    monkeypatch.chdir(tmp_path)
    art = _rewrite(work / "w.jaxport", tmp_path / "meta.jaxport", rename)
    res = run_cli("extract", art, "--weights", "w.safetensors")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: w.safetensors: a tensor is named '__metadata__', the key a .safetensors "
                          "header reserves for its metadata; the file could not be read back. Write .npz instead.\n")
    assert not Path("w.safetensors").exists()
    res = run_cli("extract", art, "--weights", "w.npz")
    assert res.exit_code == 0
    with np.load("w.npz") as z:
        assert "__metadata__" in z.files


def test_extract_safetensors_refuses_complex128(tmp_path, monkeypatch):
    from jaxport.artifact.extract import weights
    from jaxport.errors import UsageError

    class Art:
        path = tmp_path / "a.jaxport"

    monkeypatch.setattr(weights, "weight_arrays", lambda art: {"z": np.zeros(2, np.complex128)})
    with pytest.raises(UsageError) as e:
        weights.extract_weights(Art(), tmp_path / "w.safetensors")
    assert str(e.value) == (f"{tmp_path / 'w.safetensors'}: .safetensors cannot record the dtype of 1 tensor(s): "
                            f"'z' (complex128). Write .npz instead.")


def test_debug_tracebacks_are_made_visible(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run_cli("inspect", "missing\x1b[31m\u202e.jaxport", "--debug")
    assert res.exit_code == 7
    assert "Traceback" in res.stderr
    _clean(res.stderr)
    assert res.stderr.splitlines()[-1] == "error[format]: missing\\x1b[31m\\u202e.jaxport: file not found."


def test_compile_refuses_to_replace_the_artifact_before_compiling(run_cli, work, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(work / "w.jaxport", "a.jaxport")
    before = Path("a.jaxport").read_bytes()
    for output, shown in (("a.jaxport", "a.jaxport"), ("a.vmfb", "a.run.json"), ("b.vmfb", "b.irpa")):
        if output != "a.jaxport":
            Path(shown).symlink_to("a.jaxport")
        res = run_cli("compile", "a.jaxport", "-o", output)
        assert res.exit_code == 11, res.stderr
        assert res.stderr == f"error[output]: {shown}: {SAME.format('a.jaxport')}\n"
    assert Path("a.jaxport").read_bytes() == before
