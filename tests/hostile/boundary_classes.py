"""Issue 46's command-line classes beside the signature's (``signature_classes``), as cases of the corpus; the
environment's new cases are in ``runtime_classes`` and the Python API's values in :func:`api_deep_values` (run by
``process_runs``: each case in a fresh process, since the failure it looks for breaks the process).

- ``output-is-input``: every writing command given, as its output, a file it reads, as an attacker who read the
  code would pick them: the certificate, the chain and the key of ``sign`` (which model signing reads itself), the
  cotangents ``call --vjp`` reads after it saved its inputs, the reference of ``--expect``, the trusted key and the
  bundle of ``--require-signature``, the module and spec of ``import``, the model, spec and bound weights of
  ``export``, the new weights and key of ``rebind``, the artifact of ``extract`` and ``upgrade``; each also through
  a symbolic link and a hard link. Exit 11, one line, every input's bytes unchanged (the runner compares every file).
- ``deep-values``: JAX serializations to ``import`` whose dimension strings nest or run past the spec language's
  limits (2000 and 3000 parentheses, 3000 unary minus, 1000 nested calls, in an input, an output and a stored VJP),
  and a ``CheckpointManager`` root bound at ``export`` whose step folders are no canonical step numbers (``00``,
  ``-1``, ``1e3``, ``abc``, ``+5``, an Arabic-Indic digit, ``²``, 20 digits, ``007``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .corpus import Base, Case

SAME = "is the same file as the input"
#: The files of the output-is-input cases beyond the base directory's (built once, in :func:`_files`).
_FILES: dict[str, bytes] = {}


def serialization_with(dims_in: list[str], dims_out: list[str] | None = None,
                       vjp_dims: list[str] | None = None) -> bytes:
    """A serialization of ``x * 2`` over ``f32[b]`` (JAX's own program) whose stored signature declares the dimension
    strings given, as a hostile writer may store them (written with JAX's generated flatbuffer builders, as
    ``tests/foundation/test_jaxser.py`` writes its hand-built serializations)."""
    import jax
    import numpy as np
    from jax import export

    from tests.foundation import test_jaxser as t

    b, = export.symbolic_shape("b")
    exp = export.export(jax.jit(lambda v: v * 2))(jax.ShapeDtypeStruct((b,), np.float32))
    module = bytes(exp.mlir_module_serialized)

    def table(builder, shape_in, shape_out, vjp):
        return t.exported_table(
            builder,
            unique_avals=lambda bb: t.offsets(bb, [t.aval(bb, shape_in), t.aval(bb, shape_out)]),
            out_avals_idxs=lambda bb: t.numbers(bb, [1]),
            in_tree=lambda bb: t.node(bb, t.fb.PyTreeDefKind.tuple, [
                t.node(bb, t.fb.PyTreeDefKind.tuple, [t.node(bb)]), t.node(bb, t.fb.PyTreeDefKind.dict, [], [])]),
            mlir_module_serialized=lambda bb: bb.CreateByteVector(module),
            calling_convention_version=lambda bb: exp.calling_convention_version, vjp=vjp)

    builder = t.flatbuffers.Builder(1024)
    vjp = (lambda bb: table(bb, vjp_dims, ["b"], None)) if vjp_dims is not None else None
    builder.Finish(table(builder, dims_in, dims_out or ["b"], vjp))
    return bytes(builder.Output())


def _files(b: Base) -> dict[str, bytes]:
    """Keys, a certificate chain, a bundle of ``base.jaxport``, a serialization, the reference outputs and an
    artifact with its derivative and cotangents for it."""
    if _FILES:
        return _FILES
    import numpy as np

    import jaxport

    from ..sign.keys import key_pair, pki

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        key_pair(d, "ci")
        pki(d)
        (d / "base.jaxport").write_bytes(b.data)
        jaxport.sign(d / "base.jaxport", d / "ci.pem")
        x = np.load(b.dir / "x.npy")
        np.savez(d / "want.npz", output=np.asarray(jaxport.load(d / "base.jaxport")(x)))
        cwd = os.getcwd()
        os.chdir(b.dir)
        try:
            jaxport.export("model.py:g", "spec-plain.yaml", output=d / "vjp.jaxport", vjp_order=1,
                           write_manifest=False)
        finally:
            os.chdir(cwd)
        vjp = jaxport.load(d / "vjp.jaxport")
        np.savez(d / "cot.npz", **{vjp.output_names[0]: np.ones_like(np.asarray(vjp(x)))})
        for name in ("ci.pem", "ci.pub", "leaf.pem", "leaf.crt", "ca.crt", "base.jaxport.sig", "want.npz",
                     "vjp.jaxport", "cot.npz"):
            _FILES[name] = (d / name).read_bytes()
    _FILES["inter.crt"] = _FILES["ca.crt"]
    _FILES["f.jaxexport"] = serialization_with(["b"])
    _FILES["import.yaml"] = b"jaxport: 1\nname: imported\n"
    return _FILES


#: {case: (command line, the file it reads that its output names, extra files: {name: name of a file of _files or
#: of the base directory (``base:NAME``)})}.
OUTPUT_IS_INPUT: dict[str, tuple[list[str], str, dict[str, str]]] = {
    "sign-signature-over-chain": (["sign", "base.jaxport", "--key", "leaf.pem", "--certificate", "leaf.crt",
                                   "--certificate-chain", "inter.crt", "--signature", "inter.crt"], "inter.crt", {}),
    "sign-signature-over-certificate": (["sign", "base.jaxport", "--key", "leaf.pem", "--certificate", "leaf.crt",
                                         "--certificate-chain", "inter.crt", "--signature", "leaf.crt"], "leaf.crt",
                                        {}),
    "sign-signature-over-key": (["sign", "base.jaxport", "--key", "ci.pem", "--signature", "ci.pem"], "ci.pem", {}),
    "sign-signature-over-artifact": (["sign", "base.jaxport", "--key", "ci.pem", "--signature", "base.jaxport"],
                                     "base.jaxport", {}),
    "call-save-inputs-over-cotangents": (["call", "vjp.jaxport", "--inputs", "x.npy", "--vjp", "--cotangents",
                                          "cot.npz", "--save-inputs", "cot.npz", "--no-cache"], "cot.npz", {}),
    "call-output-over-expect": (["call", "base.jaxport", "--inputs", "x.npy", "--expect", "want.npz", "-o",
                                 "want.npz", "--no-cache"], "want.npz", {}),
    "call-output-over-trusted-key": (["call", "base.jaxport", "--inputs", "x.npy", "--require-signature", "key.npz",
                                      "-o", "key.npz", "--no-cache"], "key.npz", {"key.npz": "ci.pub"}),
    "call-output-over-bundle": (["call", "base.jaxport", "--inputs", "x.npy", "--require-signature", "ci.pub",
                                 "--signature", "bundle.npz", "-o", "bundle.npz", "--no-cache"], "bundle.npz",
                                {"bundle.npz": "base.jaxport.sig"}),
    "call-save-inputs-over-inputs": (["call", "base.jaxport", "--inputs", "x=in.npz", "--save-inputs", "in.npz",
                                      "--no-cache"], "in.npz", {"in.npz": "want.npz"}),
    "import-output-over-module": (["import", "f.jaxexport", "-o", "f.jaxexport"], "f.jaxexport", {}),
    "import-output-over-spec": (["import", "f.jaxexport", "--shapes", "import.yaml", "-o", "import.yaml"],
                                "import.yaml", {}),
    "import-sidecar-over-spec": (["import", "f.jaxexport", "--shapes", "o.jaxport.manifest.json", "-o",
                                  "o.jaxport"], "o.jaxport.manifest.json", {"o.jaxport.manifest.json": "import.yaml"}),
    "export-output-over-model": (["export", "model.py:f", "--shapes", "spec-bound.yaml", "-o", "model.py"],
                                 "model.py", {}),
    "export-output-over-bound-weights": (["export", "model.py:f", "--shapes", "spec-bound.yaml", "-o", "params.npz"],
                                         "params.npz", {}),
    "rebind-output-over-new-weights": (["rebind", "base.jaxport", "--bind", "params=new.npz", "-o", "new.npz"],
                                       "new.npz", {"new.npz": "base:params.npz"}),
    "rebind-output-over-trusted-key": (["rebind", "base.jaxport", "--bind", "params=params.npz",
                                        "--require-signature", "ci.pub", "-o", "ci.pub"], "ci.pub", {}),
    "extract-weights-over-artifact": (["extract", "a.npz", "--weights", "a.npz"], "a.npz",
                                      {"a.npz": "base:base.jaxport"}),
    "extract-output-over-artifact": (["extract", "base.jaxport", "--payload", "f", "-o", "base.jaxport"],
                                     "base.jaxport", {}),
}
#: The same outputs reached through a link to the input: (case, the link's name, the input it names).
LINKED = {"sign-signature-over-chain": ("chain-link.crt", "inter.crt"),
          "call-save-inputs-over-cotangents": ("cot-link.npz", "cot.npz"),
          "import-output-over-module": ("module-link.jaxexport", "f.jaxexport")}


def _setup(b: Base, extra: dict[str, str]) -> tuple:
    files = _files(b)
    steps: list[tuple] = [("copy", n, n) for n in ("params.npz", "x.npy", "spec-bound.yaml", "spec-plain.yaml")]
    steps += [("write", n, data) for n, data in files.items()]
    for name, source in extra.items():
        steps.append(("copy", name, source[5:]) if source.startswith("base:") else ("write", name, files[source]))
    return tuple(steps)


def output_is_input(b: Base) -> Iterator[Case]:
    if importlib.util.find_spec("model_signing") is None or importlib.util.find_spec("OpenSSL") is None:
        return  # sign's cases need jaxport[sign]; the others run with it too, in one set-up
    for name, (argv, _, extra) in OUTPUT_IS_INPUT.items():
        yield Case("output-is-input", name, "output-is-input", None, frozenset({11}), commands=((name, tuple(argv)),),
                   setup=_setup(b, extra), mention=SAME)
        if name in LINKED:
            link, target = LINKED[name]
            at = max(i for i, a in enumerate(argv) if a in ("-o", "--signature", "--save-inputs")) + 1
            via = (*argv[:at], link, *argv[at + 1:])
            for kind in ("symlink", "hardlink"):
                yield Case("output-is-input", f"{name}-{kind}", "output-is-input", None, frozenset({11}),
                           commands=((name, via),), setup=(*_setup(b, extra), (kind, link, target)), mention=SAME)


PARENS = "(" * 2000 + "b" + ")" * 2000
#: {case: the dimension strings of the serialization (serialization_with's arguments), what the refusal names}.
DEEP_DIMENSIONS: dict[str, tuple[dict[str, list[str]], str]] = {
    "parens-2000": ({"dims_in": [PARENS]}, "nests deeper than 64 levels"),
    "parens-3000": ({"dims_in": ["(" * 3000 + "b" + ")" * 3000]}, "longer than 4096 characters"),
    "minus-3000": ({"dims_in": ["-" * 3000 + "b"]}, "nests deeper than 64 levels"),
    "output-calls-1000": ({"dims_in": ["b"], "dims_out": ["max(" * 1000 + "b" + ", 1)" * 1000]},
                          "longer than 4096 characters"),
    "vjp-parens-2000": ({"dims_in": ["b"], "vjp_dims": [PARENS]}, "nests deeper than 64 levels"),
    "parens-63": ({"dims_in": ["(" * 63 + "b" + ")" * 63]}, ""),
}
#: Step folder names that are no canonical step number.
NOT_STEPS = ("00", "-1", "1e3", "abc", "+5", "\u0663", "\u00b2", "99999999999999999999", "007")
SPEC_CKPT = b'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - bind: ckpt\n  - "f32[batch, 4]"\n'


def deep_values(b: Base) -> Iterator[Case]:
    for name, (dims, why) in DEEP_DIMENSIONS.items():
        ok = not why
        yield Case("deep-values", f"import-{name}", "deep-values", serialization_with(**dims),
                   frozenset({7}), file="deep.jaxexport", mention=why,
                   commands=(("import", ("import", "deep.jaxexport", "-o", "out.jaxport")),),
                   accept=frozenset({"import"} if ok else ()), why="within the limits: imported" if ok else "",
                   outputs=frozenset({"out.jaxport", "out.jaxport.manifest.json"} if ok else ()))
    export = ("export", ("export", "model.py:f", "--shapes", "spec-ckpt.yaml", "-o", "out.jaxport"))
    for names in [[n] for n in NOT_STEPS] + [list(NOT_STEPS)]:
        steps: list[tuple] = [("write", "spec-ckpt.yaml", SPEC_CKPT)]
        for n in names:
            steps += [("dir", f"ckpt/{n}"), ("write", f"ckpt/{n}/_CHECKPOINT_METADATA", b"{}")]
        label = "all" if len(names) > 1 else names[0].encode("unicode_escape").decode()
        yield Case("deep-values", f"orbax-step-{label}", "deep-values", None, frozenset({3}), commands=(export,),
                   setup=tuple(steps), mention="is not an orbax checkpoint")


def cases(b: Base) -> Iterator[Case]:
    yield from output_is_input(b)
    yield from deep_values(b)


# --- the Python API's values (process_runs: --class api-deep-values) ------------------------------------------------

#: Run in a fresh process per case: a module defining the state, an exported artifact, the bad call (which must
#: raise the named JaxportError with a one-line message), then a valid call whose numbers are checked.
_CHILD = r'''
import dataclasses, functools, json, sys
import jax, numpy as np
import jaxport

class Node:
    def __init__(self, *kids):
        self.kids = list(kids)

jax.tree_util.register_pytree_node(Node, lambda n: (n.kids, None), lambda _, kids: Node(*kids))

@jax.tree_util.register_dataclass
@dataclasses.dataclass
class State:
    w: object
    extra: object

def nested(depth, make, leaf):
    return functools.reduce(lambda inner, _: make(inner), range(depth), leaf)

def cyclic_node():
    n = Node(np.zeros(2, np.float32)); n.kids.append(n); return n

def self_state():
    s = State(W, None); s.extra = [s]; return s

def list_cycle():
    v = []; v.append(v); return v

def dict_cycle():
    d = {"a": 1.0}; d["self"] = d; return d

X = np.arange(3, dtype=np.float32)
W = np.full(3, 2.0, np.float32)
GOOD = State(W, [np.zeros(2, np.float32)])
art, case = sys.argv[1], sys.argv[2]
loaded = jaxport.load(art)
plain = jaxport.load(sys.argv[3])
BAD = {
    "call-cycle-through-node": lambda: loaded(State(W, [cyclic_node()]), X),
    "call-state-holds-itself": lambda: loaded(self_state(), X),
    "call-nodes-5000": lambda: loaded(State(W, [nested(5000, Node, np.zeros(2, np.float32))]), X),
    "call-dicts-5000": lambda: loaded(State(W, [nested(5000, lambda v: {"a": v}, np.zeros(2, np.float32))]), X),
    "call-tuples-5000": lambda: loaded(State(W, [nested(5000, lambda v: (v,), np.zeros(2, np.float32))]), X),
    "call-keyword-cycle": lambda: loaded(state=State(W, [cyclic_node()]), x=X),
    "call-leaf-list-cycle": lambda: plain({"a": W}, list_cycle()),
    "call-leaf-dict-cycle": lambda: plain({"a": W}, dict_cycle()),
    "call-leaf-lists-100000": lambda: plain({"a": W}, nested(100000, lambda v: [v], 1.0)),
    "call-leaf-beside-node": lambda: loaded(GOOD, list_cycle()),
    "save-inputs-dicts-5000": lambda: jaxport.save_inputs("s.npz", state=nested(5000, lambda v: {"a": v}, W)),
    "save-inputs-lists-5000": lambda: jaxport.save_inputs("s.npz", state=nested(5000, lambda v: [v], W)),
    "save-inputs-cycle-through-node": lambda: jaxport.save_inputs("s.npz", state={"n": cyclic_node()}),
    "export-bind-cycle-through-node": lambda: jaxport.export(lambda p, x: x * p["w"], {"jaxport": 1, "args": [
        {"bind": "params"}, "f32[3]"]}, bind={"params": {"w": W, "n": cyclic_node()}}, output="b.jaxport"),
    "export-bind-dicts-5000": lambda: jaxport.export(lambda p, x: x * p["w"], {"jaxport": 1, "args": [
        {"bind": "params"}, "f32[3]"]}, bind={"params": {"w": W, "d": nested(5000, lambda v: {"a": v}, W)}},
        output="b.jaxport"),
}
try:
    BAD[case]()
    outcome = {"error": None}
except jaxport.JaxportError as e:
    outcome = {"error": type(e).__name__, "message": str(e)}
except BaseException as e:
    outcome = {"error": "other", "message": f"{type(e).__name__}: {str(e)[:300]}"}
try:
    good = np.asarray(loaded(GOOD, X)).tolist() == (W * X).tolist() and \
        np.asarray(plain({"a": W}, X)).tolist() == (W * X).tolist()
except BaseException as e:
    good = f"{type(e).__name__}: {str(e)[:200]}"
outcome["after"] = good
print(json.dumps(outcome))
'''
API_CASES = ("call-cycle-through-node", "call-state-holds-itself", "call-nodes-5000", "call-dicts-5000",
             "call-tuples-5000", "call-keyword-cycle", "call-leaf-list-cycle", "call-leaf-dict-cycle",
             "call-leaf-lists-100000", "call-leaf-beside-node", "save-inputs-dicts-5000", "save-inputs-lists-5000",
             "save-inputs-cycle-through-node", "export-bind-cycle-through-node", "export-bind-dicts-5000")
#: The error class each case's refusal must be.
API_ERRORS = {"save-inputs": "UsageError", "export-bind": "SpecError", "call": "InputError"}


def api_deep_values(scratch: Path) -> list[tuple[str, str]]:
    """``(case, problem)`` for each case of the class, ``problem`` empty when the call was refused with its one-line
    error and the valid calls after it, in the same process, gave the right numbers."""
    import dataclasses

    import jax
    import numpy as np

    import jaxport

    scratch.mkdir(parents=True, exist_ok=True)

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class State:
        w: object
        extra: object

    good = State(np.full(3, 2.0, np.float32), [np.zeros(2, np.float32)])
    art = jaxport.export(lambda s, x: s.w * x, jaxport.Spec(args=[jaxport.like(good), "f32[3]"]),
                         output=scratch / "state.jaxport", write_manifest=False).path
    plain = jaxport.export(lambda d, x: d["a"] * x, {"jaxport": 1, "args": [{"a": "f32[3]"}, "f32[3]"]},
                           output=scratch / "plain.jaxport", write_manifest=False).path
    out = []
    for case in API_CASES:
        p = subprocess.run([sys.executable, "-c", _CHILD, str(art), case, str(plain)], capture_output=True,
                           text=True, cwd=scratch, timeout=600)
        try:
            outcome = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            out.append((case, f"the process ended with {p.returncode}: {p.stderr.strip()[-300:]}"))
            continue
        want = next(v for k, v in API_ERRORS.items() if case.startswith(k))
        problem = ""
        if outcome["error"] != want:
            problem = f"raised {outcome['error']} ({outcome.get('message', '')[:200]}), not {want}"
        elif "\n" in outcome["message"]:
            problem = f"a message of several lines: {outcome['message'][:200]!r}"
        elif outcome["after"] is not True:
            problem = f"the valid calls after it failed: {outcome['after']}"
        out.append((case, problem))
    return out
