"""What `jaxport inspect` imports: the fast path reads and shows an artifact with the standard library and
jaxport's format modules alone (issue 16). A structural guard on start-up, not a timing test: each of the modules
below cost `inspect` from 0.2 ms to 7 ms of its start-up, and nothing on the path needs it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from jaxport._record import dataclass as light_dataclass
from tests.support import REPO

GOLDEN = REPO / "tests" / "golden" / "1.0"

#: Never imported by the fast path. JAX, numpy and PyYAML: the format is read without them; click and rich: the fast
#: path prints without them; ``dataclasses`` (with ``inspect``, ``ast``, ``dis``, ``tokenize``): ``jaxport._record``
#: stands in for it; ``calendar``, ``locale``, ``difflib``, ``mmap``: only other paths need them; the spec parser
#: and builder (``jaxport.spec.parse``, ``.build``: the manifest reader checks ranges with ``jaxport.spec.values``),
#: ``jaxport.sharding``, ``jaxport.jaxprivate.exported``: not for an artifact without a mesh.
NOT_IMPORTED = {"jax", "jaxlib", "numpy", "ml_dtypes", "yaml", "click", "rich", "dataclasses", "inspect", "ast",
                "dis", "tokenize", "calendar", "locale", "difflib", "mmap", "jaxport.spec.parse", "jaxport.spec.build",
                "jaxport.sharding", "jaxport.jaxprivate.exported", "typing", "tempfile", "random"}
#: Standard modules that jaxport modules on the path imported, and the only jaxport modules still allowed to (those
#: that use them; ``typing``: the public API's facade, ``jaxport/__init__.py``). Any other one imports ``typing``
#: only for type checkers (``if TYPE_CHECKING:``, with ``TYPE_CHECKING = False``), and the others where used.
IMPORTERS = {"typing": set(), "tempfile": set(), "datetime": {"jaxport.artifact.window.compat"},
             "hashlib": {"jaxport.artifact.container"}}

# Runs the console script's ``main`` with ``__import__`` wrapped to note every module whose code imports a watched
# one (an import statement of a module already loaded included), then writes, after the command's own output on
# stderr, the modules loaded and those importers.
_PROBE = """
import builtins
import sys

WATCHED = set(sys.argv.pop(1).split(","))
importers = set()
real_import = builtins.__import__


def watching(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name in WATCHED:
        importers.add(f"{name}={(globals or {}).get('__name__')}")
    return real_import(name, globals, locals, fromlist, level)


builtins.__import__ = watching
from jaxport_cli.main import main

sys.argv = ["jaxport", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
sys.stdout.flush()
sys.stderr.write(f"\\n{code} {' '.join(sorted(sys.modules))} | {' '.join(sorted(importers))}")
"""


def _probe(*args: str) -> tuple[str, set[str], set[tuple[str, str]]]:
    res = subprocess.run([sys.executable, "-c", _PROBE, ",".join(IMPORTERS), *args], capture_output=True,
                         text=True, timeout=60)
    err, _, tail = res.stderr.rpartition("\n")
    head, _, watched = tail.partition(" | ")
    code, *modules = head.split()
    assert (code, err) == ("0", ""), res.stderr
    return res.stdout, set(modules), {tuple(pair.split("=", 1)) for pair in watched.split()}  # type: ignore[misc]


@pytest.mark.parametrize(("args", "start"), [
    (["inspect", "mlp-bound.jaxport"], "mlp-npz 1.0.0  ("),
    (["inspect", "--json", "mlp-bound.jaxport"], '{\n  "format": "jaxport",\n'),
    (["inspect", "encoder.jaxport", "--function", "encode"], "encoder 1.2.0  ("),
])
def test_inspect_imports_only_what_it_needs(args, start):
    out, modules, importers = _probe(*(str(GOLDEN / a) if a.endswith(".jaxport") else a for a in args))
    assert out.startswith(start) and out.endswith("\n")
    assert {"jaxport.artifact.container", "jaxport_cli.inspect_view"} <= modules  # the probe ran the fast path
    loaded = modules | {m.split(".")[0] for m in modules}
    assert sorted(NOT_IMPORTED & loaded) == []
    assert sorted((name, by) for name, by in importers if by.startswith("jaxport") and by not in IMPORTERS[name]) == []


@light_dataclass(frozen=True)
class _Light:
    op: str
    args: tuple = ()
    value: int | None = None

    def twice(self) -> tuple:
        return self.args * 2


@dataclasses.dataclass(frozen=True)
class _Standard:
    op: str
    args: tuple = ()
    value: int | None = None


def _rename(text: str) -> str:
    return text.replace("_Standard", "_Light")


def test_light_dataclass_behaves_as_the_standard_one():
    """``jaxport._record.dataclass(frozen=True)``, which the modules on inspect's path use instead of the
    standard library's: construction, repr, equality, hashing and immutability as ``dataclasses`` gives them."""
    cases = [("int",), ("var", (), "b"), ("+",), ("neg", ("x",), 3)]
    for args in cases:
        light, standard = _Light(*args), _Standard(*args)
        assert repr(light) == _rename(repr(standard)) and hash(light) == hash(standard)
        assert light == _Light(*args) and light != _Light("other") and light != standard
        assert (light == args) is False and light.__eq__(args) is NotImplemented
    keyword = _Light(value=2, op="int")
    assert (keyword.op, keyword.args, keyword.value, keyword.twice()) == ("int", (), 2, ())
    assert _Light("*", args=(1,)).twice() == (1, 1)
    assert _Light.__match_args__ == _Standard.__match_args__ == ("op", "args", "value")
    assert {_Light("a"), _Light("a"), _Light("b")} == {_Light("a"), _Light("b")}
    light = _Light("int")
    with pytest.raises(AttributeError, match="^cannot assign to field 'op'$"):
        light.op = "var"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="^cannot assign to field 'extra'$"):
        light.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="^cannot delete field 'op'$"):
        del light.op  # type: ignore[misc]
    for bad_call in (lambda: _Light(), lambda: _Light("a", (), 1, 2), lambda: _Light("a", op="b"),
                     lambda: _Light("a", bogus=1)):
        with pytest.raises(TypeError):
            bad_call()
    with pytest.raises(TypeError, match="missing 1 required argument: 'op'"):
        _Light()
    with pytest.raises(TypeError, match="got multiple values for argument 'op'"):
        _Light("a", op="b")
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'bogus'"):
        _Light("a", bogus=1)


def test_light_dataclass_refuses_what_it_does_not_support():
    with pytest.raises(TypeError, match="frozen=True only"):
        light_dataclass(frozen=False)
    with pytest.raises(ValueError, match="mutable default"):
        light_dataclass(frozen=True)(type("Bad", (), {"__annotations__": {"x": "list"}, "x": []}))
    with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):
        light_dataclass(frozen=True)(type("Bad", (), {"__annotations__": {"x": "int", "y": "int"}, "x": 1}))
    with pytest.raises(TypeError, match="base classes"):
        light_dataclass(frozen=True)(type("Bad", (_Light,), {}))
