"""The size limits of the code (issue 49), each a test that fails naming what is over it. Read with ``ast``; nothing
is imported.

- No function of the library (``jaxport/``) or the command line (``cli/``) is over 100 lines, counted from its
  ``def`` line to its last line (docstring included, decorators not).
- No library function takes over 9 parameters: positional and keyword-only ones, and ``**kwargs`` as one; a method's
  first (``self``, ``cls``) and ``*args`` are not counted. A ``**kwargs`` never stands for a record's fields
  (``scripts/check_layers.py``, rule 7: only a call in another function's own form, with ``*args``, or a bag of
  names the function cannot know). The facade (that rule's ``FACADE``: ``jaxport.load``, ``jaxport.export``,
  ``CallRequest``, the batch engines' adapters, ...) lists the fields of the records it builds as parameters of their
  own, for its users to see: each such function counts its parameters less those fields, which the layer checker
  holds to the records (every field listed) and ``tests/test_facade.py`` to their defaults.
- No import cycle between library modules, counting the imports inside function bodies (``scripts/check_layers.py``,
  rule 2); a module imported by name at run time (``importlib.import_module``), which no import graph sees, only
  where :data:`IMPORTED_BY_NAME` says.
- ``cli/commands/serve.py`` is under 80 lines.
- At most 22 flat modules in ``jaxport/``: its ``*.py`` files but ``__init__.py`` (the facade is the package).
- Fewer than 10 imports of jaxport modules inside functions in the library: each ``import`` or ``from ... import``
  of one that is not at module top level (nor under ``if TYPE_CHECKING:``), wherever it is: the facade's lazy
  imports and a sub-package's PEP 562 ``__getattr__`` count, as every other.

A module over its cap is split by concept, never squeezed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import REPO, layer_checker

MAX_FUNCTION_LINES = 100
MAX_PARAMETERS = 9
SERVE_COMMAND_LINES = 80  # cli/commands/serve.py has fewer
MAX_FLAT_MODULES = 22
LOCAL_IMPORTS = 10  # imports of jaxport modules inside functions: fewer
#: The library modules that import a module by name at run time, and why that is no hidden dependency.
IMPORTED_BY_NAME = {
    "jaxport/__init__.py": "the facade, which may import anything: its public names on first use",
    "jaxport/spec/__init__.py": "the package's own modules, for its PEP 562 __getattr__",
    "jaxport/isolation/sandbox.py": "a child process's target, in the child's own interpreter",
    "jaxport/export/entry/entrypoint.py": "the user's module an entry point names",
}

LIBRARY = REPO / "jaxport"
CLI = REPO / "cli"


def _functions(root: Path) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function under ``root`` as ``(path:line qualified.name, node, is a method)``."""

    def walk(node: ast.AST, path: str, prefix: str, in_class: bool) -> Iterator[tuple[str, Any, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path}:{child.lineno} {prefix}{child.name}", child, in_class
                yield from walk(child, path, f"{prefix}{child.name}.", False)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, path, f"{prefix}{child.name}.", True)
            else:
                yield from walk(child, path, prefix, in_class)

    for path in sorted(root.rglob("*.py")):
        yield from walk(ast.parse(path.read_text(), str(path)), str(path.relative_to(root.parent)), "", False)


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool, fields: frozenset[str] = frozenset()) -> int:
    """How many parameters ``node`` takes by the rule above; ``fields``: the fields of the records it builds, for a
    function of the facade."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    listed = sum(1 for a in (*positional, *args.kwonlyargs) if a.arg in fields)
    return (len(positional) + len(args.kwonlyargs) + (args.kwarg is not None) - listed
            - (1 if method and positional and not static else 0))


def facade_fields(path: Path, qualname: str) -> frozenset[str]:
    """The fields of the records a function of the facade builds (``FACADE``), empty for any other function."""
    checker = layer_checker()
    parts = path.relative_to(REPO).with_suffix("").parts
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    records = checker.FACADE.get(module, {}).get(qualname, ())
    return frozenset(f for r in records for f in checker.record_fields(LIBRARY, r))


def test_no_function_is_over_100_lines():
    long = {name: n for root in (LIBRARY, CLI) for name, node, _ in _functions(root)
            if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES}
    assert long == {}


def test_no_library_function_takes_over_9_parameters():
    many = {name: n for name, node, method in _functions(LIBRARY)
            if (n := parameters(node, method, facade_fields(REPO / name.split(":")[0], name.split(" ")[1])))
            > MAX_PARAMETERS}
    assert many == {}


def test_the_parameter_rule(tmp_path):
    (tmp_path / "m.py").write_text("def f(a, /, b, *args, c, **kw): pass\nclass C:\n    def m(self, a): pass\n"
                                   "    @staticmethod\n    def s(a, b): pass\n    @classmethod\n    def k(cls): pass\n"
                                   "def facade(path, *, runtime='jax', cache=True, verify=True): pass\n")
    found = {name.split(" ")[1]: parameters(node, method) for name, node, method in _functions(tmp_path)}
    assert found == {"f": 4, "C.m": 1, "C.s": 2, "C.k": 0, "facade": 4}
    facade = next(node for name, node, _ in _functions(tmp_path) if name.endswith(" facade"))
    assert parameters(facade, False, frozenset({"runtime", "cache", "function"})) == 2  # the record's fields listed


def test_the_facade_counts_its_own_parameters():
    """``jaxport.load`` lists the 11 fields of ``LoadOptions``: it counts ``path``, ``verify`` and ``defer_verify``."""
    load = next(node for name, node, _ in _functions(LIBRARY) if name.startswith("jaxport/run/load.py:")
                and name.endswith(" load"))
    fields = facade_fields(LIBRARY / "run" / "load.py", "load")
    assert len(fields) == 11 and "check_ranges" in fields
    assert (parameters(load, False), parameters(load, False, fields)) == (14, 3)


def test_no_import_cycle_even_through_imports_inside_functions():
    assert layer_checker().cycles(LIBRARY) == []


def test_modules_are_imported_by_name_only_where_listed():
    found = set()
    for path in LIBRARY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
                found.add(str(path.relative_to(REPO)))
    assert sorted(found - set(IMPORTED_BY_NAME)) == []


def test_the_serve_command_is_under_80_lines():
    lines = len((CLI / "commands" / "serve.py").read_text().splitlines())
    assert lines < SERVE_COMMAND_LINES, f"cli/commands/serve.py has {lines} lines"


def test_at_most_22_flat_modules():
    flat = sorted(p.name for p in LIBRARY.glob("*.py") if p.name != "__init__.py")
    assert len(flat) <= MAX_FLAT_MODULES, f"{len(flat)} flat modules in jaxport/: {', '.join(flat)}"


def test_fewer_than_10_imports_of_jaxport_modules_inside_functions():
    modules = layer_checker().load_package(LIBRARY)
    local = [f"{m.path.relative_to(REPO)}:{i.line} imports {i.target}" for m in modules.values() for i in m.imports
             if not i.top and not i.type_only]
    assert len(local) < LOCAL_IMPORTS, "\n".join(local)
