"""The trust-boundary classes (issue 12): cases that drive whole command lines, not one reader.

Each class is one rule of the trust boundary, attacked the way someone who read jaxport's code would:

- ``native-nesting``: programs whose StableHLO nests attributes, types or regions tens of thousands deep, or holds
  very many operations, in an artifact (``inspect --mlir``, ``extract --mlir``, ``diff``, ``call``) and as a module
  to ``import`` (text and bytecode);
- ``custom-call-grant``: an artifact whose manifest allows host-callback targets (or lies about its custom calls)
  and whose program calls them, in ``main``, in a private function or inside a region; ``call`` even with the
  caller's ``--allow-custom-call``;
- ``arithmetic``: constraints and dimension expressions that nest ``max``/``^``/``floordiv``, carry literals of
  thousands of digits or divide by zero, in manifests (``call``, ``verify``, ``diff``, ``check``) and in specs
  (``export``);
- ``special-file``: a FIFO, ``/dev/zero``, ``/dev/urandom``, ``/dev/null``, a directory, symlinks to those, symlink
  loops and dangling symlinks, at every path a command reads (artifact, inputs, spec, policy, module, bound weights);
- ``write``: an output that is the input artifact, spec, model, module or bound file (by name, hard link or
  symlink), a device node, a FIFO, a directory, a symlink out of the work directory, a symlink planted at a
  temporary name, and a write that fails mid-way (file-size limit);
- ``terminal``: ANSI CSI/OSC, C1, bidi and rich markup in every manifest string a command shows, in policies and in
  file names;
- ``internal-error``: numbers of thousands of digits, NaN and infinities in policies and on the command line,
  constraints such as ``(b^2)^2`` that must print back into the language, non-UTF-8 names in imported bytecode;
- ``code-import``: manifests recording absolute, escaping or symlinked entry points, specs and bound sources, with
  a canary in the target, fed to ``verify``;
- ``isolate``: ``--isolate`` with realistic and tiny memory limits and a one-second time limit;
- ``known-gap``: an ``.npz`` zip bomb bound at export, verify and on the command line, overlapping or otherwise
  inconsistent ``.safetensors`` ranges, a weight named ``__metadata__`` extracted to safetensors, and an artifact
  cut while it is read (the SIGBUS of a hashed mapping).

Cases that may hang, grow without bound or kill the process set ``timeout`` and run only as real processes.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .corpus import PAYLOAD, Base, Case, _deflate_bomb, _good_npy, _raw_zip, _safetensors, _set, _with, artifact

F = ["functions", "f"]
ARTIFACT = frozenset({7, 8})
CRASH = frozenset({7, 8, 15})  # refused by a pre-scan or the child check (7), or a crash turned into exit 15

#: Seconds a case that may hang is given: a command that imports JAX takes a few seconds on an idle machine.
LIGHT, HEAVY = 30.0, 90.0
#: A program's first reading runs in jaxport's child check, stopped by jaxport itself after 3 minutes of wall time:
#: a case whose program may take that child its whole limit gets that much, and a minute more.
NATIVE = 240.0

POLICY = b"jaxport_policy: 1\nplatforms:\n  allowed: [cpu]\nrequired_metadata: [name]\n"
SPEC_G = b'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - "f32[batch, 4]"\n'
SPEC_BOUND_TEXT = b'jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - bind: params.npz\n  - "f32[batch, 4]"\n'
#: What verify needs beside an artifact recording model.py:f, spec-bound.yaml and params.npz.
VERIFY_FILES = (("copy", "spec-bound.yaml", "spec-bound.yaml"), ("copy", "params.npz", "params.npz"))
#: A module that creates the canary (in the current directory and beside itself) when imported.
EVIL = (b"import os\n"
        b"for _d in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):\n"
        b"    os.makedirs(os.path.join(_d, 'CANARY'), exist_ok=True)\n"
        b"import numpy as np\n"
        b"W = {'w': np.zeros((4, 3), np.float32), 'b': np.zeros(3, np.float32)}\n"
        b"def f(params, x):\n    return x[:, :3]\n")


def _c(cls: str, name: str, commands: list[tuple[str, list[str]]], codes: frozenset[int] | set[int], *,
       data: bytes | None = None, file: str = "", setup: tuple = (), timeout: float = 0.0,
       accept: frozenset[str] | set[str] = frozenset(), why: str = "", canary: bool = False,
       outputs: frozenset[str] | set[str] = frozenset(), hook: str = "", mention: str = "") -> Case:
    return Case(cls, name, cls, data, frozenset(codes), accept=frozenset(accept), why=why, canary=canary, file=file,
                commands=tuple((label, tuple(argv)) for label, argv in commands), setup=tuple(setup),
                timeout=timeout, outputs=frozenset(outputs), hook=hook, mention=mention)


INSPECT = ("inspect", ["inspect", "{file}"])
MLIR = ("mlir", ["inspect", "--mlir", "{file}"])
EXTRACT_MLIR = ("extract-mlir", ["extract", "{file}", "--mlir", "f", "-o", "out.mlir"])
DIFF = ("diff", ["diff", "base.jaxport", "{file}"])
DIFF_NP = ("diff-np", ["diff", "--no-programs", "base.jaxport", "{file}"])
CALL = ("call", ["call", "{file}", "--random", "--no-cache"])
VERIFY = ("verify", ["verify", "{file}"])
CHECK = ("check", ["check", "{file}", "--policy", "policy.yaml"])
IMPORT = ("import", ["import", "{file}", "--shapes", "spec-g.yaml", "-o", "out.jaxport"])
IMPORT_OUT = {"out.jaxport", "out.jaxport.manifest.json"}
#: The base function's module has a dynamic batch: import needs a spec naming it.
IMPORT_SPEC = b'jaxport: 1\ndims:\n  b: {max: 64}\nargs: ["f32[b, 4]", "f32[3]", "f32[4, 3]"]\n'


# --- class 1: native nesting --------------------------------------------------------------------------------------

#: Built in a child (its thread has a 1 GiB stack: MLIR's text parser recurses once per level), so that a crash
#: while building costs a case, not the corpus. Writes one file per module: portable bytecode (.mlirbc) and the
#: text it was parsed from (.mlir).
_DEEP = textwrap.dedent('''
    import json, sys, threading
    from pathlib import Path
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo
    from jaxport.jaxprivate.mlir import deserialize_portable_artifact, serialize_portable_artifact

    src, version, sdy, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", Path(sys.argv[4])
    jobs = json.loads(sys.argv[5])
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        text = deserialize_portable_artifact(src.read_bytes()).operation.get_asm(enable_debug_info=False)

    def module_attribute(attr):
        i = text.index("attributes {", text.index("module @")) + len("attributes {")
        return text[:i] + f"jx.deep = {attr}, " + text[i:]

    def private_function(body):
        i = text.rindex("}")
        return text[:i] + body + "\\n" + text[i:]

    def regions(n):
        lines = ["  func.func private @deep(%a: tensor<i32>) -> tensor<i32> {"]
        for k in range(n):
            lines.append(f'    %r{k} = "stablehlo.case"(%a) ({{')
        lines.append("    stablehlo.return %a : tensor<i32>")
        for k in reversed(range(n)):
            lines.append(f"    }}) : (tensor<i32>) -> tensor<i32>")
            lines.append(f"    stablehlo.return %r{k} : tensor<i32>" if k else "    return %r0 : tensor<i32>")
        lines.append("  }")
        return private_function("\\n".join(lines))

    def many_ops(n):
        body = ["  func.func private @many(%a: tensor<i32>) -> tensor<i32> {"]
        prev = "%a"
        for k in range(n):
            body.append(f"    %m{k} = stablehlo.add {prev}, %a : tensor<i32>")
            prev = f"%m{k}"
        body.append(f"    return {prev} : tensor<i32>\\n  }}")
        return private_function("\\n".join(body))

    def make(kind, n):
        if kind == "attr-array":
            return module_attribute("[" * n + "]" * n)
        if kind == "attr-dict":
            return module_attribute("{a = " * n + "unit" + "}" * n)
        if kind == "attr-array-in-dict":
            return module_attribute("{a = [" * n + "]}" * n)
        if kind == "type-tuple":
            return module_attribute("tuple<" * n + "i32" + ">" * n)
        if kind == "type-tensor-of-tuple":
            return module_attribute("tensor<1x" + "tuple<" * n + "i32" + ">" * n + ">")
        if kind == "regions":
            return regions(n)
        if kind == "ops":
            return many_ops(n)
        raise ValueError(kind)

    def work():
        for kind, n in jobs:
            name = f"{kind}-{n}"
            try:
                t = make(kind, n)
                (out / f"{name}.mlir").write_text(t)
                with ctx:
                    m = ir.Module.parse(t)
                    data = serialize_portable_artifact(m, version, sdy)
                (out / f"{name}.mlirbc").write_bytes(data)
            except Exception as e:  # noqa: BLE001 - the case is left out, and said so
                print(f"{name}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)

    threading.stack_size(1 << 30)
    th = threading.Thread(target=work)
    th.start()
    th.join()
''')

#: Regions last: their text parser is the first to crash the builder (at 20 000 levels, even on a 1 GiB stack).
DEEP_JOBS = [("attr-array", 20000), ("attr-array", 100000), ("attr-dict", 30000), ("attr-array-in-dict", 20000),
             ("type-tuple", 30000), ("ops", 100000), ("regions", 3000), ("regions", 6000)]


def _module_text(b: Base, mod: bytes) -> str:
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    from jaxport.jaxprivate.mlir import deserialize_portable_artifact

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        return deserialize_portable_artifact(mod).operation.get_asm(enable_debug_info=False)


def _serialize_text(text: str, version: str) -> bytes:
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    from jaxport.jaxprivate.mlir import deserialize_portable_artifact, serialize_portable_artifact, serialize_with_sdy

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        deserialize_portable_artifact(_SEED_MODULE[0])  # loads the dialects a module uses (func, ...)
        return serialize_portable_artifact(ir.Module.parse(text), version, serialize_with_sdy())


_SEED_MODULE: list[bytes] = []


def _with_module(b: Base, mod: bytes) -> bytes:
    return bytes(dataclasses.replace(b.exported, mlir_module_serialized=mod).serialize())


def _artifact_with_program(b: Base, mod: bytes, edit: Any = None) -> bytes:
    members = dict(b.members)
    members[PAYLOAD] = _with_module(b, mod)
    m = copy.deepcopy(b.manifest)
    if edit:
        edit(m)
    return artifact(m, members)


def deep_modules(b: Base) -> dict[str, tuple[bytes, bytes]]:
    """{name: (bytecode, text)} of every DEEP_JOBS module the child could build."""
    import os

    import jax

    from jaxport.jaxprivate.mlir import serialize_with_sdy
    from jaxport.program.module_scan import stablehlo_version

    mod = b.exported.mlir_module_serialized
    version = stablehlo_version(mod) or "1.0.0"
    # The modules take a minute to build: kept in a cache keyed by everything they are made from.
    key = hashlib.sha256(json.dumps([_module_text(b, mod), _DEEP, DEEP_JOBS, jax.__version__]).encode()).hexdigest()
    cache = Path(os.environ.get("JAXPORT_HOSTILE_CACHE") or Path.home() / ".cache" / "jaxport" / "hostile")
    out = cache / f"deep-{key[:16]}"
    out.mkdir(parents=True, exist_ok=True)
    src = out / "base.mlirbc"
    src.write_bytes(mod)
    missing = [j for j in DEEP_JOBS if not (out / f"{j[0]}-{j[1]}.mlir").exists()]
    if missing:
        subprocess.run([sys.executable, "-c", _DEEP, str(src), version, "1" if serialize_with_sdy() else "0",
                        str(out), json.dumps(missing)], capture_output=True, timeout=600)
    found = {}
    for kind, n in DEEP_JOBS:
        bc, txt = out / f"{kind}-{n}.mlirbc", out / f"{kind}-{n}.mlir"
        if bc.exists():
            found[f"{kind}-{n}"] = (bc.read_bytes(), txt.read_bytes())
    return found


def native_nesting(b: Base) -> Iterator[Case]:
    cmds = [MLIR, EXTRACT_MLIR, DIFF, CALL]
    for name, (bytecode, text) in deep_modules(b).items():
        yield _c("native-nesting", f"artifact-{name}", cmds, CRASH, data=_artifact_with_program(b, bytecode),
                 timeout=NATIVE, accept={label for label, _ in cmds}, outputs={"out.mlir"},
                 why="a valid program, only deep: what must never happen is a signal, a hang or a traceback "
                     "(refusing it by a documented limit is as good)")
        # a large but shallow module (100 000 operations) may be imported; a deep one is refused (3000 nested regions
        # are deep: a few hundred already crash XLA's compiler at call)
        ok = {"import"} if name == "ops-100000" else set()
        why = "a large module within the documented limits is a valid module" if ok else ""
        shaped = ("import", ["import", "{file}", "--shapes", "spec.yaml", "-o", "out.jaxport"])
        spec = (("write", "spec.yaml", IMPORT_SPEC),)
        yield _c("native-nesting", f"import-text-{name}", [shaped], CRASH | {5}, data=text, file="module.mlir",
                 setup=spec, timeout=NATIVE, accept=ok, why=why, outputs=IMPORT_OUT)
        yield _c("native-nesting", f"import-bytecode-{name}", [shaped], CRASH | {5}, data=bytecode,
                 file="module.mlirbc", setup=spec, timeout=NATIVE, accept=ok, why=why, outputs=IMPORT_OUT)
    # deep nesting in the artifact, run in the isolated child: a crash there is exit 15, never a signal here
    found = deep_modules(b)
    if "attr-array-100000" in found:
        yield _c("native-nesting", "artifact-attr-array-100000-isolated",
                 [("call-isolate", ["call", "{file}", "--random", "--no-cache", "--isolate"]),
                  ("mlir-isolate", ["inspect", "--mlir", "{file}", "--isolate"])], CRASH,
                 data=_artifact_with_program(b, found["attr-array-100000"][0]), timeout=NATIVE)


# --- class 2: custom calls an artifact grants itself ----------------------------------------------------------------

HOST_CALLBACKS = ("xla_ffi_python_cpu_callback", "xla_python_cpu_callback", "xla_ffi_python_gpu_callback",
                  "xla_ffi_partitioned_python_cpu_callback", "xla_python_gpu_callback")


def _callback_op(target: str, res: str = "%cb") -> str:
    return (f'    {res} = stablehlo.custom_call @{target}() {{api_version = 4 : i32, backend_config = '
            f'{{callback = 0 : ui64}}, has_side_effect = true}} : () -> tensor<i32>\n')


def _insert_in_main(text: str, lines: str) -> str:
    main = text.index("func.func public @main")
    ret = text.index("    return ", main)
    return text[:ret] + lines + text[ret:]


def custom_call_grant(b: Base) -> Iterator[Case]:
    from jaxport.program.module_scan import stablehlo_version

    mod = b.exported.mlir_module_serialized
    version = stablehlo_version(mod) or "1.0.0"
    text = _module_text(b, mod)
    programs: dict[str, tuple[str, str]] = {}
    for target in HOST_CALLBACKS + ("evil_ffi_target", "tpu_custom_call"):
        programs[f"main-{target}"] = (target, _insert_in_main(text, _callback_op(target)))
    target = "xla_ffi_python_cpu_callback"
    private = text[:text.rindex("}")] + ("  func.func private @helper() -> tensor<i32> {\n" + _callback_op(target) +
                                         "    return %cb : tensor<i32>\n  }\n") + "}\n"
    programs["private-function"] = (target, _insert_in_main(private, "    %h = call @helper() : () -> tensor<i32>\n"))
    region = ('    %z = stablehlo.constant dense<0> : tensor<i32>\n    %rc = "stablehlo.case"(%z) ({\n'
              + _callback_op(target).replace("    ", "      ", 1) + "      stablehlo.return %cb : tensor<i32>\n"
              "    }) : (tensor<i32>) -> tensor<i32>\n")
    programs["inside-region"] = (target, _insert_in_main(text, region))
    grants = {
        "allowed-and-listed": lambda m, t: (m["functions"]["f"]["custom_calls"].append(
            {"target": t, "count": 1, "stability": "allowed"}), _set(F + ["allowed_custom_calls"], [t])(m)),
        "listed-as-guaranteed": lambda m, t: (m["functions"]["f"]["custom_calls"].append(
            {"target": t, "count": 1, "stability": "guaranteed"}), _set(F + ["allowed_custom_calls"], [t])(m)),
        "not-listed": lambda m, t: None,  # the manifest hides the call the program makes
    }
    for pname, (target, program) in programs.items():
        try:
            bytecode = _serialize_text(program, version)
        except Exception:  # noqa: BLE001 - a program this JAX cannot write: no case
            continue
        for gname, grant in grants.items():
            if gname != "allowed-and-listed" and not pname.startswith("main-xla_ffi_python_cpu"):
                continue
            data = _artifact_with_program(b, bytecode, lambda m, g=grant, t=target: g(m, t))
            yield _c("custom-call-grant", f"{pname}-{gname}",
                     [CALL, ("call-allowed", ["call", "{file}", "--random", "--no-cache", "--allow-custom-call",
                                              target])] if gname == "allowed-and-listed" else [CALL],
                     {6, 7, 8} | ({10} if target in ("evil_ffi_target", "tpu_custom_call") else set()), data=data,
                     timeout=HEAVY,
                     accept={"call-allowed"} if target in ("evil_ffi_target", "tpu_custom_call") else set(),
                     why="the caller allowed this target at call time (it is not a host callback); XLA then fails "
                         "to find it" if target in ("evil_ffi_target", "tpu_custom_call") else "")
    # verify runs the artifact too: the manifest's grant must not let it run there either
    bytecode = _serialize_text(programs["main-xla_ffi_python_cpu_callback"][1], version)
    data = _artifact_with_program(b, bytecode, lambda m: grants["allowed-and-listed"](m, target))
    yield _c("custom-call-grant", "verify-host-callback", [VERIFY], {6, 7, 8}, data=data, setup=VERIFY_FILES,
             timeout=HEAVY)


# --- class 3: unbounded arithmetic ----------------------------------------------------------------------------------

def _nested_max_power(levels: int, exponent: int = 64) -> str:
    e = "b"
    for _ in range(levels):
        e = f"max({e}, 0)^{exponent}"
    return e


def _batch(text: str) -> str:
    """An expression written with ``b`` for the base function's dimension variable ``batch`` (which the program
    names too: a manifest that renamed it would be refused for disagreeing with its program, before any arithmetic)."""
    import re

    return re.sub(r"\bb\b", "batch", text)


def arithmetic(b: Base) -> Iterator[Case]:
    constraints = {
        "max-power-nest-3": _nested_max_power(3) + " >= 1",
        "max-power-nest-6": _nested_max_power(6) + " >= 1",
        "max-power-nest-12": _nested_max_power(12) + " >= 1",
        "power-of-power": "((((b^64)^64)^64)^64)^64 >= 1",
        "power-chain-in-min": "min(((b^60)^60)^60, ((b^61)^61)^61) >= 1",
        "product-of-powers": "*".join(["(b^64)"] * 60) + " >= 1",
        "sum-of-terms": " + ".join(["b"] * 900) + " >= 1",
        "literal-4000-digits": "b <= " + "9" * 4000,
        "literal-1000-digits": "b <= " + "9" * 1000,
        "power-of-literal-1000-digits": "(b * " + "9" * 1000 + ")^64 >= 1",
        "literal-times-literal": "b * " + "9" * 2000 + " <= " + "9" * 2000,
        "floordiv-by-zero": "floordiv(b, 0) >= 0",
        "mod-by-zero": "mod(b, 0) >= 0",
        "floordiv-by-b-minus-b": "floordiv(b, b - b) >= 0",
        "floordiv-by-b-minus-1": "floordiv(8, b - 1) >= 0",
        "operator-floordiv-zero": "b // (b - b) >= 0",
        "nested-floordiv": "floordiv(" * 60 + "b" + ", 2)" * 60 + " >= 0",
        "huge-exponent": "b^" + "9" * 3000 + " >= 1",
        "square-of-square": "(b^2)^2 >= 1",
    }
    verified = ("max-power-nest-6", "power-of-power", "floordiv-by-zero", "literal-4000-digits", "huge-exponent",
                "floordiv-by-b-minus-1")
    for name, constraint in constraints.items():
        data = _with(b, _set(F + ["constraints"], [_batch(constraint)]))
        cmds = [CALL, VERIFY, DIFF_NP, CHECK] if name in verified else [CALL, DIFF_NP, CHECK]
        yield _c("arithmetic", f"constraint-{name}", cmds, {3, 7, 9, 12}, data=data, timeout=HEAVY,
                 setup=VERIFY_FILES + (("write", "policy.yaml", POLICY),),
                 accept={"call", "diff-np", "check"} if name == "square-of-square" else
                 {"diff-np", "check"} if name == "sum-of-terms" else
                 {"call", "diff-np", "check"} if name == "nested-floordiv" else set(),
                 why="a well-formed constraint within the documented limits (depth 60 of 64), compared or shown as "
                     "written" if name in ("square-of-square", "sum-of-terms", "nested-floordiv") else "")
    dims = {
        "shape-max-power-nest-6": _nested_max_power(6),
        "shape-floordiv-zero": "floordiv(b, 0)",
        "shape-mod-b-minus-b": "mod(4, b - b)",
        "shape-power-chain": "((b^64)^64)^64",
        "shape-literal-4000-digits": "9" * 4000,
    }
    for name, expr in dims.items():
        data = _with(b, _set(F + ["outputs", 0, "shape"], [_batch(expr), 3]))
        yield _c("arithmetic", name, [CALL, DIFF_NP, INSPECT], {3, 7, 9}, data=data, timeout=HEAVY,
                 accept={"inspect"}, why="inspect shows a shape as written")
    bounds = {"max-2**62-power-constraint": (2**62, "b^64 >= 1"),
              "max-2**62-derived-sum": (2**62, "b*b*b*b*b*b*b*b >= 1")}
    for name, (hi, c) in bounds.items():
        data = _with(b, lambda m, hi=hi, c=c: (_set(F + ["dims", "batch", "max"], hi)(m),
                                                 _set(F + ["constraints"], [_batch(c)])(m)))
        yield _c("arithmetic", name, [CALL, DIFF_NP], {3, 7, 9}, data=data, timeout=HEAVY, accept={"diff-np", "call"},
                 why="a bound widened by the manifest: jaxport detects damage, not a consistent edit")
    # the same in a spec, at export: refused there (division by zero that the bounds allow is an export error)
    specs = {
        "spec-max-power-nest-6": _nested_max_power(6) + " >= 1",
        "spec-floordiv-by-zero": "floordiv(b, 0) >= 0",
        "spec-floordiv-can-hit-zero": "floordiv(8, b - 1) >= 0",
        "spec-mod-can-hit-zero": "mod(8, b - 1) >= 0",
        "spec-literal-4000-digits": "b <= " + "9" * 4000,
        "spec-power-of-power": "(((b^64)^64)^64)^64 >= 1",
    }
    for name, c in specs.items():
        text = (f'jaxport: 1\ndims:\n  b: {{max: 64}}\nconstraints: ["{c}"]\nargs:\n  - "f32[b, 4]"\n').encode()
        yield _c("arithmetic", name, [("export", ["export", "model.py:g", "--shapes", "{file}", "-o", "out.jaxport"])],
                 {3, 5}, data=text, file="spec.yaml", timeout=HEAVY)
    text = b'jaxport: 1\ndims:\n  b: {max: 64}\nargs:\n  - "f32[floordiv(8, b - 1), 4]"\n'
    yield _c("arithmetic", "spec-shape-floordiv-can-hit-zero",
             [("export", ["export", "model.py:g", "--shapes", "{file}", "-o", "out.jaxport"])], {3, 5}, data=text,
             file="spec.yaml", timeout=HEAVY)


# --- class 4: files that are not files ------------------------------------------------------------------------------

#: (role, file name, command line, codes, light): every path a command reads.
ROLES = [
    ("artifact-inspect", "case.jaxport", ["inspect", "{file}"], {7}, True),
    ("artifact-check", "case.jaxport", ["check", "{file}", "--policy", "policy.yaml"], {7}, True),
    ("artifact-diff", "case.jaxport", ["diff", "--no-programs", "base.jaxport", "{file}"], {7}, True),
    ("artifact-extract", "case.jaxport", ["extract", "{file}", "--weights", "w.npz"], {7}, True),
    ("artifact-call", "case.jaxport", ["call", "{file}", "--random", "--no-cache"], {7}, False),
    ("artifact-verify", "case.jaxport", ["verify", "{file}"], {7}, False),
    ("inputs", "x.npy", ["call", "base.jaxport", "--inputs", "{file}", "--no-cache"], {9}, False),
    ("inputs-npz", "inputs.npz", ["call", "base.jaxport", "--inputs", "{file}", "--no-cache"], {9}, False),
    ("shapes", "spec.yaml", ["export", "model.py:g", "--shapes", "{file}", "-o", "out.jaxport"], {3}, False),
    ("policy", "policy.yaml", ["check", "base.jaxport", "--policy", "{file}"], {2}, True),
    ("import-module", "module.mlir", ["import", "{file}", "-o", "out.jaxport"], {4, 7}, False),
    ("import-shapes", "spec.yaml", ["import", "module.mlir", "--shapes", "{file}", "-o", "out.jaxport"], {3}, False),
    ("verify-shapes", "spec.yaml", ["verify", "base.jaxport", "--shapes", "{file}"], {3}, False),
    ("bind-source", "w.npz", ["export", "model.py:f", "--shapes", "spec-bind.yaml", "-o", "out.jaxport"], {3},
     False),
    ("bind-option", "w.npz", ["export", "model.py:f", "--shapes", "spec-bound.yaml", "--bind", "params={file}", "-o",
                              "out.jaxport"], {2, 3}, False),
]

SPECIAL_FILES = {
    "fifo": (("fifo", "{file}"),),
    "dev-zero": (("symlink", "{file}", "/dev/zero"),),
    "dev-urandom": (("symlink", "{file}", "/dev/urandom"),),
    "dev-null": (("symlink", "{file}", "/dev/null"),),
    "chardev-zero": (("chardev", "{file}", "zero"),),
    "directory": (("dir", "{file}"),),
    "symlink-to-fifo": (("fifo", "../outside/pipe"), ("symlink", "{file}", "../outside/pipe")),
    "symlink-to-directory": (("symlink", "{file}", "{outside}"),),
    "symlink-loop": (("symlink", "{file}", "loop-b"), ("symlink", "loop-b", "{file}")),
    "symlink-self": (("symlink", "{file}", "{file}"),),
    "symlink-dangling": (("symlink", "{file}", "../outside/missing"),),
    "symlink-chain-to-zero": (("symlink", "hop", "/dev/zero"), ("symlink", "{file}", "hop")),
}


def special_files(b: Base) -> Iterator[Case]:
    for role, file, argv, codes, light in ROLES:
        extra: tuple = (("write", "policy.yaml", POLICY),) if role != "policy" else ()
        if role == "import-shapes":
            extra += (("write", "module.mlir", _module_text(b, b.other_module).encode()),)
        if role == "bind-source":
            extra += (("write", "spec-bind.yaml", b'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - bind: w.npz\n'
                                                  b'  - "f32[batch, 4]"\n'),)
        if role in ("bind-option", "artifact-verify", "verify-shapes"):
            extra += VERIFY_FILES
        for kind, steps in SPECIAL_FILES.items():
            if role not in ("artifact-inspect", "inputs", "shapes", "policy", "import-module", "bind-source") and \
                    kind not in ("fifo", "dev-zero", "directory", "symlink-loop", "dev-urandom"):
                continue  # every kind at one reader of each sort; the common kinds at every reader
            setup = tuple((op, name.replace("{file}", file), *rest) for op, name, *rest in steps)
            setup = tuple(s if s[0] != "symlink" else (s[0], s[1], s[2].replace("{file}", file)) for s in setup)
            yield _c("special-file", f"{role}-{kind}", [("read", argv)], codes, file=file, setup=extra + setup,
                     timeout=LIGHT if light else HEAVY)


# --- class 5: writes ------------------------------------------------------------------------------------------------

def writes(b: Base) -> Iterator[Case]:
    base = (("copy", "case.jaxport", "base.jaxport"),)
    out11 = {2, 11}
    cases: list[tuple[str, list[str], tuple, set[int], set[str], str]] = [
        # an output that is an input, by name
        ("extract-payload-over-artifact", ["extract", "case.jaxport", "--payload", "f", "-o", "case.jaxport"], base,
         out11, set(), ""),
        ("extract-mlir-over-artifact", ["extract", "case.jaxport", "--mlir", "f", "-o", "case.jaxport"], base, out11,
         set(), ""),
        ("extract-weights-over-artifact-npz", ["extract", "case.npz", "--weights", "case.npz"],
         (("copy", "case.npz", "base.jaxport"),), out11, set(), ""),
        ("call-output-over-artifact", ["call", "case.npy", "--random", "--no-cache", "-o", "case.npy"],
         (("copy", "case.npy", "base.jaxport"),), out11, set(), ""),
        ("call-output-over-input", ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "x.npy"],
         (("copy", "x.npy", "x.npy"),), out11, set(), ""),
        ("call-batch-output-over-input", ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "--batch-size",
                                          "1", "-o", "x.npy"], (("copy", "x.npy", "x.npy"),), out11, set(), ""),
        ("export-over-spec", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "spec.yaml"],
         (("write", "spec.yaml", SPEC_G),), out11, set(), ""),
        ("export-over-model", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "model.py"],
         (("write", "spec.yaml", SPEC_G),), out11, set(), ""),
        ("export-over-bind-source", ["export", "model.py:f", "--shapes", "spec-bound.yaml", "-o", "params.npz"],
         VERIFY_FILES, out11, set(), ""),
        ("import-over-module", ["import", "module.mlir", "--shapes", "spec.yaml", "-o", "module.mlir"],
         (("write", "module.mlir", _module_text(b, b.other_module).encode()), ("write", "spec.yaml", SPEC_G)), out11,
         set(), ""),
        ("import-over-spec", ["import", "module.mlir", "--shapes", "spec.yaml", "-o", "spec.yaml"],
         (("write", "module.mlir", _module_text(b, b.other_module).encode()), ("write", "spec.yaml", SPEC_G)), out11,
         set(), ""),
        # the same file under another name: a hard link or a symlink to the input
        ("export-over-spec-symlink", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G), ("symlink", "out.jaxport", "spec.yaml")), out11, set(), ""),
        ("extract-over-artifact-symlink", ["extract", "case.jaxport", "--payload", "f", "-o", "out.jaxexport"],
         base + (("symlink", "out.jaxexport", "case.jaxport"),), out11, set(), ""),
        ("call-output-symlink-to-input", ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "out.npy"],
         (("copy", "x.npy", "x.npy"), ("symlink", "out.npy", "x.npy")), out11, set(), ""),
        # outputs that are not regular files
        ("call-output-chardev", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"],
         (("chardev", "out.npz", "null"),), out11, set(), ""),
        ("extract-output-chardev", ["extract", "base.jaxport", "--payload", "f", "-o", "out.jaxexport"],
         (("chardev", "out.jaxexport", "null"),), out11, set(), ""),
        ("export-output-chardev", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G), ("chardev", "out.jaxport", "null")), out11, set(), ""),
        ("extract-weights-chardev", ["extract", "base.jaxport", "--weights", "w.npz"], (("chardev", "w.npz", "null"),),
         out11, set(), ""),
        ("call-output-fifo", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"],
         (("fifo", "out.npz"),), out11, set(), ""),
        ("extract-output-fifo", ["extract", "base.jaxport", "--mlir", "f", "-o", "out.mlir"], (("fifo", "out.mlir"),),
         out11, set(), ""),
        ("export-output-fifo", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G), ("fifo", "out.jaxport")), out11, set(), ""),
        ("call-output-directory", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"],
         (("dir", "out.npz"),), out11, set(), ""),
        # `-o DIR` puts NAME.jaxport in the directory (specs/CLI.md, specs/IMPORT.md): that file is the output
        ("import-output-directory", ["import", "module.mlir", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "module.mlir", _module_text(b, b.other_module).encode()), ("write", "spec.yaml", SPEC_G),
          ("dir", "out.jaxport")), out11, {"out.jaxport/module.jaxport", "out.jaxport/module.jaxport.manifest.json"},
         ""),
        # symlinks at the output pointing out of the work directory: replacing the link is fine, writing through it
        # (changing the sentinel, or creating a file outside) is not
        ("call-output-symlink-outside", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"],
         (("symlink", "out.npz", "../outside/sentinel.txt"),), out11, {"out.npz"}, ""),
        ("call-output-dangling-symlink-outside", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"],
         (("symlink", "out.npz", "../outside/new.npz"),), out11, {"out.npz"}, ""),
        ("extract-output-symlink-outside", ["extract", "base.jaxport", "--weights", "w.npz"],
         (("symlink", "w.npz", "{outside}/sentinel.txt"),), out11, {"w.npz"}, ""),
        ("export-output-symlink-outside", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G), ("symlink", "out.jaxport", "../outside/sentinel.txt")), out11,
         {"out.jaxport", "out.jaxport.manifest.json"}, ""),
        ("export-sidecar-symlink-outside", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G), ("symlink", "out.jaxport.manifest.json", "../outside/sentinel.txt")),
         out11, {"out.jaxport", "out.jaxport.manifest.json"}, ""),
        # a directory symlink in the path the user gave is followed (the user chose it); only the file lands there
        ("output-directory-symlink-outside", ["call", "base.jaxport", "--random", "--no-cache", "-o", "sub/out.npz"],
         (("symlink", "sub", "{outside}"),), out11, {"../outside/out.npz"}, ""),
        # temporary names an attacker predicted, planted as symlinks to the sentinel
        ("call-batch-planted-temp", ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "--batch-size", "1",
                                     "-o", "out.npz"], (("copy", "x.npy", "x.npy"),), out11, {"out.npz"},
         "plant-temp-symlinks"),
        ("call-batch-planted-temp-npy", ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "--batch-size",
                                         "1", "-o", "out.npy"], (("copy", "x.npy", "x.npy"),), out11, {"out.npy"},
         "plant-temp-symlinks"),
        ("call-planted-temp", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"], (), out11,
         {"out.npz"}, "plant-temp-symlinks"),
        ("export-planted-temp", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G),), out11, {"out.jaxport", "out.jaxport.manifest.json"},
         "plant-temp-symlinks"),
        ("extract-planted-temp", ["extract", "base.jaxport", "--weights", "w.npz"], (), out11, {"w.npz"},
         "plant-temp-symlinks"),
        # the disk fills up mid-write: exit 11, the previous output intact, no temporary file left
        ("export-file-size-limit", ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
         (("write", "spec.yaml", SPEC_G), ("write", "out.jaxport", b"previous")), {11}, set(), "file-size-limit"),
        ("call-file-size-limit", ["call", "base.jaxport", "--random", "--no-cache", "-o", "out.npz"],
         (("write", "out.npz", b"previous"),), {11}, set(), "file-size-limit"),
        ("call-batch-file-size-limit", ["call", "base.jaxport", "--inputs", "big.npy", "--no-cache", "--batch-size",
                                        "8", "-o", "out.npz"],
         (("write", "big.npy", _good_npy(shape=(64, 4))), ("write", "out.npz", b"previous")), {11}, set(),
         "file-size-limit"),
        ("extract-file-size-limit", ["extract", "base.jaxport", "--mlir", "f", "-o", "out.mlir"],
         (("write", "out.mlir", b"previous"),), {11}, set(), "file-size-limit"),
    ]
    for name, argv, setup, codes, outputs, hook in cases:
        accept: set[str] = {"run"} if outputs else set()
        yield _c("write", name, [("run", argv)], codes, setup=setup, timeout=HEAVY, outputs=outputs, hook=hook,
                 accept=accept, why="the output path was replaced (the link itself, not its target)" if accept else "")


# --- class 6: terminal injection ------------------------------------------------------------------------------------

INJECTIONS = {
    "csi": "\x1b[2J\x1b[31mred",
    "osc-title": "\x1b]0;pwned\x07",
    "osc8-link": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "c1-csi": "\x9b31mred",
    "bidi": "abc\u202egnp.exe",
    "rich-markup": "[bold]JXMARK[/bold][link=https://evil.example]x[/link]",
    "backspace": "ok\x08\x08\x08bad",
}

#: (field, manifest path or an edit, commands that show it)
SHOWN: dict[str, tuple[Any, list[tuple[str, list[str]]]]] = {
    "name": (["metadata", "name"], [INSPECT, CHECK, DIFF_NP]),
    "version": (["metadata", "version"], [INSPECT, CHECK, DIFF_NP]),
    "description": (["metadata", "description"], [INSPECT, DIFF_NP]),
    "label-key": (lambda m, s: m["metadata"].__setitem__("labels", {s: "v"}), [INSPECT, CHECK, DIFF_NP]),
    "label-value": (lambda m, s: m["metadata"].__setitem__("labels", {"team": s}), [INSPECT, CHECK, DIFF_NP]),
    "producer-jaxport": (["producer", "jaxport"], [INSPECT, CHECK, DIFF_NP]),
    "producer-jax": (["producer", "jax"], [INSPECT, CHECK, DIFF_NP, CALL]),
    "producer-jaxlib": (["producer", "jaxlib"], [INSPECT, CHECK, DIFF_NP]),
    "entrypoint": (F + ["entrypoint"], [INSPECT, DIFF_NP, VERIFY]),
    "source-spec": (["source", "spec"], [INSPECT, DIFF_NP, VERIFY]),
    "bound-source": (F + ["signature", "args", 0, "bound"], [INSPECT, DIFF_NP, VERIFY]),
    "platform": (lambda m, s: m["functions"]["f"].__setitem__("platforms", [s]), [INSPECT, CHECK, DIFF_NP, CALL]),
    "custom-call-target": (lambda m, s: m["functions"]["f"]["custom_calls"].append(
        {"target": s, "count": 1, "stability": "allowed"}), [INSPECT, CHECK, DIFF_NP, CALL]),
    "allowed-custom-call": (F + ["allowed_custom_calls"], [INSPECT, CHECK, DIFF_NP]),
    "shape-assertion": (lambda m, s: m["functions"]["f"]["shape_assertions"].__setitem__(0, s), [INSPECT, DIFF_NP]),
    "constant-location": (lambda m, s: m["functions"]["f"]["embedded_constants"]["largest"][0].__setitem__(
        "location", s), [INSPECT, CHECK, DIFF_NP]),
    "disabled-check": (lambda m, s: m["functions"]["f"].__setitem__("disabled_safety_checks", [s]),
                       [INSPECT, CHECK, DIFF_NP]),
    "stablehlo-version": (F + ["stablehlo_version"], [INSPECT, DIFF_NP]),
    "input-name": (lambda m, s: (m["functions"]["f"]["inputs"][0].__setitem__("name", s),
                                 m["functions"]["f"]["signature"]["args"][1].__setitem__("name", s)),
                   [INSPECT, DIFF_NP, CALL]),
    "output-name": (lambda m, s: (m["functions"]["f"]["outputs"][0].__setitem__("name", s),
                                  m["functions"]["f"].__setitem__("output_tree", {"output": 0})),
                    [INSPECT, DIFF_NP, CALL]),
    "effect": (lambda m, s: m["functions"]["f"]["effects"].__setitem__("ordered", [s]), [INSPECT, DIFF_NP]),
    "sharding": (lambda m, s: m["functions"]["f"]["inputs"][0].__setitem__("sharding", s), [INSPECT, DIFF_NP]),
    "format-version-producer-newer": (lambda m, s: (m.__setitem__("format_version", "2.0"),
                                                    m["producer"].__setitem__("jaxport", s)), [INSPECT, CHECK, CALL]),
}
SHOWN_CODES = {"inspect": {7}, "check": {7, 14}, "diff-np": {7}, "verify": {2, 3, 4, 7, 12}, "call": {6, 7, 9, 10}}


def terminal(b: Base) -> Iterator[Case]:
    names = list(INJECTIONS)
    for i, (field, (where, cmds)) in enumerate(SHOWN.items()):
        # every payload for the fields every command shows, two rotating payloads for the others
        chosen = names if field in ("name", "entrypoint", "custom-call-target", "label-key") else \
            [names[i % len(names)], names[(i + 3) % len(names)]]
        for inj in chosen:
            s = INJECTIONS[inj]
            edit = _set(where, s) if isinstance(where, list) else (lambda m, w=where, s=s: w(m, s))
            try:
                data = _with(b, edit)
            except (KeyError, IndexError, TypeError):
                continue
            codes = set().union(*(SHOWN_CODES[label] for label, _ in cmds))
            setup = (("write", "policy.yaml", POLICY),) + (VERIFY_FILES if any(c[0] == "verify" for c in cmds) else ())
            yield _c("terminal", f"{field}-{inj}", cmds, codes, data=data, setup=setup,
                     accept={label for label, _ in cmds},
                     why="the string is shown with its control characters and markup escaped")
    # a policy's own strings, shown back in violations and errors
    for inj in ("csi", "bidi", "rich-markup"):
        s = INJECTIONS[inj]
        policy = json.dumps({"jaxport_policy": 1, "platforms": {"allowed": [s]}}).encode()
        yield _c("terminal", f"policy-platform-{inj}", [("check", ["check", "base.jaxport", "--policy", "{file}"])],
                 {2, 14}, data=policy, file="policy.yaml")
        policy = json.dumps({"jaxport_policy": 1, "required_metadata": [f"labels.{s}"]}).encode()
        yield _c("terminal", f"policy-label-{inj}", [("check", ["check", "base.jaxport", "--policy", "{file}"])],
                 {2, 14}, data=policy, file="policy.yaml")
    # file names: shown in headers, "Wrote" lines and error messages
    for inj in ("csi", "osc-title", "bidi", "rich-markup"):
        fname = f"a{INJECTIONS[inj]}.jaxport".replace("/", "_")
        looks = {"inspect": ["inspect", "{file}"], "check": ["check", "{file}", "--policy", "policy.yaml"],
                 "diff-np": ["diff", "--no-programs", "base.jaxport", "{file}"]}
        yield _c("terminal", f"file-name-{inj}", list(looks.items()), {7, 14}, setup=(
            ("copy", fname, "base.jaxport"), ("write", "policy.yaml", POLICY)), file=fname,
            accept=set(looks), why="the file name is shown escaped")
        yield _c("terminal", f"missing-file-name-{inj}", [("inspect", ["inspect", "missing-" + fname])], {7},
                 file=fname)
        out = f"o{INJECTIONS[inj]}.npz".replace("/", "_")
        yield _c("terminal", f"output-file-name-{inj}",
                 [("call", ["call", "base.jaxport", "--random", "--no-cache", "-o", out])], {11}, accept={"call"},
                 outputs={out},
                 why="the output's name is shown escaped in the Wrote line")
    s = INJECTIONS["csi"]
    yield _c("terminal", "json-name-csi", [("inspect-json", ["inspect", "--json", "{file}"]),
                                           ("check-json", ["check", "--json", "{file}", "--policy", "policy.yaml"])],
             {7, 14}, data=_with(b, _set(["metadata", "name"], s)), setup=(("write", "policy.yaml", POLICY),),
             accept={"inspect-json", "check-json"}, why="JSON escapes control characters (\\u001b)")


# --- class 7: internal errors on bad input --------------------------------------------------------------------------

def internal_errors(b: Base) -> Iterator[Case]:
    huge = "9" * 5000
    policies = {
        "calling-convention-5000-digits": f"calling_convention: {{min: {huge}}}",
        "calling-convention-max-5000-digits": f"calling_convention: {{max: {huge}}}",
        "max-age-5000-digits": f"max_age_days: {huge}",
        "min-days-left-5000-digits": f"min_days_left: {huge}",
        "artifact-size-5000-digits": f"max_artifact_size: {huge}",
        "artifact-size-5000-digits-unit": f"max_artifact_size: {huge} TB",
        "constant-size-5000-digits": f"max_embedded_constant_size: {huge} GiB",
        "artifact-size-float-unit": "max_artifact_size: 1e400 GB",
        "artifact-size-nan": "max_artifact_size: .nan",
        "artifact-size-inf": "max_artifact_size: .inf",
        "artifact-size-negative": "max_artifact_size: -1 MB",
        "max-age-negative": "max_age_days: -1",
        "max-age-float": "max_age_days: 1.5",
        "max-age-bool": "max_age_days: true",
        "max-age-hex-huge": "max_age_days: 0x" + "f" * 4000,
        "policy-version-5000-digits": None,
        "format-version-5000-digits": f'format_version: {{min: "{huge}.0"}}',
        "format-version-minor-5000-digits": f'format_version: {{max: "1.{huge}"}}',
        "min-consumer-jax-5000-digits": f'min_consumer_jax: "0.{huge}.1"',
        "min-consumer-jax-huge-parts": 'min_consumer_jax: "' + ".".join(["9" * 30] * 40) + '"',
        "calling-convention-float": "calling_convention: {min: 1e999}",
        "sexagesimal-age": "max_age_days: 190:20:30:10:10:10:10:10",
    }
    for name, body in policies.items():
        text = (f"jaxport_policy: {huge}\n" if body is None else f"jaxport_policy: 1\n{body}\n").encode()
        yield _c("internal-error", f"policy-{name}", [("check", ["check", "base.jaxport", "--policy", "{file}"])],
                 {2, 14}, data=text, file="policy.yaml", accept={"check"} if name == "sexagesimal-age" else set(),
                 why="YAML 1.1 reads base-60 integers; a large age is a valid rule" if name == "sexagesimal-age" else
                 "")
    options = {
        "check-max-age-5000-digits": (["check", "base.jaxport", "--max-age", huge], {2}, False),
        "check-min-days-left-5000-digits": (["check", "base.jaxport", "--min-days-left", huge], {2, 14}, False),
        "check-max-age-2**63": (["check", "base.jaxport", "--max-age", str(2**63)], {2}, True),
        "call-dim-5000-digits": (["call", "base.jaxport", "--random", "--no-cache", "--dim", f"batch={huge}"],
                                 {2, 9}, False),
        "call-dim-2**64": (["call", "base.jaxport", "--random", "--no-cache", "--dim", f"batch={2**64}"], {2, 9},
                           False),
        "call-dim-negative": (["call", "base.jaxport", "--random", "--no-cache", "--dim", "batch=-1"], {2, 9}, False),
        "call-seed-2**70": (["call", "base.jaxport", "--random", "--no-cache", "--seed", str(2**70)], {2}, True),
        "call-seed-negative": (["call", "base.jaxport", "--random", "--no-cache", "--seed", "-1"], {2}, True),
        "call-batch-size-2**70": (["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "--batch-size",
                                   str(2**70), "-o", "out.npz"], {2, 9}, True),
        "call-host-devices-2**40": (["call", "base.jaxport", "--random", "--no-cache", "--host-devices", str(2**40)],
                                    {2, 10}, False),
        "call-memory-limit-5000-digits": (["call", "base.jaxport", "--random", "--no-cache", "--isolate",
                                           "--memory-limit", huge + "G"], {2}, False),
        "call-memory-limit-zero": (["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit",
                                    "0"], {2, 15}, False),
        "call-memory-limit-float": (["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit",
                                     "1e400G"], {2}, False),
        "call-time-limit-2**70": (["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--time-limit",
                                   str(2**70)], {2}, True),
        "verify-dim-5000-digits": (["verify", "base.jaxport", "--dim", f"batch={huge}"], {2, 9, 12}, False),
        "verify-atol-nan": (["verify", "base.jaxport", "--atol", "nan"], {2, 12}, False),
        "verify-atol-inf": (["verify", "base.jaxport", "--rtol", "inf"], {2, 12}, True),
        "verify-seed-2**70": (["verify", "base.jaxport", "--seed", str(2**70)], {2}, True),
        "import-calling-convention-5000-digits": (["import", "module.mlir", "--calling-convention", huge, "-o",
                                                   "out.jaxport"], {2, 5}, False),
    }
    for name, (argv, codes, may_pass) in options.items():
        setup: tuple = VERIFY_FILES + (("copy", "x.npy", "x.npy"),
                                       ("write", "module.mlir", _module_text(b, b.other_module).encode()))
        outputs = {"out.npz"} | IMPORT_OUT
        yield _c("internal-error", f"option-{name}", [("run", argv)], codes, setup=setup, timeout=HEAVY,
                 accept={"run"} if may_pass else set(), outputs=outputs,
                 why="a large but valid value: clamped or used as is" if may_pass else "")
    # constraints that must print back into the language: diff renders them, check and call re-read them
    for name, c in {"square-of-square": "(b^2)^2 >= 1", "neg-square": "-(b^2) <= 0", "square-of-neg": "(-b)^2 >= 1",
                    "square-of-difference": "(b - 1)^2 >= 0", "square-of-product": "(b*2)^2 >= 4",
                    "square-of-floordiv": "floordiv(b, 2)^2 >= 0", "power-of-negative-literal": "(-1)^2 * b >= 1",
                    "square-of-mod": "(b % 3)^2 >= 0", "unary-chain": "- - b <= 64"}.items():
        data = _with(b, _set(F + ["constraints"], [_batch(c)]))
        yield _c("internal-error", f"render-{name}", [DIFF_NP, ("diff-json", ["diff", "--no-programs", "--json",
                                                                              "base.jaxport", "{file}"]), INSPECT],
                 {7}, data=data, accept={"diff-np", "diff-json", "inspect"},
                 why="a valid constraint: shown, and printed back in a form that parses to the same expression")
    # division by zero at call, within the declared bounds
    data = _with(b, _set(F + ["constraints"], ["floordiv(4, batch - 1) >= 0"]))
    yield _c("internal-error", "call-division-by-zero-at-b=1", [("run", ["call", "{file}", "--random", "--no-cache",
                                                                         "--dim", "batch=1"])], {7, 9}, data=data,
             timeout=HEAVY)
    # non-UTF-8 names in imported bytecode: a private function, a result name, a location
    from jaxport.program.module_scan import stablehlo_version

    mod = b.exported.mlir_module_serialized
    version = stablehlo_version(mod) or "1.0.0"
    text = _module_text(b, b.other_module)
    variants = {
        "private-function-name": (text[:text.rindex("}")] + "  func.func private @QQQQQQQQ() {\n    return\n  }\n}\n",
                                  b"QQQQQQQQ"),
        "result-info": (text.replace('jax.result_info = "result"', 'jax.result_info = "QQQQQQQQ"'), b"QQQQQQQQ"),
        "module-name": (text.replace("module @", "module @QQQQQQQQ_", 1), b"QQQQQQQQ"),
        "arg-name-attribute": (text.replace("func.func public @main(%arg0: tensor<?x4xf32>",
                                            'func.func public @main(%arg0: tensor<?x4xf32> {jax.arg_info = "QQQQQQQQ"}',
                                            1), b"QQQQQQQQ"),
    }
    for name, (t, marker) in variants.items():
        if marker.decode() not in t:
            continue
        try:
            bc = _serialize_text(t, version)
        except Exception:  # noqa: BLE001
            continue
        for label, bad in {"latin1": b"\xff\xfeQQQQQQ", "lone-continuation": b"\x80QQQQQQQ",
                           "nul": b"QQQ\x00QQQQ"}.items():
            if marker not in bc:
                continue
            yield _c("internal-error", f"import-non-utf8-{name}-{label}", [IMPORT, ("import-json", [
                "import", "--json", "{file}", "--shapes", "spec-g.yaml", "-o", "out.jaxport"])], {4, 5, 7, 15},
                data=bc.replace(marker, bad), file="module.mlirbc", timeout=HEAVY,
                setup=(("write", "spec-g.yaml", SPEC_G),), accept={"import", "import-json"}, outputs=IMPORT_OUT,
                why="the name is not one jaxport shows or records raw: imported with it escaped or dropped")


# --- class 8: code chosen by the artifact ---------------------------------------------------------------------------

def code_import(b: Base) -> Iterator[Case]:
    evil_outside = (("write", "../outside/evil.py", EVIL), ("write", "../outside/evil.yaml", SPEC_BOUND_TEXT),
                    ("write", "../outside/spec-code.yaml",
                     b'jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - bind: evil.py:W\n'
                     b'  - "f32[batch, 4]"\n'),
                    ("symlink", "link", "{outside}"))
    abs_dir = "/tmp/jaxport-hostile-code-import"
    entries = {
        "entrypoint-escaping": (F + ["entrypoint"], "../outside/evil.py:f"),
        "entrypoint-escaping-deep": (F + ["entrypoint"], "sub/../../outside/evil.py:f"),
        "entrypoint-absolute": (F + ["entrypoint"], f"{abs_dir}/evil.py:f"),
        "entrypoint-through-symlink": (F + ["entrypoint"], "link/evil.py:f"),
        "bound-source-escaping-code": (F + ["signature", "args", 0, "bound"], "../outside/evil.py:W"),
        "bound-source-absolute-code": (F + ["signature", "args", 0, "bound"], f"{abs_dir}/evil.py:W"),
        "bound-source-through-symlink": (F + ["signature", "args", 0, "bound"], "link/evil.py:W"),
        "bound-source-escaping-npz": (F + ["signature", "args", 0, "bound"], "../outside/params.npz"),
        "bound-source-absolute-npz": (F + ["signature", "args", 0, "bound"], f"{abs_dir}/params.npz"),
        "spec-escaping": (["source", "spec"], "../outside/evil.yaml"),
        "spec-absolute": (["source", "spec"], f"{abs_dir}/evil.yaml"),
        "spec-escaping-binding-code": (["source", "spec"], "../outside/spec-code.yaml"),
        "spec-through-symlink-binding-code": (["source", "spec"], "link/spec-code.yaml"),
    }
    for name, (path, value) in entries.items():
        data = _with(b, _set(path, value))
        setup = VERIFY_FILES + evil_outside
        if "absolute" in name:
            setup += (("write", f"{abs_dir}/evil.py", EVIL), ("write", f"{abs_dir}/evil.yaml", SPEC_BOUND_TEXT),
                      ("copy", f"{abs_dir}/params.npz", "params.npz"))
        if "npz" in name:
            setup += (("copy", "../outside/params.npz", "params.npz"),)
        cmds = [VERIFY]
        if path[-1] != "entrypoint":
            cmds.append(("verify-against", ["verify", "{file}", "--against", "model.py:f"]))
        yield _c("code-import", name, cmds, {2, 3, 4, 7, 12}, data=data, setup=setup, canary=True, timeout=HEAVY,
                 accept={"verify-against"} if "npz" in name or "spec" in name else set(),
                 why="with --against the user chose the live function; a recorded data file is only read"
                 if "npz" in name or "spec" in name else "")
    # the user's own --against may name any path: accepted (nothing the artifact chose)
    yield _c("code-import", "against-user-choice", [("verify", ["verify", "{file}", "--against", "model.py:f"])],
             {12}, data=_with(b, _set(F + ["entrypoint"], "../outside/evil.py:f")), setup=VERIFY_FILES + evil_outside,
             timeout=HEAVY, accept={"verify"}, why="the user named the live function with --against")


# --- class 9: --isolate with realistic limits -----------------------------------------------------------------------

def isolate_limits(b: Base) -> Iterator[Case]:
    runs = {
        "call-memory-300M": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit", "300M"],
        "call-memory-600M": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit", "600M"],
        "call-memory-100M": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit", "100M"],
        "call-memory-1M": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit", "1M"],
        "call-memory-1": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit", "1"],
        "call-memory-300M-inputs": ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "--isolate",
                                    "--memory-limit", "300M", "-o", "out.npz"],
        "mlir-memory-300M": ["inspect", "--mlir", "base.jaxport", "--isolate", "--memory-limit", "300M"],
        "mlir-memory-600M": ["inspect", "--mlir", "base.jaxport", "--isolate", "--memory-limit", "600M"],
        "call-time-1s": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--time-limit", "1"],
        "call-memory-300M-time-5s": ["call", "base.jaxport", "--random", "--no-cache", "--isolate", "--memory-limit",
                                     "300M", "--time-limit", "5"],
    }
    for name, argv in runs.items():
        tiny = "1M" in argv or "100M" in argv  # a second may be enough on an idle machine: either outcome is right
        mention = "1 s" if name == "call-time-1s" else "" if "--time-limit" in argv else "--memory-limit"
        # the floor below which a limit is refused (exit 2) is measured, and grows with the machine's cores: a
        # realistic limit either runs, or is refused naming the floor, or stops the child with exit 15
        yield _c("isolate", name, [("run", argv)], {2, 15}, setup=(("copy", "x.npy", "x.npy"),),
                 timeout=150,
                 accept=set() if tiny else {"run"}, outputs={"out.npz"}, mention=mention,
                 why="the limit is enough for this artifact" if not tiny else "")


# --- class 10: known gaps -------------------------------------------------------------------------------------------

def known_gaps(b: Base) -> Iterator[Case]:
    stream, crc, total = _deflate_bomb(1 << 30)
    good_w = _good_npy(shape=(4, 3))
    good_b = _good_npy(shape=(3,))
    bomb_w = _raw_zip([("w.npy", stream, 8, crc, total), ("b.npy", good_b, 0, zlib.crc32(good_b), len(good_b))])
    bomb_small = _raw_zip([("w.npy", stream, 8, crc, len(good_w)), ("b.npy", good_b, 0, zlib.crc32(good_b),
                                                                     len(good_b))])
    bind_spec = b'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - bind: w.npz\n  - "f32[batch, 4]"\n'
    export = ["export", "model.py:f", "--shapes", "spec.yaml", "-o", "out.jaxport"]
    for name, data in {"bomb": bomb_w, "bomb-declared-small": bomb_small}.items():
        yield _c("known-gap", f"bind-npz-{name}", [("export", export)], {3}, data=data, file="w.npz",
                 setup=(("write", "spec.yaml", bind_spec),), timeout=HEAVY)
        yield _c("known-gap", f"bind-option-npz-{name}", [("export", [
            "export", "model.py:f", "--shapes", "spec-bound.yaml", "--bind", "params=w.npz", "-o", "out.jaxport"])],
            {2, 3}, data=data, file="w.npz", setup=VERIFY_FILES, timeout=HEAVY)
        # verify re-reads the bound source the artifact records: the bomb sits under the recorded name
        yield _c("known-gap", f"verify-bound-npz-{name}", [VERIFY], {3, 7, 12}, data=b.data, file="case.jaxport",
                 setup=(("copy", "spec-bound.yaml", "spec-bound.yaml"), ("write", "params.npz", data)),
                 timeout=HEAVY)
    st = {
        "overlap-same-range": {"w": ("F32", [4, 3], [0, 48]), "b": ("F32", [3], [0, 12])},
        "overlap-partial": {"w": ("F32", [4, 3], [0, 48]), "b": ("F32", [3], [40, 52])},
        "overlap-contained": {"w": ("F32", [4, 3], [0, 48]), "b": ("F32", [3], [12, 24])},
        "offsets-reversed": {"w": ("F32", [4, 3], [48, 0]), "b": ("F32", [3], [48, 60])},
        "gap-between": {"w": ("F32", [4, 3], [0, 48]), "b": ("F32", [3], [52, 64])},
        "offset-2**64": {"w": ("F32", [4, 3], [2**64, 2**64 + 48]), "b": ("F32", [3], [48, 60])},
        "offsets-negative": {"w": ("F32", [4, 3], [-48, 0]), "b": ("F32", [3], [0, 12])},
        "offsets-float": {"w": ("F32", [4, 3], [0.0, 48.0]), "b": ("F32", [3], [48, 60])},
    }
    for name, tensors in st.items():
        data = _safetensors(tensors, 64)
        spec = bind_spec.replace(b"w.npz", b"w.safetensors")
        yield _c("known-gap", f"safetensors-{name}", [("export", export)], {3}, data=data, file="w.safetensors",
                 setup=(("write", "spec.yaml", spec),), timeout=HEAVY)
    header = b'{"w": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}, "w": {"dtype": "F32", "shape": [3], ' \
             b'"data_offsets": [48, 60]}}'
    header += b" " * ((-len(header)) % 8)
    yield _c("known-gap", "safetensors-duplicate-key", [("export", export)], {3},
             data=struct.pack("<Q", len(header)) + header + b"\0" * 64, file="w.safetensors",
             setup=(("write", "spec.yaml", bind_spec.replace(b"w.npz", b"w.safetensors")),), timeout=HEAVY)
    meta = _safetensors({"w": ("F32", [4, 3], [0, 48]), "b": ("F32", [3], [48, 60])}, 60)
    hdr_len = struct.unpack("<Q", meta[:8])[0]
    h = json.loads(meta[8:8 + hdr_len])
    h["__metadata__"] = {"format": {"nested": ["not", "a", "string"]}}
    raw = json.dumps(h).encode()
    raw += b" " * ((-len(raw)) % 8)
    yield _c("known-gap", "safetensors-metadata-not-strings", [("export", export)], {3},
             data=struct.pack("<Q", len(raw)) + raw + b"\0" * 60, file="w.safetensors",
             setup=(("write", "spec.yaml", bind_spec.replace(b"w.npz", b"w.safetensors")),), timeout=HEAVY,
             accept={"export"}, why="__metadata__ is free text for safetensors' own use; jaxport ignores it")

    # a weight named __metadata__ (or with a name safetensors cannot hold) extracted to .safetensors
    def rename(new: str) -> Any:
        def edit(m: dict[str, Any]) -> None:
            t = m["weights"]["tensors"]
            t[new] = t.pop("params/w")
            m["functions"]["f"]["weights"] = [new if w == "params/w" else w for w in m["functions"]["f"]["weights"]]
        return edit

    for label, new in {"metadata": "__metadata__", "empty": "", "nul": "params/\0w"}.items():
        try:
            data = _with(b, rename(new))
        except Exception:  # noqa: BLE001
            continue
        yield _c("known-gap", f"extract-safetensors-name-{label}",
                 [("extract", ["extract", "{file}", "--weights", "w.safetensors"])], {2, 7, 11}, data=data)
    # an artifact cut while it is read: hashing through a mapping would die by SIGBUS
    for label, argv in {"inspect": ["inspect", "{file}"], "check": ["check", "{file}", "--policy", "policy.yaml"],
                        "diff": ["diff", "--no-programs", "base.jaxport", "{file}"],
                        "extract": ["extract", "{file}", "--weights", "w.npz"],
                        "call": ["call", "{file}", "--random", "--no-cache"]}.items():
        big = _big_artifact(b)
        yield _c("known-gap", f"truncated-while-read-{label}", [(label, argv)], {7, 8}, data=big,
                 setup=(("write", "policy.yaml", POLICY),), timeout=HEAVY, hook="truncate-after-open")


_BIG: list[bytes] = []


def _big_artifact(b: Base) -> bytes:
    """The base artifact with 8 MiB of extra weights, so that a cut leaves pages of the mapping past the end."""
    if _BIG:
        return _BIG[0]
    import numpy as np

    m = copy.deepcopy(b.manifest)
    wbin = b.members["weights.bin"]
    extra = np.arange(2 << 20, dtype=np.float32).tobytes()
    off = (len(wbin) + 63) // 64 * 64
    wbin = wbin + b"\0" * (off - len(wbin)) + extra
    m["weights"]["tensors"]["params/extra"] = {"shape": [2 << 20], "dtype": "float32", "offset": off,
                                              "nbytes": len(extra), "sha256": hashlib.sha256(extra).hexdigest()}
    members = dict(b.members)
    members["weights.bin"] = wbin
    _BIG.append(artifact(m, members))
    return _BIG[0]


def cases(b: Base) -> Iterator[Case]:
    _SEED_MODULE[:] = [b.exported.mlir_module_serialized]
    for gen in (native_nesting, custom_call_grant, arithmetic, special_files, writes, terminal, internal_errors,
                code_import, isolate_limits, known_gaps):
        yield from gen(b)

