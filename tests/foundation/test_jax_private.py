"""JAX's private surface (``jaxport.jaxprivate``): each private function jaxport calls is still there with the
parameters it passes, each private value it reads is still there, and no module outside the package reaches into
``jax._src`` or jaxlib. A JAX release that changes one fails here, naming it, rather than in a user's call."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from jaxport.jaxprivate import surface
from tests.support import REPO

PACKAGE = REPO / "jaxport" / "jaxprivate"
PRIVATE = ("jax._src", "jaxlib")
#: jaxlib's version, which is public: ``jaxlib.__version__`` (``usercache`` reads it without importing jaxlib whole).
PUBLIC = ("jaxlib.version", "jaxlib.__version__")


def _resolve(name: str) -> Any:
    """The object a dotted name names: the longest importable module, then attributes (a class's ``__init__`` through
    its dataclass fields where it has no attribute of that name)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            continue
    else:
        raise AttributeError(name)
    for part in parts[i:]:
        obj = getattr(obj, part)
    return obj


#: A parameter of a native (nanobind) function's signature text: its name, then its annotation or default.
_NATIVE_PARAMETER = re.compile(r"^\s*(\*{0,2}[A-Za-z_]\w*)")


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    out, depth, current = [], 0, []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(current))
            current = []
            continue
        current.append(c)
    if "".join(current).strip():
        out.append("".join(current))
    return out


def _native(text: str) -> list[tuple[str, bool]]:
    """``(name, has a default)`` of each parameter of a nanobind signature ``def f(a: int, b: str = \\0) -> T``."""
    inner = text[text.index("(") + 1:text.rindex(")")]
    found = []
    for part in _split_top(inner):
        part = part.strip()
        if part in ("/", "*"):
            continue
        m = _NATIVE_PARAMETER.match(part)
        assert m is not None, text
        found.append((m.group(1).lstrip("*"), "=" in part or part.startswith("*")))
    return found


def parameters(fn: Any) -> list[list[tuple[str, bool]]]:
    """Each signature of ``fn`` (several for an overloaded native function) as ``(name, has a default)`` per
    parameter; ``*args`` and ``**kwargs`` count as having one."""
    native = getattr(fn, "__nb_signature__", None)
    if native:
        return [_native(s[0]) for s in native]
    signature = inspect.signature(fn)
    return [[(p.name, p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
             for p in signature.parameters.values()]]


def mismatch(name: str, expected: tuple[str, ...], found: list[tuple[str, bool]]) -> str | None:
    """Why the signature ``found`` no longer takes what jaxport passes (``expected``, as :data:`surface.CALLED` says),
    or None."""
    positional = list(expected[:expected.index("*")]) if "*" in expected else list(expected)
    keywords = list(expected[expected.index("*") + 1:]) if "*" in expected else []
    names = [n for n, _ in found]
    if names[:len(positional)] != positional:
        return "positional"
    wanted = {k.rstrip("?") for k in keywords}
    if any(k not in names for k in keywords if not k.endswith("?")):
        return "keywords"
    if name not in surface.REPLACED and any(not default for n, default in found[len(positional):] if n not in wanted):
        return "a further parameter without a default"
    return None


def _shown(names: Any) -> str:
    return f"({', '.join(names)})"


@pytest.mark.parametrize("name", sorted(surface.CALLED))
def test_each_private_function_has_the_parameters_jaxport_passes(name):
    expected = surface.CALLED[name]
    try:
        obj = _resolve(name)
    except (AttributeError, ImportError):
        if name in surface.OPTIONAL:
            pytest.skip(f"{name}: absent here ({surface.OPTIONAL[name]})")
        pytest.fail(f"{name}: no longer in this JAX; jaxport.jaxprivate relies on it (see jaxprivate/surface.py)")
    if expected is None:
        return
    signatures = parameters(obj)
    if all(mismatch(name, expected, found) is not None for found in signatures):
        found = signatures[0]
        pytest.fail(f"{name}: parameters changed from {_shown(expected)} to {_shown(n for n, _ in found)} "
                    f"({mismatch(name, expected, found)}); read the JAX change, then update jaxport.jaxprivate and "
                    f"its table (jaxprivate/surface.py)")


def test_the_private_attributes_of_a_compiled_program():
    import jax

    compiled = jax.jit(lambda x: x + 1).lower(1.0).compile()
    compiled(1.0)  # JAX keeps its C++ call after the first
    objects = {"jax.stages.Compiled": compiled}
    for cls, attributes in surface.HELD.items():
        assert isinstance(objects[cls], _resolve(cls))
        for path in attributes:
            obj = objects[cls]
            for part in path.split("."):
                assert hasattr(obj, part), f"{cls}.{path}: no longer on a compiled program; jaxport.jaxprivate reads it"
                obj = getattr(obj, part)


def test_the_signature_check_names_what_changed():
    def now(backend, computation, compile_options, devices, host_callbacks, executable_devices):  # two swapped
        pass

    found = parameters(now)[0]
    assert mismatch("f", ("backend", "computation", "devices"), found) == "positional"
    assert mismatch("f", ("backend", "*", "absent"), found) == "keywords"
    assert mismatch("f", ("backend", "computation"), found) == "a further parameter without a default"
    assert mismatch("f", ("backend", "computation", "compile_options", "devices", "host_callbacks",
                          "executable_devices"), found) is None
    assert _native("def f(arg: collections.abc.Sequence[int, str], /, load: bool = \\0) -> None") == [
        ("arg", False), ("load", True)]


def private_names(path: Path) -> dict[str, int]:
    """The private names of JAX a module uses, each as its full dotted name
    (``jax._src.compiler.compile_or_get_cached``) with the line it is first used on: every attribute chain read from a
    name imported from ``jax._src`` or jaxlib, in the function (or module) that imports it."""
    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, int] = {}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        body = scope.body if isinstance(scope, ast.Module) else [scope]
        aliases: dict[str, str] = {}
        for node in (n for b in body for n in ast.walk(b)) if not isinstance(scope, ast.Module) else scope.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PRIVATE):
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(PRIVATE):
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        nodes = [n for b in body for n in ast.walk(b)]
        inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # a chain is read whole, once
        for node in (n for n in nodes if id(n) not in inner):
            parts = []
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in aliases:
                full = ".".join([aliases[node.id], *reversed(parts)])
                if not full.startswith(PUBLIC):
                    found.setdefault(full, node.lineno)
    return found


def covered(name: str) -> bool:
    """Whether :data:`surface.CALLED` covers a private name jaxport uses: it is an entry, or leads to one (a module or
    class an entry is in), or is read from a value an entry names (``deserialization_registry.get``)."""
    return any(name == e or e.startswith(name + ".") or (v is None and name.startswith(e + "."))
               for e, v in surface.CALLED.items())


def test_every_private_name_the_package_uses_is_in_the_table():
    unlisted = [f"{path.relative_to(REPO)}:{line} {name}" for path in sorted(PACKAGE.glob("*.py"))
                for name, line in private_names(path).items() if not covered(name)]
    assert unlisted == [], "add each to jaxprivate/surface.py with the parameters jaxport passes"


def test_no_module_outside_the_package_imports_jax_private_modules():
    outside = []
    for root in (REPO / "jaxport", REPO / "cli"):
        for path in sorted(root.rglob("*.py")):
            if PACKAGE in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for m in modules:
                    if m.startswith(PRIVATE) and not m.startswith(PUBLIC) and m != "jaxlib":
                        outside.append(f"{path.relative_to(REPO)}:{node.lineno} imports {m}")
    assert outside == [], "JAX's private modules are read in jaxport/jaxprivate alone"


def test_the_scan_reads_imports_and_attribute_chains(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from jax._src import compiler\n    from jax._src.lib import xla_client as xc\n"
                      "    compiler.compile_or_get_cached = compiler.backend_compile_and_load\n"
                      "    return xc.CompileOptions.ParseFromString, compiler\n"
                      "def g():\n    from jaxlib.version import __version__\n    return __version__\n")
    assert private_names(module) == {"jax._src.compiler.compile_or_get_cached": 4,
                                     "jax._src.compiler.backend_compile_and_load": 4,
                                     "jax._src.lib.xla_client.CompileOptions.ParseFromString": 5,
                                     "jax._src.compiler": 5}
    assert covered("jax._src.compiler") and covered("jax._src.export._export.deserialization_registry.get")
    assert not covered("jax._src.compiler.something_new")
