"""The import-layer contract of the ``jaxport`` package, checked by parsing every module with ``ast``.

``make lint`` runs it (and ``tests/test_layers.py`` runs it in the test suite). The rules:

1. Layers. Each module belongs to one layer; it imports only from its own layer and the layers this table allows:

   ========== =========================================================
   foundation the flat top-level modules (errors, dtypes, dimexpr, sharding, ...), ``jaxport.program``, the
              lowered program's readers and checks, ``jaxport.jaxprivate``, JAX's private surface (its
              ``exported`` builds on ``program.jaxser``), and ``jaxport.arrayfiles``, arrays in files (``.npy``,
              ``.safetensors``, sub-byte packing): foundation only
   spec       ``jaxport.spec``, the spec language: foundation
   isolation  ``jaxport.isolation``, child processes with limits and the program checks run in them: foundation
   artifact   ``jaxport.artifact``: the base layers (spec, isolation, foundation)
   export     ``jaxport.export``: artifact, the base layers
   importer   ``jaxport.importer``: export, artifact, the base layers
   run        ``jaxport.run``: artifact, the base layers
   verify     ``jaxport.verify``: run, importer, export, artifact, the base layers
   serve      ``jaxport.serve`` and the engine adapters ``jaxport.ray``, ``.beam``, ``.spark``: run, artifact, the
              base layers
   facade     ``jaxport/__init__.py``: anything
   ========== =========================================================

   and nothing in ``jaxport`` imports the command line (``jaxport_cli``).
2. No import cycle between modules, counting every import that runs (function bodies included; ``if
   TYPE_CHECKING:`` blocks excluded).
3. Imports of jaxport modules sit at module top level: a lazy import inside a function hides a dependency (and so
   a cycle). Only the facade imports lazily, to keep ``import jaxport`` light, and a subpackage's ``__init__``
   its own submodules (PEP 562 ``__getattr__``: ``jaxport.run.call`` without importing it with every ``run`` module),
   and ``jaxport serve`` its kserve server (``OPTIONAL_MODULES``), once its arguments are checked, and the export
   pipeline its optional stages where they are used (``OPTIONAL_STAGES``: the rules of an older JAX), so that an
   export that needs none imports none (issue 48).
4. No module imports another module's ``_private`` name, or reads one through a module it imported
   (``inputs._read_header``). Private modules (``_fsio``, ``_yaml``, ...) may be imported; their names are public
   to the package.
5. The format layer stays light: ``artifact`` and the base layers import jax, jaxlib, numpy, ml_dtypes, safetensors,
   iree and the signature libraries (model_signing, sigstore, cryptography, OpenSSL: the extra ``jaxport[sign]``)
   only inside functions, so that reading a manifest imports none of them.
6. Rooms. ``artifact``, ``export``, ``run`` and ``serve`` are each a core (their flat modules) and rooms (their
   sub-packages, one concept each); every sub-package is a room of this table, and a module imports only from its own
   room and the rooms of its layer the table allows (imports for type checkers alone do not count, and a layer's
   ``__init__`` may reach any of its rooms). The batch engines' adapters (``jaxport.ray``, ``.beam``, ``.spark``)
   count as the serve core, so that its rule (it imports no ``serve.transport``) holds them too:

   ================ =====================================================================================
   artifact         the format core (container, manifest, model, tensors, call tree, contract, ...): none of
                    its rooms
   artifact.window  which JAX reads an artifact (release table, window, producer age, payload): the core
   artifact.signing who made it (signature bundle, its check, signing): the core
   artifact.diff    what changed between two artifacts: window, the core
   artifact.extract an artifact taken apart (weights, programs): window, the core
   artifact.policy  whether it may ship: signing, window, the core
   run.values       the values a function takes and gives (input files, random inputs, keys, outputs): nothing
                    else of ``run``
   run.buckets      the one home of sizes (plans, the padding proof, programs specialized to a bucket): values
   run              the run core (load, ``Loaded``, the backends, the compilation cache): buckets, values
   run.compile      compiling ahead of time (XLA for a target, IREE modules and their runner): the run core,
                    buckets, values
   run.calls        ``jaxport call`` (request, report, streaming, references): compile, the run core, buckets,
                    values
   export.entry     the function to export (entry point, Python object, the paths an export records): nothing
                    else of ``export``
   export.weights   binding weights (a source loaded, its leaves named, the parameter ``--bind`` binds): entry
   export.lowering  what runs JAX's tracer (lowering, its tracing environment, ``like``, returns, VJPs, hints,
                    a program exported again): weights, entry
   export.writing   the artifact written (manifest writer, the writing step, ``--for-jax``): lowering, weights,
                    entry
   export           the export core (its request, the pipeline, rebind): every room of ``export``
   serve            the engine-free core (batching, compiled buckets, batcher, the batch engines' ``Engine`` and
                    rows, loading, limits) and the batch engines' adapters: none of its rooms, that is, the
                    core imports no transport, so that batching stays one core under every way in
   serve.transport  ``jaxport serve``'s server (its models, addresses and unix sockets, the Open Inference
                    Protocol, kserve: registry, REST, gRPC, metrics, lifecycle): the serve core
   ================ =====================================================================================

7. Transport: records inside, keywords at the facade. Inside the library a request, or a group of options, travels as
   its record (``LoadOptions``, ``ExportRequest``, ``VerifyRequest``, ...). Only the facade (:data:`FACADE`: the
   public functions and constructors a user calls with keywords, ``jaxport.load``, ``jaxport.export``,
   ``CallRequest``, the batch engines' adapters, ...) takes a record's fields, each as a parameter of its own (with
   the field's default), and builds the record once (``_api_types.record_of``). So a facade function lists every
   field of the records it builds; no library module imports one (it calls the function beside it that takes the
   record: ``load_by``, ``verify_by``, ``import_by``, the pipeline's ``export``; a package's ``__init__`` may
   re-export its own), nor gives a facade constructor another record's fields by keyword (``CallRequest(path,
   load=options)``, never ``runtime=``); and no library function takes ``**kwargs`` but a call in another function's
   own form (with ``*args``: a wrapper, a program called as the function it was exported from), which never unpacks
   them into a record (a class, or ``replace``), and the keyword bags of :data:`KEYWORD_BAGS`, whose names it cannot
   know (a pytree's, JAX's flags, a spec's top-level keys). ``tests/test_limits.py`` counts a facade function's
   parameters less the fields it lists.

The command line (``jaxport_cli``, the directory ``cli/``) sits above the library and may import any of it, lazily
(``jaxport --help`` must not import JAX), but only by public names:

8. No import cycle between command-line modules (function bodies included).
9. No command-line module imports a private library module (``jaxport._text``) or a ``_private`` name, of the
   library or of another command-line module, nor reads one through a module it imported.

Usage: ``python scripts/check_layers.py [PACKAGE_DIR [CLI_DIR]]``; prints one line per violation, exits 1 if any.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "jaxport"
CLI_PACKAGE = "jaxport_cli"  # the package name of the directory cli/
#: The base layers, below the artifact's life cycle (each on the foundation alone): every package of it may import them.
BASE = {"spec", "isolation", "foundation"}
ALLOWED = {
    "foundation": {"foundation"},
    "spec": {"spec", "foundation"},
    "isolation": {"isolation", "foundation"},
    "artifact": {"artifact", *BASE},
    "export": {"export", "artifact", *BASE},
    "importer": {"importer", "export", "artifact", *BASE},
    "run": {"run", "artifact", *BASE},
    "verify": {"verify", "run", "importer", "export", "artifact", *BASE},
    "serve": {"serve", "run", "artifact", *BASE},
}
SUBPACKAGES = ("spec", "isolation", "artifact", "export", "importer", "run", "verify", "serve")
#: Subpackages that belong to the foundation layer.
FOUNDATION_PACKAGES = ("program", "jaxprivate", "arrayfiles")
#: Flat modules that belong to the ``serve`` layer: the batch engines' adapters (``jaxport.ray.Predictor``).
ENGINE_MODULES = ("ray", "beam", "spark")
#: Modules of an optional extra, imported inside the function that needs them as heavy third-party modules are:
#: ``serve.transport.kserve_server`` needs ``jaxport[serve]`` and seconds to import (kserve). Their imports count for
#: cycles.
OPTIONAL_MODULES = ("jaxport.serve.transport.kserve_server",)
#: Importer -> the modules it imports where an optional stage of the export needs them (rule 3).
OPTIONAL_STAGES: dict[str, set[str]] = {"jaxport.export.request": {"jaxport.export.writing.target"}}
#: The rooms of the layers that have them (rule 6): room -> the other rooms of its layer it may import. The name of a
#: layer alone is its core, the flat modules; every sub-package of a layer in ``ROOMED`` must be a room here.
ROOMS: dict[str, set[str]] = {
    "artifact": set(),
    "artifact.window": {"artifact"},
    "artifact.signing": {"artifact"},
    "artifact.diff": {"artifact", "artifact.window"},
    "artifact.extract": {"artifact", "artifact.window"},
    "artifact.policy": {"artifact", "artifact.window", "artifact.signing"},
    "run.values": set(),
    "run.buckets": {"run.values"},
    "run": {"run.values", "run.buckets"},
    "run.compile": {"run", "run.values", "run.buckets"},
    "run.calls": {"run", "run.values", "run.buckets", "run.compile"},
    "export.entry": set(),
    "export.weights": {"export.entry"},
    "export.lowering": {"export.entry", "export.weights"},
    "export.writing": {"export.entry", "export.weights", "export.lowering"},
    "export": {"export.entry", "export.weights", "export.lowering", "export.writing"},
    "serve": set(),
    "serve.transport": {"serve"},
}
ROOMED = ("artifact", "export", "run", "serve")
#: What a room's rule says where the table alone would not say why (rule 6): room -> the end of a violation's line.
ROOM_RULES = {
    "serve": "imports no transport: the core stays engine-free, for the batch engines' adapters and the server alike; "
             "what needs kserve, a socket or the Open Inference Protocol belongs in serve.transport",
}
#: The facade (rule 7): module -> its functions (qualified: ``Engine.__init__``) that take a record's fields as
#: keywords, each with the records (``module.Class``) whose every field it lists as a parameter of its own.
LOAD_OPTIONS = "jaxport.run.options.LoadOptions"
VERIFY_REQUEST = "jaxport.verify.request.VerifyRequest"
FACADE: dict[str, dict[str, tuple[str, ...]]] = {
    "jaxport": {"_export": ("jaxport.export.request.ExportRequest",)},  # ``jaxport.export``, its arguments checked
    "jaxport.run.load": {"load": (LOAD_OPTIONS,)},
    "jaxport.run.calls.calling": {"CallRequest.__init__": ("jaxport.run.calls.calling.CallRequest", LOAD_OPTIONS)},
    "jaxport.verify.request": {"VerifyRequest.__init__": (VERIFY_REQUEST, LOAD_OPTIONS)},
    "jaxport.verify.api": {"verify": (VERIFY_REQUEST, LOAD_OPTIONS), "localize": (VERIFY_REQUEST, LOAD_OPTIONS)},
    "jaxport.importer.build": {"import_stablehlo": ("jaxport.importer.request.ImportRequest",)},
    "jaxport.export.writing.write": {"ExportResult.load": (LOAD_OPTIONS,)},  # ``jaxport.load``'s keywords, passed to it
    "jaxport.serve.transport.models": {"open_models": ("jaxport.serve.transport.models.Serving",)},
    "jaxport.serve.engine": {"Engine.__init__": (LOAD_OPTIONS,)},
    "jaxport.ray": {"Predictor.__init__": (LOAD_OPTIONS,)},
    "jaxport.beam": {"ModelHandler.__init__": (LOAD_OPTIONS,)},
    "jaxport.spark": {"predict_udf": (LOAD_OPTIONS,)},
}
#: The fields a facade function leaves out of its records', and why: ``module.function`` -> {field: why}.
FACADE_OMITS: dict[str, dict[str, str]] = {"jaxport.verify.api.localize": {"localize": "always on"}}
#: The functions whose ``**kwargs`` are names they cannot know (rule 7): ``module.function`` -> what the names are.
KEYWORD_BAGS: dict[str, str] = {
    "jaxport.artifact.model.replace": "a record's changed fields, as dataclasses.replace takes them",
    "jaxport.artifact.model._given": "a JSON object's optional entries, by key",
    "jaxport.export.lowering.tracing.jax_config": "JAX's configuration options, by name",
    "jaxport.run.values.treefiles.save_inputs": "the pytrees to save, each by the name it is saved under",
    "jaxport.spec.build.Spec.__init__": "a spec's other top-level keys (functions, mesh, vjp_order, ...)",
    "jaxport.run.cache._listen.on_event": "the details of a JAX monitoring event (the listener's signature)",
}
HEAVY = ("jax", "jaxlib", "numpy", "ml_dtypes", "safetensors", "iree", "model_signing", "sigstore", "cryptography",
         "OpenSSL")
LIGHT_LAYERS = ("artifact", "spec", "isolation", "foundation")


@dataclass
class Import:
    target: str  # an absolute module name inside the package
    line: int
    top: bool  # at module top level (not in a function or class body)
    type_only: bool  # inside ``if TYPE_CHECKING:``
    names: list[str] = field(default_factory=list)  # imported names (``from X import a, b``)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: list[Import] = field(default_factory=list)
    heavy_top: list[tuple[str, int]] = field(default_factory=list)  # (module, line) of heavy top-level imports
    private_reads: list[tuple[str, str, int]] = field(default_factory=list)  # (module, attribute, line)
    module_reads: list[tuple[str, str, int]] = field(default_factory=list)  # every attribute read through a module
    cli_imports: list[int] = field(default_factory=list)


def layer(module: str) -> str:
    parts = module.split(".")
    if module == PACKAGE:
        return "facade"
    if len(parts) == 2 and parts[1] in ENGINE_MODULES:
        return "serve"
    if len(parts) >= 2 and parts[1] in FOUNDATION_PACKAGES:
        return "foundation"
    if len(parts) >= 2 and parts[1] in SUBPACKAGES:
        return parts[1]
    return "foundation"


def room(module: str) -> str | None:
    """The room of a module of a layer that has rooms (``artifact.diff`` for ``jaxport.artifact.diff.shapes``,
    ``artifact`` for the core's ``jaxport.artifact.container``), or None outside them."""
    parts = module.split(".")
    if len(parts) == 2 and parts[1] in ENGINE_MODULES:
        return "serve"  # a batch engine's adapter stands on the serve core alone
    if len(parts) < 2 or parts[1] not in ROOMED:
        return None
    sub = ".".join(parts[1:3])
    return sub if sub in ROOMS else parts[1]


def rooms_text() -> str:
    """The rooms by layer, as the checker reports them: ``artifact: diff, extract, ...; run: ...``."""
    return "; ".join(f"{layer_}: " + ", ".join(sorted(r.split(".", 1)[1] for r in ROOMS if r.startswith(layer_ + ".")))
                     for layer_ in ROOMED)


def _room_text(name: str) -> str:
    return f"the {name} core" if "." not in name else name


def _room_rule(name: str) -> str:
    """What rule 6 lets room ``name`` import, as a violation's line ends."""
    if name in ROOM_RULES:
        return ROOM_RULES[name]
    allowed = ", ".join(_room_text(r) for r in sorted(ROOMS[name]))
    if allowed:
        return f"may import only from {allowed}"
    layer_ = name.split(".")[0]
    return "imports none of its rooms" if name == layer_ else f"imports nothing else of {layer_}"


def _resolve(mod: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


class _Visitor(ast.NodeVisitor):
    def __init__(self, mod: Module, known: set[str], tracked: tuple[str, ...] = (PACKAGE,)) -> None:
        self.mod, self.known, self.tracked = mod, known, tracked  # tracked: the packages whose imports count
        self.depth = 0  # function/class nesting
        self.type_only = 0
        self.module_aliases: dict[str, str] = {}  # local name -> jaxport module it is bound to

    def _scoped(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scoped

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_only += 1
            for child in node.body:
                self.visit(child)
            self.type_only -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def _add(self, target: str, line: int, names: list[str]) -> None:
        self.mod.imports.append(Import(target, line, self.depth == 0, self.type_only > 0, names))

    def _heavy(self, name: str, line: int) -> None:
        if self.depth == 0 and not self.type_only and name.split(".")[0] in HEAVY:
            self.mod.heavy_top.append((name, line))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._heavy(alias.name, node.lineno)
            if alias.name.split(".")[0] == f"{PACKAGE}_cli":
                self.mod.cli_imports.append(node.lineno)
            if alias.name.split(".")[0] in self.tracked:
                self._add(alias.name, node.lineno, [])
                if alias.asname:
                    self.module_aliases[alias.asname] = alias.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = _resolve(self.mod, node)
        self._heavy(target, node.lineno)
        if target.split(".")[0] == f"{PACKAGE}_cli":
            self.mod.cli_imports.append(node.lineno)
        if target.split(".")[0] not in self.tracked:
            return
        names = []
        for alias in node.names:
            full = f"{target}.{alias.name}"
            if full in self.known:  # ``from . import module``: an import of that module
                self._add(full, node.lineno, [])
                self.module_aliases[alias.asname or alias.name] = full
            else:
                names.append(alias.name)
        if names or not node.names:
            self._add(target, node.lineno, names)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.module_aliases:
            attr = node.attr
            self.mod.module_reads.append((self.module_aliases[node.value.id], attr, node.lineno))
            if _private(attr):
                self.mod.private_reads.append((self.module_aliases[node.value.id], attr, node.lineno))
        self.generic_visit(node)


def load_package(root: Path, name: str | None = None, *, also: frozenset[str] = frozenset(),
                 tracked: tuple[str, ...] = (PACKAGE,)) -> dict[str, Module]:
    """Every module of the package at ``root`` (the directory holding ``__init__.py``), by absolute name; ``name``
    is the package's import name when it is not the directory's (``jaxport_cli`` for ``cli/``). ``also``: the
    module names of another package whose imports ``tracked`` counts."""
    modules: dict[str, Module] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [name or root.name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    known = set(modules) | set(also)
    for mod in modules.values():
        _Visitor(mod, known, tracked).visit(ast.parse(mod.path.read_text(), str(mod.path)))
    return modules


def _owner(target: str, modules: dict[str, Module]) -> str | None:
    """The module an import target names (``jaxport.run.loaded``), or None when it is outside the package."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _imports(mod: Module, modules: dict[str, Module]) -> Iterator[tuple[Import, str]]:
    """Each import of ``mod`` with the module of the package it names; not those of modules outside the package, of
    ``mod`` itself, or of the package ``mod`` is in (``from . import x``, ``x`` a name of its ``__init__``)."""
    for imp in mod.imports:
        target = _owner(imp.target, modules)
        if target is None or target == mod.name:
            continue
        if mod.name.startswith(target + ".") and modules[target].is_package and not imp.names:
            continue  # ``from . import x`` resolved to the package itself
        yield imp, target


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Each module -> the modules of the package it imports when it runs (rule 2): imports inside function bodies
    count, those under ``if TYPE_CHECKING:`` do not."""
    return {name: {target for imp, target in _imports(mod, modules) if not imp.type_only}
            for name, mod in modules.items()}


def cycles(root: Path) -> list[list[str]]:
    """The import cycles of the package at ``root`` (rule 2), each as its modules, sorted."""
    return _cycles(import_graph(load_package(root)))


def violations(root: Path) -> list[str]:
    """Every breach of the contract in the package at ``root``, one readable line each."""
    modules = load_package(root)
    out: list[str] = []
    for mod in modules.values():
        where = mod.path.relative_to(root.parent)
        src_layer = layer(mod.name)
        src_room = room(mod.name)
        parts = mod.name.split(".")
        if mod.is_package and len(parts) == 2 and parts[1] not in (*SUBPACKAGES, *FOUNDATION_PACKAGES):
            out.append(f"{where}: {mod.name} is a sub-package in no layer; add it to SUBPACKAGES (a layer of its own) "
                       f"or FOUNDATION_PACKAGES in scripts/check_layers.py")
        if mod.is_package and len(parts) == 3 and parts[1] in ROOMED and ".".join(parts[1:]) not in ROOMS:
            out.append(f"{where}: {mod.name} is a sub-package of {parts[1]} that is no room; add it to ROOMS in "
                       f"scripts/check_layers.py with the rooms it may import")
        for line in mod.cli_imports:
            out.append(f"{where}:{line}: imports the command line ({PACKAGE}_cli); the library must not")
        if src_layer in LIGHT_LAYERS:
            for name, line in mod.heavy_top:
                out.append(f"{where}:{line}: imports {name} at module level; the {src_layer} layer imports it "
                           f"inside the function that needs it")
        for imp, target in _imports(mod, modules):
            dst_layer = layer(target)
            if src_layer != "facade" and dst_layer != "facade" and dst_layer not in ALLOWED[src_layer]:
                out.append(f"{where}:{imp.line}: {mod.name} ({src_layer}) imports {target} ({dst_layer}); "
                           f"{src_layer} may import only from {', '.join(sorted(ALLOWED[src_layer]))}")
            if dst_layer == "facade" and src_layer != "facade":
                out.append(f"{where}:{imp.line}: {mod.name} imports the facade ({PACKAGE}); import the module "
                           f"that defines the name")
            own_submodule = mod.is_package and target.startswith(mod.name + ".")
            dst_room = room(target)
            if (src_room is not None and dst_room is not None and dst_room != src_room and src_layer == dst_layer
                    and dst_room not in ROOMS[src_room] and not imp.type_only and not own_submodule):
                out.append(f"{where}:{imp.line}: {mod.name} ({_room_text(src_room)}) imports {target} "
                           f"({_room_text(dst_room)}); {_room_text(src_room)} {_room_rule(src_room)}")
            optional = target in OPTIONAL_MODULES or target in OPTIONAL_STAGES.get(mod.name, set())
            if not imp.top and src_layer != "facade" and not own_submodule and not optional:
                out.append(f"{where}:{imp.line}: {mod.name} imports {target} inside a function; move the import "
                           f"to the top of the module (only jax, numpy, yaml, iree and safetensors stay lazy)")
            for name in imp.names:
                if name.startswith("_") and not name.startswith("__"):
                    out.append(f"{where}:{imp.line}: {mod.name} imports the private name {name} from {target}")
        for target, attr, line in mod.private_reads:
            out.append(f"{where}:{line}: {mod.name} reads the private name {attr} of {target}")
    out += transport_violations(root, modules)
    for component in _cycles(import_graph(modules)):
        out.append(f"import cycle: {' -> '.join(component)} (each imports another in the group)")
    return out


def cli_violations(root: Path, library: Path) -> list[str]:
    """Every breach of the command line's rules (8 and 9) in the ``jaxport_cli`` package at ``root`` (``cli/``),
    over the library at ``library``, one readable line each."""
    library_modules = load_package(library)
    modules = load_package(root, CLI_PACKAGE, also=frozenset(library_modules), tracked=(PACKAGE, CLI_PACKAGE))
    out: list[str] = []
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for mod in modules.values():
        where = mod.path.relative_to(root.parent)
        for imp in mod.imports:
            inside = imp.target.split(".")[0] == CLI_PACKAGE
            target = _owner(imp.target, modules if inside else library_modules)
            if target is None or target == mod.name:
                continue
            if mod.name.startswith(target + ".") and modules[target].is_package and not imp.names:
                continue  # ``from . import x`` resolved to the package itself
            if inside and not imp.type_only:
                graph[mod.name].add(target)
            private = [part for part in target.split(".") if _private(part)]
            if private:
                out.append(f"{where}:{imp.line}: {mod.name} imports the private module {target}; the command line "
                           f"imports the library by its public names")
            for name in imp.names:
                if _private(name):
                    out.append(f"{where}:{imp.line}: {mod.name} imports the private name {name} from {target}")
        for target, attr, line in mod.private_reads:
            out.append(f"{where}:{line}: {mod.name} reads the private name {attr} of {target}")
    for component in _cycles(graph):
        out.append(f"import cycle: {' -> '.join(component)} (each imports another in the group)")
    return out


def functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of a module with its qualified name (``Engine.__init__``, ``_listen.on_event``)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def parameter_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names of a function's parameters but ``*args`` and ``**kwargs``."""
    return [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]


def record_fields(root: Path, record: str) -> list[str]:
    """The fields of the dataclass ``record`` (``jaxport.run.options.LoadOptions``) of the package at ``root``, read
    from its class body and those of its bases in the package (``ExportRequest`` over ``WriteOptions``), bases first;
    none of ``ClassVar`` or ``KW_ONLY``; none for a record the package does not hold."""
    module, _, name = record.rpartition(".")
    parts = module.split(".")[1:]
    path = root.joinpath(*parts).with_suffix(".py")
    if not path.exists():
        path = root.joinpath(*parts, "__init__.py")
    tree = ast.parse(path.read_text(), str(path)) if path.exists() else ast.Module([], [])
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:  # a package without the record (the layer tests' small ones)
        return []
    imported = {a.asname or a.name: _absolute(module, path.name == "__init__.py", n) + "." + a.name
                for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    fields: list[str] = []
    for base in cls.bases:
        if isinstance(base, ast.Name):
            home = f"{module}.{base.id}" if any(isinstance(n, ast.ClassDef) and n.name == base.id
                                                for n in tree.body) else imported.get(base.id, "")
            if home.startswith(PACKAGE + "."):
                fields += record_fields(root, home)
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = ast.unparse(node.annotation)
            if "ClassVar" not in annotation and "KW_ONLY" not in annotation and node.target.id not in fields:
                fields.append(node.target.id)
    return fields


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _into_a_record(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether the function unpacks ``name`` into a record: ``**name`` given to a class (a name that starts with a
    capital) or to ``replace``."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if (callee[:1].isupper() or callee == "replace") and any(
                k.arg is None and isinstance(k.value, ast.Name) and k.value.id == name for k in call.keywords):
            return True
    return False


def _held_fields(root: Path) -> dict[str, dict[str, str]]:
    """Each facade constructor's class (``CallRequest``) -> the fields of the other records it takes by keyword, each
    with its record's name (``{"runtime": "LoadOptions", ...}``)."""
    held: dict[str, dict[str, str]] = {}
    for module, functions_ in FACADE.items():
        for qualname, records in functions_.items():
            cls = qualname.removesuffix(".__init__")
            if qualname.endswith(".__init__") and "." not in cls:
                held[cls] = {f: r.rpartition(".")[2] for r in records if r != f"{module}.{cls}"
                             for f in record_fields(root, r)}
    return held


def _keywords_to_constructors(mod: Module, tree: ast.AST, where: Path, held: dict[str, dict[str, str]]) -> list[str]:
    """The calls in ``mod`` of a facade constructor (``CallRequest``) that give another record's fields by keyword."""
    out = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        given = [k.arg for k in call.keywords if k.arg in held.get(callee, {})]
        if given:
            record = held[callee][given[0]]
            out.append(f"{where}:{call.lineno}: {mod.name} gives {callee} the {record} field{'s' * (len(given) > 1)} "
                       f"{', '.join(given)} by keyword; inside the library pass the record whole")
    return out


def transport_violations(root: Path, modules: dict[str, Module]) -> list[str]:
    """Every breach of rule 7 in the package at ``root``: a facade function that does not list a field of its
    records, a library module that imports a facade function, a ``**kwargs`` that is no call's own form (or is
    unpacked into a record) nor a listed keyword bag."""
    out: list[str] = []
    facade_functions = {(m, q) for m, fs in FACADE.items() for q in fs if "." not in q}
    held = _held_fields(root)
    for mod in modules.values():
        where = mod.path.relative_to(root.parent)
        tree = ast.parse(mod.path.read_text(), str(mod.path))
        listed = FACADE.get(mod.name, {})
        for qualname, node in functions(tree):
            full = f"{mod.name}.{qualname}"
            if qualname in listed:
                names = set(parameter_names(node))
                omitted = FACADE_OMITS.get(full, {})
                for record in listed[qualname]:
                    missing = [f for f in record_fields(root, record) if f not in names and f not in omitted]
                    if missing:
                        out.append(f"{where}:{node.lineno}: {qualname} takes the fields of {record.rpartition('.')[2]} "
                                   f"but not {', '.join(missing)}; the facade lists every field of the records it "
                                   f"builds")
            kwargs = node.args.kwarg
            if kwargs is not None and full not in KEYWORD_BAGS and (
                    node.args.vararg is None or _into_a_record(node, kwargs.arg)):
                out.append(f"{where}:{node.lineno}: {qualname} takes **{kwargs.arg}; inside the library a request "
                           f"travels as its record: take the record (the facade lists a record's fields as "
                           f"parameters of their own), or list the keyword bag in KEYWORD_BAGS")
        if layer(mod.name) == "facade":
            continue
        out += _keywords_to_constructors(mod, tree, where, held)
        for imp, target in _imports(mod, modules):
            reexport = mod.is_package and target.startswith(mod.name + ".")
            for name in imp.names:
                if (target, name) in facade_functions and not reexport:
                    out.append(f"{where}:{imp.line}: {mod.name} imports the facade function {name} from {target}; "
                               f"inside the library call the function beside it that takes the record")
        for target, attr, line in mod.module_reads:
            if (target, attr) in facade_functions:
                out.append(f"{where}:{line}: {mod.name} calls the facade function {attr} of {target}; inside the "
                           f"library call the function beside it that takes the record")
    return out


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[1]
    root = Path(argv[1]) if len(argv) > 1 else repo / PACKAGE
    cli = Path(argv[2]) if len(argv) > 2 else repo / "cli"
    found = violations(root) + cli_violations(cli, root)
    for line in found:
        print(line)
    modules = [*load_package(root).values(), *load_package(cli, CLI_PACKAGE).values()]
    longest = max(modules, key=lambda m: len(m.path.read_text().splitlines()))
    print(f"{len(modules)} modules, {len(found)} violation{'s' if len(found) != 1 else ''}; rooms: {rooms_text()}; "
          f"longest module: {longest.path.relative_to(root.parent)} ({len(longest.path.read_text().splitlines())} "
          f"lines)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
