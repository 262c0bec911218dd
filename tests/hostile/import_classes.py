"""The import classes (issue 36): modules whose names or collectives a reader of jaxport's code would aim at.

- ``import-names``: symbol names spelled with MLIR's escapes and quotes (``@"m\\61in"`` is ``@main``), a ``main``
  defined twice under two spellings, a name of jaxport's own (``_jaxport_imported_main``), comments that mention a
  call, a deep type alias the program never uses, custom-call targets spelled with escapes to pass for another
  (``@"xla\\5fpython\\5fcpu\\5fcallback"``), and a module that nests within the limits only until import wraps its
  ``main``. ``import`` holds the program rules on the module as MLIR prints it, as every reader does, so what it
  accepts every reader accepts (``stored-*``: the artifacts it wrote, through ``call`` and ``inspect --mlir``), and
  the artifacts an import without those checks writes are refused at load (``artifact-*``).
- ``collective-devices``: ``collective_permute``, ``all_reduce``, ``all_gather``, ``collective_broadcast`` naming
  devices a one-device program does not have (1, 2^63 - 1, in a private function, inside a region, with channel
  handles and global device ids), as modules to ``import`` and as programs of artifacts to ``call``; and the
  collectives a one-device program may hold (its own device, replica groups padded with -1), which run.

The modules are shared with ``tests/importer/test_import_names.py``, which checks their exact messages. Every
module's ``main`` takes an ``f32[3]`` and, when it runs, returns it unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

from .corpus import Base, Case

T = "tensor<3xf32>"
IMPORT = ("import", ["import", "{file}", "-o", "out.jaxport"])
IMPORT_OUT = frozenset({"out.jaxport", "out.jaxport.manifest.json"})
CALL = ("call", ["call", "{file}", "--random", "--no-cache"])
MLIR = ("mlir", ["inspect", "--mlir", "{file}"])


def func(body: str = "", result: str = "%a", name: str = "@main", private: bool = False) -> str:
    """A function of one ``f32[3]`` argument and result."""
    return (f"func.func {'private ' if private else ''}{name}(%a: {T}) -> {T} {{\n{body}  return {result} : {T}\n"
            f"}}\n")


def all_reduce(groups: str, shape: str, extra: str = "") -> str:
    return (f'  %0 = "stablehlo.all_reduce"(%a) ({{\n  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n'
            f'    %s = stablehlo.add %x, %y : tensor<f32>\n    stablehlo.return %s : tensor<f32>\n'
            f'  }}) {{replica_groups = dense<{groups}> : tensor<{shape}xi64>{extra}}} : ({T}) -> {T}\n')


def permute(pairs: str, n: int, handle: str = "handle = 1, type = 1", result: str = "%0") -> str:
    return (f'  {result} = "stablehlo.collective_permute"(%a) {{source_target_pairs = dense<{pairs}> : '
            f'tensor<{n}x2xi64>, channel_handle = #stablehlo.channel_handle<{handle}>}} : ({T}) -> {T}\n')


def _wrapped_too_deep() -> str:
    """A module nested 122 levels deep, within the limit; with its tuple result, import wraps main, and the call of
    the wrapper adds the levels that take the stored program over it."""
    deep = "[" * 122 + "0" + "]" * 122
    return (f"func.func @main(%a: {T}) -> tuple<{T}> {{\n  %0 = stablehlo.add %a, %a {{jx.deep = {deep}}} : {T}\n"
            f"  %1 = stablehlo.tuple %0 : tuple<{T}>\n  return %1 : tuple<{T}>\n}}\n")


#: {name: (module text, the exit code of ``import``: 0 when it imports, and the program returns its argument)}.
NAME_MODULES: dict[str, tuple[str, int]] = {
    "quoted-main": (func(name='@"main"'), 0),
    "hex-escaped-main": (func(name='@"\\6d\\61\\69\\6e"'), 0),
    "escaped-self-call": (func(f'  %0 = func.call @"m\\61in"(%a) : ({T}) -> {T}\n', "%0"), 5),
    "quoted-self-call": (func(f'  %0 = func.call @"main"(%a) : ({T}) -> {T}\n', "%0"), 5),
    "generic-escaped-self-call": ('"func.func"() <{sym_name = "m\\61in", function_type = (tensor<3xf32>) -> '
                                  'tensor<3xf32>}> ({\n^bb0(%a: tensor<3xf32>):\n  %0 = "func.call"(%a) <{callee = '
                                  '@main}> : (tensor<3xf32>) -> tensor<3xf32>\n  "func.return"(%0) : (tensor<3xf32>) '
                                  '-> ()\n}) : () -> ()\n', 5),
    "mutual-recursion-escaped": (func(f'  %0 = func.call @"\\68elper"(%a) : ({T}) -> {T}\n', "%0")
                                 + func(f'  %0 = func.call @"m\\61in"(%a) : ({T}) -> {T}\n', "%0", "@helper", True),
                                 5),
    "newline-escape-call": (func('', "%a", '@"a\\0Ab"', True)
                            + func(f'  %0 = func.call @"a\\nb"(%a) : ({T}) -> {T}\n', "%0"), 0),
    "comment-mentions-main": (func("  // %0 = func.call @main(%a) : (tensor<3xf32>) -> tensor<3xf32>\n"), 0),
    "main-twice-by-escape": (func() + func(name='@"m\\61in"'), 7),  # files MLIR cannot read: exit 7, no module
    "unicode-escape": (func(name='@"m\\u0061in"'), 7),
    "nul-in-name": (func(name='@"main\\00"'), 4),
    "reserved-inner-name": (func(name="@_jaxport_imported_main", private=True)
                            + f"func.func @main(%a: {T}) -> tuple<{T}> {{\n  %0 = func.call @_jaxport_imported_main"
                              f"(%a) : ({T}) -> {T}\n  %1 = stablehlo.tuple %0 : tuple<{T}>\n"
                              f"  return %1 : tuple<{T}>\n}}\n", 0),
    "unused-deep-alias": ("!deep = " + "tuple<" * 200 + "i32" + ">" * 200 + "\n" + func(), 0),
    "deep-once-wrapped": (_wrapped_too_deep(), 5),
}

#: {name: (module text, exit code of ``import``)}: custom calls whose targets are spelled with escapes. ``import``
#: lists the offending targets one a line (its policy errors describe the importer's own module), so the corpus holds
#: them as artifacts (``call``: one line); ``tests/importer`` checks import's messages.
TARGET_MODULES: dict[str, tuple[str, int]] = {
    "escaped-callback-target": (func(f'  %0 = stablehlo.custom_call @"xla\\5fpython\\5fcpu\\5fcallback"(%a) : '
                                     f'({T}) -> {T}\n', "%0"), 6),
    "escaped-callback-attribute": (func(f'  %0 = stablehlo.custom_call @Sharding(%a) {{call_target_name = '
                                        f'"xla\\5fffi\\5fpython\\5fcpu\\5fcallback"}} : ({T}) -> {T}\n', "%0"), 6),
    "escaped-unstable-target": (func(f'  %0 = stablehlo.custom_call @"evil\\5fffi\\5ftarget"(%a) : ({T}) -> {T}\n',
                                     "%0"), 6),
    "nul-in-target": (func(f'  %0 = stablehlo.custom_call @"Sharding\\00x"(%a) : ({T}) -> {T}\n', "%0"), 6),
    "escaped-stable-target": (func(f'  %0 = stablehlo.custom_call @"Shardin\\67"(%a) {{mhlo.sharding = '
                                   f'"{{replicated}}"}} : ({T}) -> {T}\n', "%0"), 0),
}

#: {name: (module text, exit code of ``import``)}: 6 for collectives naming devices a one-device program lacks.
COLLECTIVE_MODULES: dict[str, tuple[str, int]] = {
    "permute-two-devices": (func(permute("[[0, 1], [1, 0]]", 2), "%0"), 6),
    "permute-huge-id": (func(permute("[[0, 9223372036854775807]]", 1), "%0"), 6),
    "permute-negative-id": (func(permute("[[0, -1]]", 1), "%0"), 7),  # MLIR's verifier refuses it: no module
    "permute-in-private-function": (func(permute("[[0, 1]]", 1), "%0", "@helper", True)
                                    + func(f"  %0 = func.call @helper(%a) : ({T}) -> {T}\n", "%0"), 6),
    "permute-in-region": (func("  %i = stablehlo.constant dense<0> : tensor<i32>\n  %0 = \"stablehlo.case\"(%i) ({\n"
                               + permute("[[0, 1]]", 1, result="%c") + f"    stablehlo.return %c : {T}\n"
                               f"  }}) : (tensor<i32>) -> {T}\n", "%0"), 6),
    "all-reduce-two-devices": (func(all_reduce("[[0, 1]]", "1x2"), "%0"), 6),
    "all-reduce-global-ids": (func(all_reduce("[[0, 1]]", "1x2", ", channel_handle = #stablehlo.channel_handle<"
                                              "handle = 1, type = 1>, use_global_device_ids"), "%0"), 6),
    "all-reduce-huge-id": (func(all_reduce("[[0, 4294967296]]", "1x2"), "%0"), 7),
    "all-gather-two-devices": (func(f'  %0 = "stablehlo.all_gather"(%a) {{all_gather_dim = 0 : i64, replica_groups '
                                    f'= dense<[[0, 1]]> : tensor<1x2xi64>}} : ({T}) -> tensor<6xf32>\n'
                                    f'  %1 = stablehlo.slice %0 [0:3] : (tensor<6xf32>) -> {T}\n', "%1"), 6),
    "broadcast-two-devices": (func(f'  %0 = "stablehlo.collective_broadcast"(%a) {{replica_groups = dense<[[0, 1]]> '
                                   f': tensor<1x2xi64>}} : ({T}) -> {T}\n', "%0"), 6),
    "partitions-declared-two": ("module attributes {mhlo.num_partitions = 2 : i32} {\n"
                                + func(permute("[[0, 1]]", 1), "%0") + "}\n", 4),
    "replicas-declared-zero": ("module attributes {mhlo.num_replicas = 0 : i32} {\n"
                               + func(permute("[[0, 1]]", 1), "%0") + "}\n", 6),
    "all-reduce-own-device": (func(all_reduce("[[0]]", "1x1"), "%0"), 0),
    "all-reduce-padded-group": (func(all_reduce("[[0, -1]]", "1x2"), "%0"), 0),
    "permute-to-itself": (func(permute("[[0, 0]]", 1), "%0"), 0),
    "permute-channel-zero": (func(permute("[[0, 0]]", 1, "handle = 0, type = 0"), "%0"), 0),
    "permute-channel-extreme": (func(permute("[[0, 0]]", 1, "handle = -9223372036854775808, type = 99"), "%0"), 0),
}
#: The collective modules whose programs go into artifacts as they are, the import's device check left out: the
#: check at load (``call``) refuses them with exit 6.
LOADED_COLLECTIVES = ("permute-two-devices", "permute-huge-id", "permute-in-region", "all-reduce-two-devices",
                      "all-gather-two-devices")
#: Name modules whose programs a reader refuses, written into artifacts by an import without its checks: the
#: artifact an import before issue 36 wrote for them (every reader refused it, exit 7).
LOADED_NAMES = ("escaped-self-call", "deep-once-wrapped")
#: Every module by name.
ALL_MODULES = {**NAME_MODULES, **TARGET_MODULES, **COLLECTIVE_MODULES}


#: Writes, in a child process, the artifacts an import without its checks writes for the modules named on the
#: command line (a hostile producer's): an import in this process would remember its payload as one this process made
#: (``isolate.trust``), and the commands the corpus runs in this process would then read it unchecked.
_UNCHECKED = """
import sys
from pathlib import Path
from tests.hostile import import_classes as ic
out = Path(sys.argv[1])
for name in sys.argv[2:]:
    data = ic.imported(ic.ALL_MODULES[name][0], unchecked=True)
    if data is not None:
        (out / f"{name}.jaxport").write_bytes(data)
"""


def imported(text: str, unchecked: bool = False) -> bytes | None:
    """The artifact ``jaxport.import_stablehlo`` writes for a module (``unchecked``: with the program rules that
    import holds left out, as a hostile producer would write it), or None when import refuses it."""
    import jaxport
    from jaxport.importer import build, mlir

    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        if unchecked:
            for owner, name in ((build, "check_custom_calls"), (build, "_check_stored_program"),
                                (mlir, "_check_printed"), (mlir, "check_program_text")):
                stack.enter_context(mock.patch.object(owner, name, lambda *a, **k: None))
        path = Path(d) / "module.mlir"
        path.write_text(text)
        try:
            result = jaxport.import_stablehlo(path, output=Path(d) / "out.jaxport", write_manifest=False)
        except jaxport.JaxportError:
            return None
        return Path(result.path).read_bytes()


def unchecked_artifacts(names: Iterable[str]) -> dict[str, bytes]:
    """``{name: artifact}`` of :func:`imported` without checks, for each module named, written in a child."""
    repo = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-c", _UNCHECKED, d, *names], cwd=repo, capture_output=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(repo)}, check=False)
        return {p.stem: p.read_bytes() for p in Path(d).glob("*.jaxport")}


def _module_case(cls: str, name: str, text: str, code: int) -> Case:
    accepted = code == 0
    return Case(cls, f"import-{name}", cls, text.encode(), frozenset({code} - {0}),
                accept=frozenset({"import"} if accepted else ()), file="module.mlir",
                why="a valid module, its names read as MLIR reads them" if accepted else "",
                commands=(("import", tuple(IMPORT[1])),), outputs=IMPORT_OUT if accepted else frozenset())


def _artifact_case(cls: str, name: str, data: bytes, code: int) -> Case:
    """An artifact whose program breaks a rule: ``call`` refuses it (``code``); ``inspect --mlir`` prints a program
    it can read, or refuses it as ``call`` does."""
    return Case(cls, f"artifact-{name}", cls, data, frozenset({code}), accept=frozenset({"mlir"}),
                why="inspect --mlir prints the program without running it",
                commands=tuple((label, tuple(argv)) for label, argv in (CALL, MLIR)))


def _stored_case(cls: str, name: str, text: str) -> Iterator[Case]:
    """The artifact import wrote for an accepted module: every reader accepts it, and it runs."""
    data = imported(text)
    if data is not None:
        yield Case(cls, f"stored-{name}", cls, data, frozenset(), accept=frozenset({"call", "mlir"}),
                   why="import accepted the module: every reader accepts its artifact, which runs",
                   commands=tuple((label, tuple(argv)) for label, argv in (CALL, MLIR)))


def import_names(b: Base) -> Iterator[Case]:
    for name, (text, code) in NAME_MODULES.items():
        yield _module_case("import-names", name, text, code)
        if code == 0:
            yield from _stored_case("import-names", name, text)
    for name, (text, code) in TARGET_MODULES.items():
        if code == 0:
            yield _module_case("import-names", name, text, code)
            yield from _stored_case("import-names", name, text)
    refused = [n for n, (_, code) in TARGET_MODULES.items() if code] + list(LOADED_NAMES)
    for name, data in sorted(unchecked_artifacts(refused).items()):
        yield _artifact_case("import-names", name, data, 7 if name in LOADED_NAMES else 6)


def collective_devices(b: Base) -> Iterator[Case]:
    for name, (text, code) in COLLECTIVE_MODULES.items():
        yield _module_case("collective-devices", name, text, code)
        if code == 0:
            yield from _stored_case("collective-devices", name, text)
    for name, data in sorted(unchecked_artifacts(LOADED_COLLECTIVES).items()):
        yield _artifact_case("collective-devices", name, data, 6)


def cases(b: Base) -> Iterator[Case]:
    for gen in (import_names, collective_devices):
        yield from gen(b)
