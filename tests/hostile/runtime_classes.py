"""The third round of trust-boundary classes (issue 24), as cases of the corpus (``Case``: whole command lines run as
real processes). The classes whose outcome is not one command's exit (interrupts at random moments, an artifact
rewritten while it runs, the Python API walked with wrong types) are runs of their own, in ``process_runs``.

- ``run-time-program``: programs that would crash or block only once compiled or run: a function calling itself
  through ``func.call`` (``main``, a private function, inside a region), functions calling one another, and the
  host-communication operations (``infeed``, ``outfeed``, ``send``, ``recv``, in ``main``, a private function or a
  region), in an artifact (``call``, ``call --isolate``, ``verify``, ``inspect --mlir``), as a module to ``import``
  (text and bytecode), and lowered by the user's own primitive at ``export``;
- ``environment``: ``PYTHONIOENCODING=ascii`` and ``latin-1`` with non-ASCII names and descriptions, a deleted
  working directory, stdout on ``/dev/full``, a hard ``RLIMIT_DATA`` or ``RLIMIT_CPU`` under ``call --isolate``;
  ``XLA_FLAGS`` that XLA refuses (an unknown flag, a bad value, a second flag bad after a good one, a file name that
  names no file, control characters) and ``JAX_*`` settings JAX refuses, through ``call``, ``call --isolate``,
  ``export``, ``verify`` and ``inspect --mlir`` (issue 46), and flags XLA takes, through the same;
- ``cache-trust``: a "passed" verdict planted for a program the check refuses, in a cache directory others can
  write (mode 777, 775, 757), one owned by another user, one reached through a symbolic link, by ``--cache-dir`` and
  by ``JAXPORT_CACHE_DIR``; ``JAXPORT_ISOLATED=1`` inherited by a parent that then reads a program that crashes
  JAX's reader.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from .corpus import PAYLOAD, Base, Case
from .trust import (
    HEAVY,
    IMPORT_OUT,
    IMPORT_SPEC,
    NATIVE,
    VERIFY_FILES,
    _artifact_with_program,
    _c,
    _insert_in_main,
    _module_text,
    _serialize_text,
    deep_modules,
)

ARGS = "%arg0, %arg1, %arg2"
SIG = "(tensor<?x4xf32>, tensor<3xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>"
TOKEN = "    %tok = stablehlo.create_token : !stablehlo.token\n"
#: Host-communication operations, as StableHLO's generic form writes them (each after ``TOKEN``).
HOST_OPS = {
    "outfeed": '    %hc = "stablehlo.outfeed"(%arg1, %tok) {outfeed_config = ""} : (tensor<3xf32>, !stablehlo.token) '
               '-> !stablehlo.token\n',
    "infeed": '    %hc:2 = "stablehlo.infeed"(%tok) {infeed_config = "", layout = [[0]]} : (!stablehlo.token) -> '
              '(tensor<3xf32>, !stablehlo.token)\n',
    "send-host": '    %hc = "stablehlo.send"(%arg1, %tok) {channel_handle = #stablehlo.channel_handle<handle = 1, type '
                 '= 2>, is_host_transfer = true} : (tensor<3xf32>, !stablehlo.token) -> !stablehlo.token\n',
    "recv-host": '    %hc:2 = "stablehlo.recv"(%tok) {channel_handle = #stablehlo.channel_handle<handle = 2, type = '
                 '3>, is_host_transfer = true} : (!stablehlo.token) -> (tensor<3xf32>, !stablehlo.token)\n',
    "send-device": '    %hc = "stablehlo.send"(%arg1, %tok) {channel_handle = #stablehlo.channel_handle<handle = 3, '
                   'type = 1>} : (tensor<3xf32>, !stablehlo.token) -> !stablehlo.token\n',
    "recv-device": '    %hc:2 = "stablehlo.recv"(%tok) {channel_handle = #stablehlo.channel_handle<handle = 4, type = '
                   '1>} : (!stablehlo.token) -> (tensor<3xf32>, !stablehlo.token)\n',
}
RECURSION = "refers to itself"
HOST = "host-communication operations"


def _in_private(text: str, lines: str, name: str = "helper") -> str:
    """``text`` with a private function ``name(tensor<3xf32>) -> tensor<3xf32>`` holding ``lines`` (which may use
    ``%arg1``), called from main."""
    body = (f"  func.func private @{name}(%arg1: tensor<3xf32>) -> tensor<3xf32> {{\n{lines}"
            f"    return %arg1 : tensor<3xf32>\n  }}\n")
    text = text[:text.rindex("}")] + body + "}\n"
    return _insert_in_main(text, f"    %h_{name} = call @{name}(%arg1) : (tensor<3xf32>) -> tensor<3xf32>\n")


def _in_region(text: str, lines: str) -> str:
    head = '    %z = stablehlo.constant dense<0> : tensor<i32>\n    %rc = "stablehlo.case"(%z) ({\n'
    tail = "      stablehlo.return %arg1 : tensor<3xf32>\n    }) : (tensor<i32>) -> tensor<3xf32>\n"
    return _insert_in_main(text, head + lines.replace("    ", "      ") + tail)


def programs(text: str) -> dict[str, tuple[str, str]]:
    """{name: (program text, what the refusal names)}."""
    out: dict[str, tuple[str, str]] = {
        "recursion-main": (_insert_in_main(text, f"    %rec = func.call @main({ARGS}) : {SIG}\n"), RECURSION),
        "recursion-main-in-region": (_in_region(text, f"    %rec = func.call @main({ARGS}) : {SIG}\n"), RECURSION),
        "recursion-private": (_in_private(text, "    %rec = func.call @helper(%arg1) : (tensor<3xf32>) -> "
                                                "tensor<3xf32>\n"), RECURSION),
        "recursion-wrapped-main": (text.replace(
            "    return %6 : tensor<?x3xf32>",
            "    %rec = call @_wrapped_jax_export_main(%arg0, %arg1, %arg2, %arg3) : (tensor<i32>, tensor<?x4xf32>, "
            "tensor<3xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>\n    return %6 : tensor<?x3xf32>", 1), RECURSION),
    }
    pong = ("  func.func private @pong(%arg1: tensor<3xf32>) -> tensor<3xf32> {\n    %p = call @ping(%arg1) : "
            "(tensor<3xf32>) -> tensor<3xf32>\n    return %p : tensor<3xf32>\n  }\n")
    mutual = _in_private(text, "    %q = call @pong(%arg1) : (tensor<3xf32>) -> tensor<3xf32>\n", "ping")
    out["recursion-mutual"] = (mutual[:mutual.rindex("}")] + pong + "}\n", RECURSION)
    chain = _in_private(text, "    %q = call @c1(%arg1) : (tensor<3xf32>) -> tensor<3xf32>\n", "c0")
    for k in range(1, 6):  # c0 -> c1 -> ... -> c5 -> c0
        nxt = f"c{(k + 1) % 6}"
        chain = chain[:chain.rindex("}")] + (
            f"  func.func private @c{k}(%arg1: tensor<3xf32>) -> tensor<3xf32> {{\n    %q = call @{nxt}(%arg1) : "
            f"(tensor<3xf32>) -> tensor<3xf32>\n    return %q : tensor<3xf32>\n  }}\n") + "}\n"
    out["recursion-cycle-of-6"] = (chain, RECURSION)
    for op, line in HOST_OPS.items():
        out[f"{op}-main"] = (_insert_in_main(text, TOKEN + line), HOST)
    out["outfeed-private"] = (_in_private(text, TOKEN + HOST_OPS["outfeed"]), HOST)
    out["infeed-in-region"] = (_in_region(text, TOKEN + HOST_OPS["infeed"]), HOST)
    out["recv-private"] = (_in_private(text, TOKEN + HOST_OPS["recv-host"]), HOST)
    return out


#: A model whose own primitive lowers to ``stablehlo.outfeed`` (or ``infeed``): what ``export`` must refuse too.
LEAKY_MODEL = b'''\
import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jax._src.lib.mlir.dialects import hlo
from jax.core import ShapedArray

leak_p = Primitive("leak")
leak_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
leak_p.def_impl(lambda x: x)


def _outfeed(ctx, x):
    hlo.outfeed([x], hlo.create_token(), outfeed_config="")
    return [x]


mlir.register_lowering(leak_p, _outfeed)
feed_p = Primitive("feed")
feed_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
feed_p.def_impl(lambda x: x)


def _infeed(ctx, x):
    res = hlo.InfeedOp([x.type, hlo.TokenType.get()], hlo.create_token(), infeed_config="", layout=None).results
    return [res[0]]


mlir.register_lowering(feed_p, _infeed)


def out(x):
    return leak_p.bind(x) * 2.0


def inf(x):
    return feed_p.bind(x) + x


def nested(x):
    return jax.lax.cond(x.sum() > 0, lambda v: leak_p.bind(v), lambda v: v, x)
'''
SPEC_G = b'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - "f32[batch, 4]"\n'
SPEC_STATIC = b'jaxport: 1\nargs:\n  - "f32[2, 4]"\n'  # infeed takes static shapes only


def run_time_programs(b: Base) -> Iterator[Case]:
    from jaxport.program.module_scan import stablehlo_version

    mod = b.exported.mlir_module_serialized
    version = stablehlo_version(mod) or "1.0.0"
    text = _module_text(b, mod)
    built = 0
    for name, (program, mention) in programs(text).items():
        try:
            bytecode = _serialize_text(program, version)
        except Exception as e:  # noqa: BLE001 - a program this JAX cannot write: a corpus bug, reported
            raise RuntimeError(f"run-time-program/{name}: cannot build the program: {e}") from None
        built += 1
        host = mention == HOST
        data = _artifact_with_program(b, bytecode)
        # inspect --mlir only prints a program: a host-communication op is printable (refusing it is as good);
        # a recursive one is refused by the program check every reading goes through
        cmds = [("call", ["call", "{file}", "--random", "--no-cache"]),
                ("call-isolate", ["call", "{file}", "--random", "--no-cache", "--isolate"]),
                ("call-o", ["call", "{file}", "--inputs", "x.npy", "--no-cache", "-o", "out.npz"]),
                ("mlir", ["inspect", "--mlir", "{file}"]),
                ("verify", ["verify", "{file}"])]
        yield _c("run-time-program", f"artifact-{name}", cmds, {6, 7}, data=data, timeout=HEAVY,
                 setup=(*VERIFY_FILES, ("copy", "x.npy", "x.npy")), accept={"mlir"} if host else set(),
                 why="inspect --mlir prints the program; it never compiles or runs it" if host else "",
                 mention="" if host else mention)
        shaped = ("import", ["import", "{file}", "--shapes", "spec.yaml", "-o", "out.jaxport"])
        spec = (("write", "spec.yaml", IMPORT_SPEC),)
        yield _c("run-time-program", f"import-text-{name}", [shaped], {5, 6}, data=program.encode(),
                 file="module.mlir", setup=spec, timeout=HEAVY, outputs=IMPORT_OUT, mention=mention)
        yield _c("run-time-program", f"import-bytecode-{name}", [shaped], {5, 6, 7}, data=bytecode,
                 file="module.mlirbc", setup=spec, timeout=HEAVY, outputs=IMPORT_OUT, mention=mention)
    for fn in ("out", "inf", "nested"):
        yield _c("run-time-program", f"export-primitive-{fn}",
                 [("export", ["export", f"leaky.py:{fn}", "--shapes", "spec-g.yaml", "-o", "out.jaxport"])], {5, 6},
                 data=LEAKY_MODEL, file="leaky.py", setup=(("write", "spec-g.yaml", SPEC_STATIC),), timeout=HEAVY,
                 mention=HOST)
    assert built == len(programs(text))


# --- environment ----------------------------------------------------------------------------------------------------

#: Hooks (``run.HOOKS``): Python run in the jaxport process before the command line.
_REEXEC = ("import os, sys\n"
           "if os.environ.get('PYTHONIOENCODING') != {enc!r}:\n"
           "    os.environ['PYTHONIOENCODING'] = {enc!r}\n"
           "    os.execv(sys.executable, [sys.executable, '-c', \"import os, sys; exec(os.environ['JXHOSTILE_HOOK']); "
           "from jaxport_cli.main import main; main()\", *sys.argv[1:]])\n")
HOOKS = {
    "encoding-ascii": _REEXEC.format(enc="ascii"),
    "encoding-latin-1": _REEXEC.format(enc="latin-1"),
    # the working directory is removed under the process (a build directory cleaned by another job)
    "deleted-cwd": "import os\nos.mkdir('gone')\nos.chdir('gone')\nos.rmdir(os.path.abspath('.'))\n",
    # the same, with every argument naming an existing file made absolute first (`inspect /abs/a.jaxport`)
    "deleted-cwd-absolute": ("import os, sys\n"
                             "sys.argv[1:] = [os.path.abspath(a) if os.path.exists(a) else a for a in sys.argv[1:]]\n"
                             "os.mkdir('gone')\nos.chdir('gone')\nos.rmdir(os.path.abspath('.'))\n"),
    "stdout-full": "import os\n_fd = os.open('/dev/full', os.O_WRONLY)\nos.dup2(_fd, 1)\nos.close(_fd)\n",
    # stdout a pipe whose reader has gone (`jaxport inspect ART | head -1`, head done)
    "stdout-gone": "import os\n_r, _w = os.pipe()\nos.close(_r)\nos.dup2(_w, 1)\nos.close(_w)\n",
    # a cluster's ulimit -d / ulimit -t: hard limits no process may raise
    "hard-data-16G": "import resource\nresource.setrlimit(resource.RLIMIT_DATA, (16 << 30, 16 << 30))\n",
    "hard-data-3G": "import resource\nresource.setrlimit(resource.RLIMIT_DATA, (3 << 30, 3 << 30))\n",
    "hard-cpu-600": "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (600, 600))\n",
    # a shared cache: others can write in it, or it belongs to someone else
    "cache-777": "import os\nos.chmod('cache', 0o777)\n",
    "cache-775": "import os\nos.chmod('cache', 0o775)\n",
    "cache-757": "import os\nos.chmod('cache', 0o757)\n",
    "cache-foreign": "import os\nos.chown('cache', 65534, 65534)\nos.chmod('cache', 0o755)\n",
    "cache-777-env": ("import os\nos.chmod('cache', 0o777)\n"
                      "os.environ['JAXPORT_CACHE_DIR'] = os.path.abspath('cache')\n"),
    "cache-link": "import os\nos.chmod('real-cache', 0o777)\n",
    "isolated-marker": "import os\nos.environ['JAXPORT_ISOLATED'] = '1'\n",
    # JAX_PLATFORMS naming a platform that does not exist, or one whose plugin this machine lacks
    **{f"platforms-{p}": f"import os\nos.environ['JAX_PLATFORMS'] = {p!r}\n" for p in ("bogus", "tpu", "cuda")},
    # JAX's op-by-op debugging mode, left on in a shell
    "disable-jit": "import os\nos.environ['JAX_DISABLE_JIT'] = '1'\n",
    # settings XLA reads as it starts, and JAX's own: XLA ended the process (exit 1, its fatal log), JAX raised
    # ValueError from deep inside its config (issue 46)
    **{f"xla-flags-{label}": f"import os\nos.environ['XLA_FLAGS'] = {value!r}\n"
       for label, value in (("unknown", "--xla_bogus"), ("bad-value", "--xla_cpu_enable_fast_math=maybe"),
                            ("second-flag",
                             "--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=q"),
                            ("no-such-file", "junk"), ("control", "\x1b[31m--xla_bogus\u202e"),
                            ("valid", "--xla_force_host_platform_device_count=2"))},
    # the path a console script starts with (python -c would put the working directory first), a fresh cache (so
    # that the child probe of XLA_FLAGS runs), and flags XLA takes: for a jax/ folder planted where jaxport runs
    "console-path": "import sys\nsys.path[:] = [p for p in sys.path if p not in ('', '.')]\n",
    "console-path-xla-flags": ("import os, sys, tempfile\nsys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
                               "os.environ['JAXPORT_CACHE_DIR'] = tempfile.mkdtemp(prefix='jaxport-hostile-cache-')\n"
                               "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=3'\n"),
    **{f"jax-setting-{label}": f"import os\nos.environ[{name!r}] = {value!r}\n"
       for label, name, value in (("x64", "JAX_ENABLE_X64", "maybe"), ("rank", "JAX_NUMPY_RANK_PROMOTION", "bogus"),
                                  ("int", "JAX_SERIALIZATION_VERSION", "abc"))},
}
NAME = "modèle-é-模型"
#: A package planted in the working directory as ``jax`` or ``jaxlib``: importing it leaves the canary.
PLANTED = (b"import os\nos.makedirs('CANARY', exist_ok=True)\n"
           b"raise ImportError('a package planted in the working directory')\n")


def _described(b: Base) -> bytes:
    from .corpus import _set, _with

    return _with(b, _set(["description"], "Modèle: prévision, 模型, Ωmega; «quoted»"))


def environment(b: Base) -> Iterator[Case]:
    art = f"{NAME}.jaxport"
    described = _described(b)
    for enc in ("ascii", "latin-1"):
        hook = f"encoding-{enc}"
        runs = {
            "inspect": (["inspect", art], set(), {0}),
            "inspect-json": (["inspect", "--json", art], set(), {0}),
            "check": (["check", art, "--policy", "policy.yaml"], set(), {0, 14}),
            "call-o": (["call", art, "--inputs", "x.npy", "--no-cache", "-o", "sortie-é.npz"], {"sortie-é.npz"}, {0}),
            "extract": (["extract", art, "--weights", "poids-é.npz"], {"poids-é.npz"}, {0}),
            "missing": (["inspect", "absent-é-模型.jaxport"], set(), {7}),
            "diff": (["diff", "--no-programs", "base.jaxport", art], set(), {0, 13}),
        }
        for label, (argv, outputs, codes) in runs.items():
            ok = 0 in codes
            yield _c("environment", f"{enc}-{label}", [(label, argv)], codes - {0} or {7}, data=described, file=art,
                     setup=(("copy", "x.npy", "x.npy"), ("write", "policy.yaml",
                            b"jaxport_policy: 1\nplatforms:\n  allowed: [cpu]\n")),
                     timeout=HEAVY, hook=hook, accept={label} if ok else set(), outputs=outputs,
                     why="what the terminal cannot show is escaped" if ok else "")
    for label, argv in {"inspect": ["inspect", "base.jaxport"], "call": ["call", "base.jaxport", "--random"],
                        "export": ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"]}.items():
        yield _c("environment", f"deleted-cwd-{label}", [(label, argv)], {2}, timeout=HEAVY, hook="deleted-cwd",
                 setup=(("write", "spec.yaml", SPEC_G),), mention="current directory")
    policy = (("write", "policy.yaml", b"jaxport_policy: 1\nplatforms:\n  allowed: [cpu]\n"),)
    for label, argv in {"inspect": ["inspect", "base.jaxport"], "inspect-json": ["inspect", "--json", "base.jaxport"],
                        "call": ["call", "base.jaxport", "--random", "--no-cache"],
                        "diff": ["diff", "--no-programs", "base.jaxport", "base.jaxport"],
                        "check": ["check", "base.jaxport", "--policy", "policy.yaml"]}.items():
        yield _c("environment", f"deleted-cwd-absolute-{label}", [(label, argv)], {2}, timeout=HEAVY,
                 hook="deleted-cwd-absolute", setup=policy, accept={label},
                 why="a command of absolute paths needs no working directory")
    yield _c("environment", "deleted-cwd-absolute-call-o", [("call-o", ["call", "base.jaxport", "--random",
                                                                        "--no-cache", "-o", "out.npz"])], {2},
             timeout=HEAVY, hook="deleted-cwd-absolute", mention="'out.npz'")
    yield _c("environment", "deleted-cwd-absolute-verify", [("verify", ["verify", "base.jaxport"])], {2},
             timeout=HEAVY, hook="deleted-cwd-absolute", mention="current directory")
    for label, argv, codes in (("inspect", ["inspect", "base.jaxport"], {14}),
                               ("inspect-json", ["inspect", "--json", "base.jaxport"], {14}),
                               ("inspect-mlir", ["inspect", "--mlir", "base.jaxport"], {14}),
                               ("call", ["call", "base.jaxport", "--random", "--no-cache"], {14}),
                               ("call-json", ["call", "base.jaxport", "--random", "--no-cache", "--json"], {14}),
                               ("check-json", ["check", "base.jaxport", "--policy", "policy.yaml", "--json"], {14}),
                               ("diff", ["diff", "--no-programs", "base.jaxport", "base.jaxport"], {13}),
                               ("help", ["--help"], {2}), ("version", ["--version"], {2})):
        yield _c("environment", f"stdout-gone-{label}", [(label, argv)], codes, timeout=HEAVY, hook="stdout-gone",
                 setup=policy, accept={label}, why="the reader went away: the rest of the output goes nowhere and "
                                                   "the command ends with its own code")
    yield _c("environment", "stdout-gone-missing", [("missing", ["inspect", "absent.jaxport"])], {7},
             timeout=HEAVY, hook="stdout-gone")
    for label, argv, codes in (("inspect", ["inspect", "base.jaxport"], {11}),
                               ("inspect-json", ["inspect", "--json", "base.jaxport"], {11}),
                               ("inspect-mlir", ["inspect", "--mlir", "base.jaxport"], {11}),
                               ("call", ["call", "base.jaxport", "--random", "--no-cache"], {11}),
                               ("call-json", ["call", "base.jaxport", "--random", "--no-cache", "--json"], {11}),
                               ("check-json", ["check", "base.jaxport", "--policy", "policy.yaml", "--json"], {11, 14}),
                               ("diff", ["diff", "--no-programs", "base.jaxport", "base.jaxport"], {11}),
                               ("missing-json", ["inspect", "--json", "absent.jaxport"], {7}),
                               ("help", ["--help"], {11}), ("version", ["--version"], {11})):
        yield _c("environment", f"stdout-full-{label}", [(label, argv)], codes, timeout=HEAVY, hook="stdout-full",
                 setup=(("write", "policy.yaml", b"jaxport_policy: 1\nplatforms:\n  allowed: [cpu]\n"),))
    for platform in ("bogus", "tpu", "cuda"):
        for label, argv in {"call": ["call", "base.jaxport", "--random", "--no-cache"],
                            "export": ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
                            "verify": ["verify", "base.jaxport", "--dim", "batch=2"]}.items():
            yield _c("environment", f"platforms-{platform}-{label}", [(label, argv)], {10}, timeout=HEAVY,
                     hook=f"platforms-{platform}", setup=(("write", "spec.yaml", SPEC_G),), mention="JAX_PLATFORMS")
    for label, argv in {"call": ["call", "base.jaxport", "--random", "--no-cache"],
                        "export": ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
                        "verify": ["verify", "base.jaxport", "--dim", "batch=2"]}.items():
        yield _c("environment", f"disable-jit-{label}", [(label, argv)], {10}, timeout=HEAVY, hook="disable-jit",
                 setup=(("write", "spec.yaml", SPEC_G), ("copy", "params.npz", "params.npz")), accept={label},
                 outputs={"out.jaxport", "out.jaxport.manifest.json"},
                 why="jaxport's commands keep JAX's jit on (exporting and calling exported programs need it)")
    starting = {"call": ["call", "base.jaxport", "--random", "--no-cache"],
                "call-isolate": ["call", "base.jaxport", "--random", "--no-cache", "--isolate"],
                "export": ["export", "model.py:g", "--shapes", "spec.yaml", "-o", "out.jaxport"],
                "verify": ["verify", "base.jaxport", "--dim", "batch=2"],
                "inspect-mlir": ["inspect", "--mlir", "base.jaxport"]}
    for hook, variable in (("xla-flags-unknown", "XLA_FLAGS"), ("xla-flags-bad-value", "XLA_FLAGS"),
                           ("xla-flags-second-flag", "XLA_FLAGS"), ("xla-flags-no-such-file", "XLA_FLAGS"),
                           ("xla-flags-control", "XLA_FLAGS"), ("jax-setting-x64", "JAX_ENABLE_X64"),
                           ("jax-setting-rank", "JAX_NUMPY_RANK_PROMOTION"),
                           ("jax-setting-int", "JAX_SERIALIZATION_VERSION")):
        for label, argv in starting.items():
            yield _c("environment", f"{hook}-{label}", [(label, argv)], {10}, timeout=HEAVY, hook=hook,
                     setup=(("write", "spec.yaml", SPEC_G), ("copy", "params.npz", "params.npz")), mention=variable)
    for label, argv in starting.items():
        yield _c("environment", f"xla-flags-valid-{label}", [(label, argv)], {10}, timeout=HEAVY,
                 hook="xla-flags-valid", setup=(("write", "spec.yaml", SPEC_G), *VERIFY_FILES),
                 accept={label}, outputs={"out.jaxport", "out.jaxport.manifest.json"},
                 why="flags XLA takes: the command runs as without them")
    planted = tuple(("write", f"{package}/__init__.py", PLANTED) for package in ("jax", "jaxlib"))
    for label, hook, argv in (("call-isolate", "console-path", starting["call-isolate"]),
                              ("xla-flags-probe", "console-path-xla-flags", starting["call"])):
        yield _c("environment", f"cwd-jax-package-{label}", [(label, argv)], {10}, timeout=HEAVY, hook=hook,
                 setup=planted, accept={label}, why="the children import JAX from where jaxport does, never from the "
                                                    "working directory")
    isolate = ["call", "base.jaxport", "--random", "--no-cache", "--isolate"]
    for hook, extra in (("hard-data-16G", []), ("hard-data-16G", ["--memory-limit", "32G"]),
                        ("hard-data-3G", []), ("hard-data-3G", ["--memory-limit", "8G"]),
                        ("hard-cpu-600", ["--time-limit", "3600"])):
        label = f"{hook}{'-' + '-'.join(extra).strip('-') if extra else ''}"
        yield _c("environment", label, [("call-isolate", isolate + extra)], {2, 15}, timeout=150, hook=hook,
                 accept={"call-isolate"}, why="the limit is clamped to the hard limit the process inherited")
    yield _c("environment", "hard-data-16G-mlir", [("mlir-isolate", ["inspect", "--mlir", "base.jaxport",
                                                                     "--isolate"])], {2, 15}, timeout=150,
             hook="hard-data-16G", accept={"mlir-isolate"}, why="the limit is clamped to the hard limit")


# --- shared caches ----------------------------------------------------------------------------------------------------

def _planted_verdict(payload: bytes) -> tuple[str, bytes]:
    """The file name and bytes of a "passed" verdict for ``payload``: what anyone who can write the directory can
    plant (the key is predictable)."""
    import json
    from pathlib import Path

    from jaxport import usercache
    from jaxport.isolation import isolate

    key = isolate._verdict_key(hashlib.sha256(payload).hexdigest())
    return usercache.verdict_path(Path("."), key).name, (json.dumps(key, indent=1, sort_keys=True) + "\n").encode()


def cache_trust(b: Base) -> Iterator[Case]:
    from jaxport.program.module_scan import stablehlo_version

    mod = b.exported.mlir_module_serialized
    text = _module_text(b, mod)
    program, _ = programs(text)["recursion-main"]
    data = _artifact_with_program(b, _serialize_text(program, stablehlo_version(mod) or "1.0.0"))
    payload = _members(data)[PAYLOAD]
    vname, verdict = _planted_verdict(payload)
    # --json: the note that the directory is not used (a warning line) stays out of stderr's one error line
    call_cache = ["call", "{file}", "--random", "--cache-dir", "cache", "--json"]
    for hook in ("cache-777", "cache-775", "cache-757", "cache-foreign"):
        yield _c("cache-trust", f"planted-verdict-{hook}", [("call", call_cache),
                                                            ("call-o", call_cache + ["-o", "out.npz"])], {7},
                 data=data, setup=(("dir", "cache"), ("write", f"cache/{vname}", verdict)), timeout=HEAVY,
                 hook=hook, mention=RECURSION)
    yield _c("cache-trust", "planted-verdict-env-777", [("call", ["call", "{file}", "--random", "--no-cache"])],
             {7}, data=data, setup=(("dir", "cache"), ("write", f"cache/{vname}", verdict)), timeout=HEAVY,
             hook="cache-777-env", mention=RECURSION)
    yield _c("cache-trust", "planted-verdict-symlinked-777", [("call", call_cache)], {7},
             data=data, setup=(("dir", "real-cache"), ("write", f"real-cache/{vname}", verdict),
                               ("symlink", "cache", "real-cache")), timeout=HEAVY, hook="cache-link",
             mention=RECURSION)
    # JAXPORT_ISOLATED=1 from outside: the parent must still check programs in a child, never read one itself
    deep = deep_modules(b)
    for name in ("attr-dict-30000",):  # crashes MLIR's printer in-process; the child is stopped or crashes
        if name not in deep:
            continue
        bytecode, _ = deep[name]
        yield _c("cache-trust", f"isolated-marker-{name}",
                 [("call", ["call", "{file}", "--random", "--no-cache"]), ("mlir", ["inspect", "--mlir", "{file}"])],
                 {7, 15}, data=_artifact_with_program(b, bytecode), timeout=NATIVE, hook="isolated-marker")
        yield _c("cache-trust", f"isolated-marker-import-{name}",
                 [("import", ["import", "{file}", "--shapes", "spec.yaml", "-o", "out.jaxport"])], {5, 7, 15},
                 data=bytecode, file="module.mlirbc", setup=(("write", "spec.yaml", IMPORT_SPEC),), timeout=NATIVE,
                 hook="isolated-marker", outputs=IMPORT_OUT)
    yield _c("cache-trust", "isolated-marker-recursion",
             [("call", ["call", "{file}", "--random", "--no-cache"])], {7}, data=data, timeout=HEAVY,
             hook="isolated-marker", mention=RECURSION)


def _members(data: bytes) -> dict[str, bytes]:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def cases(b: Base) -> Iterator[Case]:
    for gen in (run_time_programs, environment, cache_trust):
        yield from gen(b)

