"""No output of any command replaces a file the command reads (specs/CLI.md, Conventions; issue 46): every output
option of every command, given the path of each file another of its options names, is refused with exit 11 and
one line naming both, and the input's bytes are unchanged.

The options are found by introspecting the click commands (``jaxport_cli.files``: an ``OutputPath`` is written,
every other path, and every text that holds paths, is read), and :data:`READS` and :data:`WRITES` must cover them
exactly: an option added to a command fails this test until it is given a file here, so it is walked too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import numpy as np
import pytest
from jaxport_cli.files import output_options, read_options
from jaxport_cli.group import cli

from tests.support import EXAMPLES

pytest.importorskip("model_signing", reason="sign's options need the extra jaxport[sign]")

from tests.sign.keys import key_pair, pki  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "golden" / "1.0"
SAME = ("error[output]: {out}: is the same file as the input {inp}; writing the output there would destroy that "
        "input. Choose another output file.")

#: {command: a command line that runs, with "{art}" for its artifact (or entry point) and "{NAME}" for the file
#: of each read option NAME it gives}.
BASE = {
    "call": ["call", "{artifact}", "--inputs", "{items}", "--no-cache"],
    "export": ["export", "{entrypoint}:apply", "--shapes", "{spec_path}"],
    "extract": ["extract", "{artifact}"],
    "import": ["import", "{module}"],
    "rebind": ["rebind", "{artifact}", "--bind", "params={binds}"],
    "upgrade": ["upgrade", "{artifact}"],
    "sign": ["sign", "{artifact}", "--key", "{key}"],
    "compile": ["compile", "{artifact}"],
    "target": ["target"],
}
#: {command: {read option: (the fixture file it names, the extra arguments that give it, beyond BASE)}}. An option
#: whose file BASE gives has no extra arguments.
READS: dict[str, dict[str, tuple[str, list[str]]]] = {
    "call": {"artifact": ("mlp-bound.jaxport", []), "items": ("inputs.npz", []),
             "expect": ("expected.npz", ["--expect", "{expect}"]),
             "require_signature": ("ci.pub", ["--require-signature", "{require_signature}"]),
             "signature_path": ("mlp-bound.jaxport.sig", ["--require-signature", "ci.pub", "--signature",
                                                          "{signature_path}"]),
             "cotangents": ("cotangents.npz", ["--vjp", "--cotangents", "{cotangents}"])},
    "export": {"entrypoint": ("model.py", []), "spec_path": ("spec-npz.yaml", []),
               "binds": ("params.npz", ["--bind", "params={binds}"])},
    "extract": {"artifact": ("mlp-bound.jaxport", [])},
    "import": {"module": ("f.jaxexport", []), "spec_path": ("import-spec.yaml", ["--shapes", "{spec_path}"])},
    "rebind": {"artifact": ("mlp-bound.jaxport", []), "binds": ("params.npz", []),
               "require_signature": ("ci.pub", ["--require-signature", "{require_signature}"]),
               "signature_path": ("mlp-bound.jaxport.sig", ["--require-signature", "ci.pub", "--signature",
                                                            "{signature_path}"])},
    "upgrade": {"artifact": ("mlp-bound.jaxport", [])},
    "sign": {"artifact": ("mlp-bound.jaxport", []), "key": ("ci.pem", []),
             "certificate": ("leaf.crt", ["--key", "leaf.pem", "--certificate", "{certificate}",
                                          "--certificate-chain", "ca.crt"]),
             "certificate_chain": ("inter.crt", ["--key", "leaf.pem", "--certificate", "leaf.crt",
                                                 "--certificate-chain", "{certificate_chain}"])},
    "compile": {"artifact": ("mlp-bound.jaxport", [])},
    "target": {},  # it reads nothing (the GPU it describes), so no output can be one of its inputs
}
#: {command: {output option: (the arguments that give it "{out}", the suffix it must have, or "")}}.
WRITES: dict[str, dict[str, tuple[list[str], str]]] = {
    "call": {"output": (["-o", "{out}"], ".npz"), "save_inputs": (["--save-inputs", "{out}"], ".npz")},
    "export": {"output": (["-o", "{out}"], "")},
    "extract": {"weights_out": (["--weights", "{out}"], ".npz"),
                "output": (["--payload", "apply", "-o", "{out}"], "")},
    "import": {"output": (["-o", "{out}"], "")},
    "rebind": {"output": (["-o", "{out}"], "")},
    "upgrade": {"output": (["-o", "{out}"], "")},
    "sign": {"signature_path": (["--signature", "{out}"], "")},
    "compile": {"output": (["-o", "{out}"], "")},
    "target": {"output": (["-o", "{out}"], ".json")},
}
#: The refusals that say more than SAME: an output over the artifact being rebound or upgraded.
OWN_WORDS = {("rebind", "artifact"): "is the artifact being rebound; rebind writes a new artifact and never replaces",
             ("upgrade", "artifact"): "is the artifact being upgraded; upgrade writes a new artifact and never "
                                      "replaces"}
#: Read options whose file keeps its own suffix whatever the output's: the entry point must be a Python module.
KEEPS_SUFFIX = {("export", "entrypoint")}
#: Read options that name a directory (an output that is one is refused as a directory, not as an input).
DIRECTORIES = {"root", "cache_dir"}
#: Commands whose output check needs a tool beyond jaxport's: compile needs IREE.
NEEDS = {"compile": "iree.compiler"}


def _command(name: str) -> click.Command:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return command


def test_the_tables_cover_every_file_option_of_every_command():
    """Every command that writes a file is in WRITES with each of its output options, and in READS with each option
    that names a file it reads: a new option fails here until it is walked below."""
    ctx = click.Context(cli)
    writers = {}
    for name in cli.list_commands(ctx):
        command = _command(name)
        outputs = {p.name for p in output_options(command)}
        if outputs:
            writers[name] = outputs
            reads = {p.name for p in read_options(command)
                     if not (isinstance(p.type, click.Path) and not p.type.file_okay)}
            assert reads - DIRECTORIES == set(READS[name]), name
    assert {n: set(w) for n, w in WRITES.items()} == writers


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """Every file the command lines above read, in one directory (copied per case)."""
    import jax
    import jax.numpy as jnp
    from jax import export

    import jaxport

    d = tmp_path_factory.mktemp("files")
    for name in ("mlp-bound.jaxport",):
        shutil.copy(GOLDEN / name, d / name)
    for name in ("model.py", "spec-npz.yaml", "params.npz"):
        shutil.copy(EXAMPLES / "mlp" / name, d / name)
    x = np.load(GOLDEN / "mlp-bound.inputs.npz")["x"]
    np.savez(d / "inputs.npz", x=x)
    np.savez(d / "expected.npz", output=np.load(GOLDEN / "mlp-bound.expected.npz")["output"])
    np.savez(d / "cotangents.npz", output=np.ones((5, 10), np.float32))
    key_pair(d, "ci")
    pki(d)
    shutil.copy(d / "ca.crt", d / "inter.crt")
    assert jaxport.sign(d / "mlp-bound.jaxport", d / "ci.pem").signature.is_file()
    (d / "f.jaxexport").write_bytes(export.export(jax.jit(lambda v: jnp.sin(v) * 2))(
        jax.ShapeDtypeStruct((3,), jnp.float32)).serialize())
    (d / "import-spec.yaml").write_text("jaxport: 1\nname: imported\n")
    return d


def _cases() -> list[tuple[str, str, str]]:
    return [(command, out, read) for command, outputs in WRITES.items() for out in outputs for read in READS[command]]


def _argv(command: str, given: dict[str, str], extra: list[str], out_args: list[str], out: str) -> list[str]:
    args = [*BASE[command], *extra, *out_args]
    return [a.format(**given, out=out) for a in args]


@pytest.mark.parametrize("command, output, read", _cases(), ids=["-".join(c) for c in _cases()])
def test_an_output_that_is_a_file_the_command_reads_is_refused(files, tmp_path, monkeypatch, run_cli, command, output,
                                                               read):
    """The output option given the file of one read option (renamed to the suffix the output needs, the other
    options' files as they are): exit 11, one line naming the file, and the file's bytes unchanged."""
    if command in NEEDS:
        pytest.importorskip(NEEDS[command])
    monkeypatch.chdir(tmp_path)
    for f in files.iterdir():
        shutil.copy(f, f.name)
    out_args, suffix = WRITES[command][output]
    given = {name: path for name, (path, _) in READS[command].items()}
    source, extra = READS[command][read]
    if suffix and (command, read) not in KEEPS_SUFFIX and not source.endswith(suffix):
        target = Path(source).stem + suffix
        shutil.copy(source, target)
        if read == "artifact" and Path(f"{source}.sig").exists():
            shutil.copy(f"{source}.sig", f"{target}.sig")  # the bundle names the artifact's file: make it again
        given[read] = target
    name = given[read]
    if command == "call" and read == "cotangents":
        given["artifact"] = _vjp_artifact()
    before = Path(name).read_bytes()
    res = run_cli(*_argv(command, given, extra, out_args, name))
    assert res.exit_code == 11, (res.exit_code, res.stderr)
    line = res.stderr.splitlines()[-1]
    if (command, read) in OWN_WORDS:
        assert line.startswith(f"error[output]: {name}: {OWN_WORDS[command, read]} its input. Choose another "), line
    else:
        assert line == SAME.format(out=name, inp=name)
    assert Path(name).read_bytes() == before


def _vjp_artifact() -> str:
    """mlp's apply exported with its derivative (``--vjp-order 1``), in the current directory."""
    import jaxport

    jaxport.export("model.py:apply", "spec-npz.yaml", output="vjp.jaxport", vjp_order=1, write_manifest=False)
    return "vjp.jaxport"


@pytest.mark.parametrize("output", ["inter.crt", "leaf.crt", "leaf.pem", "mlp-bound.jaxport"])
def test_sign_in_python_never_writes_its_bundle_over_a_file_it_read(files, tmp_path, monkeypatch, output):
    """jaxport.sign: the certificates, which model signing reads itself, are inputs as the key and artifact are."""
    import jaxport
    from jaxport.errors import OutputError

    monkeypatch.chdir(tmp_path)
    for f in files.iterdir():
        shutil.copy(f, f.name)
    before = Path(output).read_bytes()
    with pytest.raises(OutputError) as e:
        jaxport.sign("mlp-bound.jaxport", "leaf.pem", signature=output, certificate="leaf.crt",
                     certificate_chain=["inter.crt"])
    assert str(e.value) == SAME.format(out=output, inp=output).removeprefix("error[output]: ")
    assert Path(output).read_bytes() == before


@pytest.mark.parametrize("module", ["f.jaxexport", "f.mlir"])
def test_import_in_python_never_writes_over_the_module(files, tmp_path, monkeypatch, module):
    import jax
    import jax.numpy as jnp

    import jaxport
    from jaxport.errors import OutputError

    monkeypatch.chdir(tmp_path)
    shutil.copy(files / "f.jaxexport", "f.jaxexport")
    Path("f.mlir").write_text(jax.jit(lambda v: v * 2).lower(jnp.ones(3)).as_text())
    before = Path(module).read_bytes()
    with pytest.raises(OutputError) as e:
        jaxport.import_stablehlo(module, output=module)
    assert str(e.value) == SAME.format(out=module, inp=module).removeprefix("error[output]: ")
    assert Path(module).read_bytes() == before
