"""inspect: what a user sees, what a machine reads, and that it never needs JAX."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys

import pytest

import jaxport
from jaxport.artifact.container import MANIFEST_NAME, open_artifact, write_artifact
from tests.support import EXAMPLES


@pytest.fixture(scope="module")
def pytree_artifact(pytree_path):
    return pytree_path


def test_signature_line_as_a_user_would_write_it(tmp_path, run_cli):
    out = tmp_path / "mlp.jaxport"
    jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out)
    res = run_cli("inspect", out)
    assert res.exit_code == 0, res.stderr
    assert "predict: predict(x: f32[batch, 784]) -> f32[batch, 10]   where 1 <= batch <= 4096" in res.stdout
    assert "batch = x.shape[0]" in res.stdout
    assert "sha256 verified" in res.stdout


def test_pytree_view_shows_dims_constraints_and_checks(pytree_artifact, run_cli):
    text = run_cli("inspect", pytree_artifact).stdout
    assert ("encode(x: f32[batch, 2*h], mask: bf16[batch, 16], scale=3, params: {w: f32[h, 10], b: f32[10]}) -> "
            "{features: f32[batch, 10], norm: f32[]}   where 1 <= batch <= 4096, h >= 2, batch <= 8 * h") in text
    assert "solved from x.shape[1] == 2*h" in text
    assert "constraints: batch <= 8 * h" in text
    assert "constraint batch <= 8 * h. Expected '8*h - batch' to be greater or equal to 0" in text
    assert "encoder 1.2.0" in text and "labels: team=search" in text


def test_json_is_the_manifest(pytree_artifact, run_cli):
    res = run_cli("inspect", pytree_artifact, "--json")
    assert res.exit_code == 0
    assert json.loads(res.stdout) == open_artifact(pytree_artifact).manifest


def test_mlir_prints_the_wrapped_main(pytree_artifact, run_cli):
    res = run_cli("inspect", pytree_artifact, "--mlir")
    assert res.exit_code == 0, res.stderr
    assert "func.func public @main(" in res.stdout
    assert "@shape_assertion" in res.stdout
    assert "loc(" not in res.stdout


def test_unknown_function(pytree_artifact, run_cli):
    res = run_cli("inspect", pytree_artifact, "--function", "encod")
    assert res.exit_code == 2
    assert res.stderr == "error[usage]: the artifact has no function 'encod'. Did you mean 'encode'? Functions: " \
                         "encode.\n"


def test_damaged_member_is_reported(pytree_artifact, tmp_path, run_cli):
    data = bytearray(pytree_artifact.read_bytes())
    art = open_artifact(pytree_artifact)
    member = art.members["functions/encode.jaxexport"]
    data[member.offset + 100] ^= 0x01
    bad = tmp_path / "bad.jaxport"
    bad.write_bytes(bytes(data))
    res = run_cli("inspect", bad)
    assert res.exit_code == 8
    assert res.stderr.startswith(f"error[integrity]: {bad}: member 'functions/encode.jaxexport' is damaged: its "
                                 f"sha256 is ")
    assert "Traceback" not in res.stderr


def test_missing_file(run_cli, tmp_path):
    res = run_cli("inspect", tmp_path / "none.jaxport")
    assert res.exit_code == 7
    assert res.stderr == f"error[format]: {tmp_path}/none.jaxport: file not found.\n"


def test_inspect_and_help_do_not_import_jax(pytree_artifact):
    code = ("import sys\nfrom jaxport_cli.main import cli\n"
            "for args in (['--help'], ['inspect', sys.argv[1]], ['inspect', '--json', sys.argv[1]]):\n"
            "    try:\n        cli(args, prog_name='jaxport')\n    except SystemExit as e:\n"
            "        assert e.code == 0, e.code\n"
            "print('JAX', 'jax' in sys.modules, 'numpy' in sys.modules)\n")
    res = subprocess.run([sys.executable, "-c", code, str(pytree_artifact)], capture_output=True, text=True,
                         check=True)
    assert res.stdout.strip().endswith("JAX False False")


def test_a_zero_lower_bound_is_shown_as_written(tmp_path, run_cli):
    """``min: 0`` (which the format allows, though a spec cannot write it) is honoured: shown as 0, not 1."""
    old = tmp_path / "mlp.jaxport"
    jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=old,
                   write_manifest=False)
    with open_artifact(old) as art:
        manifest = copy.deepcopy(art.manifest)
        members = {name: art.read(name) for name in art.members if name != MANIFEST_NAME}
    manifest["functions"]["predict"]["dims"]["batch"]["min"] = 0
    new = tmp_path / "mlp0.jaxport"
    write_artifact(new, manifest, members)

    res = run_cli("inspect", new)
    assert res.exit_code == 0, res.stderr
    assert "predict(x: f32[batch, 784]) -> f32[batch, 10]   where 0 <= batch <= 4096" in res.stdout
    rows = [line.replace("│", " ").split() for line in res.stdout.splitlines() if line.strip().startswith("batch ")]
    assert [row[:3] for row in rows] == [["batch", "0", "4096"]]  # the dimension variables table

    res = run_cli("diff", old, new, "--json")
    assert res.exit_code == 0, res.stderr
    (change,) = json.loads(res.stdout)["changes"]
    assert (change["severity"], change["kind"], change["message"], change["old"], change["new"]) == (
        "compatible", "bound_relaxed", "dimension 'batch': 1 <= batch <= 4096 -> 0 <= batch <= 4096 (more shapes "
        "accepted)", {"min": 1, "max": 4096}, {"min": 0, "max": 4096})


# --- the plain renderer prints what rich printed, and the fast path what the command prints ----------------------


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    encoding = "utf-8"

    def isatty(self):
        return True


#: (stream kind, environment) pairs: a pipe, and terminals in colour, without colour, dumb, and declared plain.
_CONSOLES = [
    ("pipe", {}),
    ("pipe", {"FORCE_COLOR": "1", "TERM": "xterm-256color"}),
    ("terminal", {"COLUMNS": "200", "TERM": "xterm", "COLORTERM": "truecolor"}),
    ("terminal", {"COLUMNS": "200", "NO_COLOR": "1"}),
    ("terminal", {"COLUMNS": "200", "TERM": "dumb"}),
    ("terminal", {"COLUMNS": "200", "TTY_COMPATIBLE": "0"}),
    ("terminal", {"COLUMNS": "40"}),  # tables wider than the terminal: left to rich, which wraps them
]


def _both_ways(doc, kind, env):
    """What the plain renderer gives (None: left to rich) and what rich prints, for one console."""
    from jaxport_cli import render

    plain_stream = _Terminal() if kind == "terminal" else io.StringIO()
    rich_stream = _Terminal() if kind == "terminal" else io.StringIO()
    doc.render_rich(console=render._console(False, stream=rich_stream, environ=env))
    return doc.render_plain(plain_stream, env), rich_stream.getvalue()


@pytest.fixture(scope="module")
def bound_artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("bound") / "mlp-bound.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-bound.yaml", output=out).path


def _foreign_text_artifact(source, tmp_path):
    """``source`` with a description, labels and an input name holding escapes, wide and accented characters."""
    with open_artifact(source) as art:
        manifest = copy.deepcopy(art.manifest)
        members = {name: art.read(name) for name in art.members if name != MANIFEST_NAME}
    manifest["metadata"]["description"] = "tab\there \x1b[31mred\x1b[0m, 模型, café, zero\u200bwidth"
    manifest["metadata"]["labels"] = {"équipe": "模型"}
    fname = next(iter(manifest["functions"]))
    manifest["functions"][fname]["inputs"][0]["name"] = "x模型é"
    for d in manifest["functions"][fname]["dims"].values():
        d["derived_from"]["input"] = "x模型é"
    path = tmp_path / "foreign.jaxport"
    write_artifact(path, manifest, members)
    return path


def test_plain_tables_are_what_rich_prints(pytree_artifact, bound_artifact, tmp_path):
    """`inspect` renders its tables as plain text, without importing rich, exactly as rich rendered them: on a
    pipe and on terminals (colour, NO_COLOR, TERM=dumb, TTY_COMPATIBLE=0); a table wider than the terminal is left
    to rich, which wraps it."""
    from jaxport_cli.inspect_view import document

    mlp = tmp_path / "mlp.jaxport"
    jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=mlp)
    compared = 0
    for path in (mlp, pytree_artifact, bound_artifact, _foreign_text_artifact(bound_artifact, tmp_path)):
        with open_artifact(path) as art:
            doc = document(art, None)
        for kind, env in _CONSOLES:
            plain, rich = _both_ways(doc, kind, env)
            if env.get("COLUMNS") == "40":
                assert plain is None, path
                continue
            assert plain == rich, (path, kind, env)
            compared += 1
    assert compared == 4 * 6
    # the colours are there, as rich writes them, and the foreign text is escaped
    plain, _ = _both_ways(document(open_artifact(bound_artifact), None), "terminal", _CONSOLES[2][1])
    assert "\x1b[1;36mapply\x1b[0m" in plain and "\x1b[32mguaranteed\x1b[0m" in plain
    plain, _ = _both_ways(document(open_artifact(tmp_path / "foreign.jaxport"), None), "pipe", {})
    assert "  tab\\there \\x1b[31mred\\x1b[0m, 模型, café, zero\\u200bwidth\n" in plain
    assert " x模型é │ f32[batch, 784] │ -        \n" in plain


def test_raw_delete_and_escaped_controls_are_escaped_on_the_fast_path(bound_artifact, tmp_path):
    """The view skips escaping when the manifest's bytes are ASCII without a backslash; a raw DEL (JSON lets it
    stand unescaped in a string, though jaxport writes it as an escape) and a control character written as an escape
    are still shown escaped."""
    from jaxport_cli.inspect_view import output

    from tests.hostile.corpus import artifact

    with open_artifact(bound_artifact) as art:
        manifest = copy.deepcopy(art.manifest)
        members = {name: art.read(name) for name in art.members if name != MANIFEST_NAME}
    for text, shown in (("rub\x7fout", "rub\\x7fout"), ("bell\x07", "bell\\x07")):
        manifest["metadata"]["description"] = text
        raw = json.dumps(manifest, indent=2, ensure_ascii=False).encode()
        assert raw.isascii() and (b"rub\x7fout" in raw or b"bell\\u0007" in raw)
        path = tmp_path / "controls.jaxport"
        path.write_bytes(artifact(manifest, members, relist=False, raw=raw))
        printed = output(str(path), False, None)
        assert f"  {shown}\n" in printed and text not in printed


def _fast(args, cwd=None):
    """``jaxport ARGS`` through the console script's ``main``, reporting which of click and rich it imported."""
    code = ("import sys\nfrom jaxport_cli.main import main\nsys.argv = ['jaxport', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            "sys.stdout.flush()\n"
            "sys.stderr.write(f'\\n{code} {\"click\" in sys.modules} {\"rich\" in sys.modules}')\n")
    res = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    err, _, tail = res.stderr.rpartition("\n")
    code, click, rich = tail.split()
    return int(code), res.stdout, err, click == "True", rich == "True"


def test_fast_path_prints_what_the_command_prints(pytree_artifact, run_cli, tmp_path):
    """`inspect ARTIFACT`, `--json` and `--function` run without click or rich and print what the click command
    prints; other options and every error go through the command, with its messages and exit codes."""
    for args in (["inspect", pytree_artifact], ["inspect", "--json", pytree_artifact],
                 ["inspect", pytree_artifact, "--function", "encode", "--debug"],
                 ["inspect", "--function=encode", pytree_artifact, "--json"]):
        code, out, err, click, rich = _fast(args)
        expected = run_cli(*args)
        assert (code, out, err) == (0, expected.stdout, ""), args
        assert not click and not rich, args
    missing = tmp_path / "none.jaxport"
    for args, status, message in (
            (["inspect", missing], 7, f"error[format]: {missing}: file not found."),
            (["inspect", pytree_artifact, "--function", "encod"], 2,
             "error[usage]: the artifact has no function 'encod'. Did you mean 'encode'? Functions: encode."),
            (["inspect", pytree_artifact, "--bogus"], 2,
             "error[usage]: No such option '--bogus'. See 'jaxport inspect --help'.")):
        code, out, err, click, rich = _fast(args)
        assert (code, out, err.strip()) == (status, "", message), args
        assert click


RANGED_MODEL = "def f(tok, senders, x):\n    return x[senders] * tok[0]\n"
RANGED_SPEC = """jaxport: 1
dims: {nodes: {max: 64}, edges: {max: 256}}
args:
  - {shape: "4", dtype: i32, range: [0, 32000]}
  - {shape: "edges", dtype: i32, range: [0, nodes]}
  - "f32[nodes]"
"""


def test_inputs_show_their_ranges(tmp_path, run_cli):
    """A range column beside the types where an input has a range: declared ([0, 32000), a dimension's indices
    [0, nodes)) or none (-); --json gives the manifest's ranges; the fast path (no click, rich, numpy or JAX) prints the
    same."""
    (tmp_path / "model.py").write_text(RANGED_MODEL)
    (tmp_path / "spec.yaml").write_text(RANGED_SPEC)
    out = jaxport.export(f"{tmp_path}/model.py:f", tmp_path / "spec.yaml", output=tmp_path / "r.jaxport").path
    res = run_cli("inspect", out)
    assert res.exit_code == 0, res.stderr
    rows = {cells[0]: cells[1:] for line in res.stdout.split("outputs")[0].splitlines()
            if len(cells := [c.strip() for c in line.split("│")]) == 4}
    assert rows == {"tok": ["i32[4]", "[0, 32000)", "-"], "senders": ["i32[edges]", "[0, nodes)", "-"],
                    "x": ["f32[nodes]", "-", "-"]}
    assert " name    ┃ type       ┃ range      ┃ sharding " in res.stdout
    inputs = json.loads(run_cli("inspect", out, "--json").stdout)["functions"]["f"]["inputs"]
    assert [i.get("range") for i in inputs] == [[0, 32000], [0, "nodes"], None]
    code, fast, err, click, rich = _fast(["inspect", out])
    assert (code, fast, err) == (0, res.stdout, "") and not click
