"""The import-layer contract (scripts/check_layers.py) holds, and the checker catches each kind of breach."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.support import REPO, layer_checker

check_layers = layer_checker()


def test_jaxport_keeps_its_import_layers():
    assert check_layers.violations(REPO / "jaxport") == []


def test_the_command_line_has_no_cycle_and_uses_public_names_only():
    assert check_layers.cli_violations(REPO / "cli", REPO / "jaxport") == []


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(REPO)): n for p in (REPO / "jaxport").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "jaxport"
    for name, text in {"__init__.py": "", "errors.py": "", "artifact/__init__.py": "", "run/__init__.py": "",
                       "export/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_clean_package_has_no_violations(tmp_path):
    root = _package(tmp_path, {"artifact/a.py": "from ..errors import X\n", "run/r.py": "from ..artifact import a\n"})
    assert check_layers.violations(root) == []


def test_a_lower_layer_importing_a_higher_one_is_reported(tmp_path):
    root = _package(tmp_path, {"artifact/a.py": "from ..run import r\n", "run/r.py": ""})
    assert check_layers.violations(root) == [
        "jaxport/artifact/a.py:1: jaxport.artifact.a (artifact) imports jaxport.run.r (run); artifact may import "
        "only from artifact, foundation, isolation, spec"]


def test_run_and_export_are_independent(tmp_path):
    root = _package(tmp_path, {"run/r.py": "from ..export import e\n", "export/e.py": ""})
    assert check_layers.violations(root) == [
        "jaxport/run/r.py:1: jaxport.run.r (run) imports jaxport.export.e (export); run may import only from "
        "artifact, foundation, isolation, run, spec"]


def test_the_spec_language_sits_between_the_foundation_and_the_artifact(tmp_path):
    root = _package(tmp_path, {
        "spec/__init__.py": "", "spec/model.py": "from ..errors import X\n",
        "spec/parse.py": "from ..artifact import a\n", "artifact/a.py": "from ..spec import model\n",
        "dimexpr.py": "from .spec import model\n"})
    assert check_layers.violations(root) == [
        "jaxport/dimexpr.py:1: jaxport.dimexpr (foundation) imports jaxport.spec.model (spec); foundation may import "
        "only from foundation",
        "jaxport/spec/parse.py:1: jaxport.spec.parse (spec) imports jaxport.artifact.a (artifact); spec may import "
        "only from foundation, spec"]


def test_isolation_sits_on_the_foundation_alone(tmp_path):
    root = _package(tmp_path, {
        "isolation/__init__.py": "", "isolation/isolate.py": "from ..spec import model\nfrom ..program import scan\n",
        "program/__init__.py": "", "program/scan.py": "", "spec/__init__.py": "", "spec/model.py": "",
        "artifact/payload.py": "from ..isolation import isolate\n", "dtypes.py": "from .isolation import isolate\n"})
    assert check_layers.violations(root) == [
        "jaxport/dtypes.py:1: jaxport.dtypes (foundation) imports jaxport.isolation.isolate (isolation); foundation "
        "may import only from foundation",
        "jaxport/isolation/isolate.py:1: jaxport.isolation.isolate (isolation) imports jaxport.spec.model (spec); "
        "isolation may import only from foundation, isolation"]


def test_the_lowered_program_and_jax_private_packages_are_foundation(tmp_path):
    root = _package(tmp_path, {
        "jaxprivate/__init__.py": "", "jaxprivate/exported.py": "from ..program import jaxser\n",
        "program/__init__.py": "",
        "program/jaxser.py": "from ..errors import X\n", "program/checks.py": "from ..spec import model\n",
        "spec/__init__.py": "", "spec/model.py": "", "artifact/a.py": "from ..program import checks\n"})
    assert check_layers.violations(root) == [
        "jaxport/program/checks.py:1: jaxport.program.checks (foundation) imports jaxport.spec.model (spec); "
        "foundation may import only from foundation"]


def test_a_cycle_hidden_in_a_function_body_is_reported(tmp_path):
    root = _package(tmp_path, {
        "artifact/a.py": "from . import b\n",
        "artifact/b.py": "def f():\n    from . import a\n",
    })
    assert check_layers.violations(root) == [
        "jaxport/artifact/b.py:2: jaxport.artifact.b imports jaxport.artifact.a inside a function; move the import to "
        "the top of the module (only jax, numpy, yaml, iree and safetensors stay lazy)",
        "import cycle: jaxport.artifact.a -> jaxport.artifact.b (each imports another in the group)"]


def test_type_checking_imports_do_not_count_as_cycles(tmp_path):
    root = _package(tmp_path, {
        "artifact/a.py": "from . import b\n",
        "artifact/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
    })
    assert check_layers.violations(root) == []


def test_private_names_across_modules_are_reported(tmp_path):
    root = _package(tmp_path, {
        "artifact/a.py": "def _hidden():\n    pass\n",
        "artifact/b.py": "from .a import _hidden\nfrom . import a\nx = a._hidden\n",
    })
    assert check_layers.violations(root) == [
        "jaxport/artifact/b.py:1: jaxport.artifact.b imports the private name _hidden from jaxport.artifact.a",
        "jaxport/artifact/b.py:3: jaxport.artifact.b reads the private name _hidden of jaxport.artifact.a"]


@pytest.mark.parametrize("heavy", ["jax", "numpy", "jax.numpy"])
def test_the_format_layer_imports_heavy_modules_lazily(tmp_path, heavy):
    root = _package(tmp_path, {"artifact/a.py": f"import {heavy}\n\ndef f():\n    import jax\n",
                               "run/r.py": f"import {heavy}\n"})
    assert check_layers.violations(root) == [
        f"jaxport/artifact/a.py:1: imports {heavy} at module level; the artifact layer imports it inside the "
        f"function that needs it"]


def test_the_library_never_imports_the_command_line(tmp_path):
    root = _package(tmp_path, {"errors.py": "import jaxport_cli.main\n"})
    assert check_layers.violations(root) == [
        "jaxport/errors.py:1: imports the command line (jaxport_cli); the library must not"]


def _cli(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "cli"
    for name, text in {"__init__.py": "", "commands/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_clean_command_line_has_no_violations(tmp_path):
    library = _package(tmp_path, {"artifact/a.py": "", "_text.py": "def visible(t):\n    return t\n"})
    root = _cli(tmp_path, {"main.py": "def main():\n    from . import group\n",
                           "group.py": "from .commands import COMMANDS\nfrom jaxport.artifact import a\n",
                           "commands/check.py": "def command():\n    import jaxport.artifact.a\n"})
    assert check_layers.cli_violations(root, library) == []


def test_a_command_line_cycle_hidden_in_a_function_body_is_reported(tmp_path):
    library = _package(tmp_path, {})
    root = _cli(tmp_path, {"main.py": "def main():\n    from .group import cli\n",
                           "group.py": "from .main import TABLE\n"})
    assert check_layers.cli_violations(root, library) == [
        "import cycle: jaxport_cli.group -> jaxport_cli.main (each imports another in the group)"]


def test_the_command_line_uses_no_private_library_name(tmp_path):
    library = _package(tmp_path, {"_text.py": "def visible(t):\n    return t\n",
                                  "artifact/a.py": "def _hidden():\n    pass\n"})
    root = _cli(tmp_path, {
        "errors.py": "from jaxport._text import visible\n",
        "render.py": "def f():\n    from jaxport.artifact.a import _hidden\n",
        "group.py": "from jaxport.artifact import a\nx = a._hidden\nfrom .main import _TABLE\n",
        "main.py": "_TABLE = {}\n",
    })
    assert check_layers.cli_violations(root, library) == [
        "cli/errors.py:1: jaxport_cli.errors imports the private module jaxport._text; the command line imports the "
        "library by its public names",
        "cli/group.py:3: jaxport_cli.group imports the private name _TABLE from jaxport_cli.main",
        "cli/group.py:2: jaxport_cli.group reads the private name _hidden of jaxport.artifact.a",
        "cli/render.py:2: jaxport_cli.render imports the private name _hidden from jaxport.artifact.a"]


#: Options that two commands spell alike for different things: the file each command writes, and inspect's flag
#: (print the StableHLO) beside extract's FUNCTION (write it).
SAME_NAME_OTHER_MEANING = {"--output", "--mlir"}


def test_an_option_of_several_commands_is_declared_once_in_cli_options():
    """A flag declared by more than one command module is one meaning spelled twice: it belongs in cli/options.py,
    which every command then uses (issue 23: --dim, tolerances, --bind/--root, ... were declared per command)."""
    import ast

    declared: dict[str, set[str]] = {}
    for path in sorted((REPO / "cli" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "option":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                        declared.setdefault(arg.value, set()).add(path.name)
    assert "--allow-custom-call" not in declared and "--dim" not in declared  # both from cli/options.py
    twice = {flag: sorted(files) for flag, files in declared.items() if len(files) > 1}
    assert set(twice) <= SAME_NAME_OTHER_MEANING, twice


def _rooms(tmp_path: Path, files: dict[str, str]) -> Path:
    rooms = {f"{r.replace('.', '/')}/__init__.py": "" for r in check_layers.ROOMS if "." in r}
    return _package(tmp_path, {**rooms, **files})


def test_the_rooms_are_named_and_each_sub_package_is_one():
    assert check_layers.rooms_text() == ("artifact: diff, extract, policy, signing, window; "
                                         "export: entry, lowering, weights, writing; "
                                         "run: buckets, calls, compile, values; serve: transport")
    rooms = {m: check_layers.room(m) for m in (
        "jaxport.artifact.container", "jaxport.artifact.diff", "jaxport.artifact.diff.shapes",
        "jaxport.run.values.inputs", "jaxport.export.writing.write", "jaxport.export.pipeline",
        "jaxport.serve.batching", "jaxport.serve.transport.rest", "jaxport.ray", "jaxport.verify.api")}
    assert rooms == {
        "jaxport.artifact.container": "artifact", "jaxport.artifact.diff": "artifact.diff",
        "jaxport.artifact.diff.shapes": "artifact.diff", "jaxport.run.values.inputs": "run.values",
        "jaxport.export.writing.write": "export.writing", "jaxport.export.pipeline": "export",
        "jaxport.serve.batching": "serve", "jaxport.serve.transport.rest": "serve.transport", "jaxport.ray": "serve",
        "jaxport.verify.api": None}


def test_the_format_core_imports_none_of_its_rooms(tmp_path):
    root = _rooms(tmp_path, {"artifact/model.py": "", "artifact/payload.py": "from .window import compat\n",
                             "artifact/window/compat.py": "from ..model import X\n"})
    assert check_layers.violations(root) == [
        "jaxport/artifact/payload.py:1: jaxport.artifact.payload (the artifact core) imports "
        "jaxport.artifact.window.compat (artifact.window); the artifact core imports none of its rooms"]


def test_a_room_imports_only_the_rooms_its_rule_allows(tmp_path):
    root = _rooms(tmp_path, {
        "artifact/container.py": "", "artifact/window/compat.py": "from ..container import X\n",
        "artifact/signing/check.py": "from ..container import X\nfrom ..policy import language\n",
        "artifact/policy/language.py": "from ..window import compat\n",
        "artifact/policy/checking.py": "from ..signing import check\nfrom . import language\n",
        "run/load.py": "from .values import inputs\nfrom .buckets import plan\n", "run/buckets/plan.py": "",
        "run/values/inputs.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..load import x\n"
                                "from ..calls import report\n",
        "run/calls/calling.py": "from ..loaded import y\nfrom ..compile import deploy\n", "run/loaded.py": "",
        "run/compile/deploy.py": "from ..load import z\n", "run/calls/report.py": "",
        "run/__init__.py": "def __getattr__(name):\n    from .calls import calling\n"})
    assert check_layers.violations(root) == [
        "jaxport/artifact/signing/check.py:2: jaxport.artifact.signing.check (artifact.signing) imports "
        "jaxport.artifact.policy.language (artifact.policy); artifact.signing may import only from the artifact core",
        "jaxport/run/values/inputs.py:4: jaxport.run.values.inputs (run.values) imports jaxport.run.calls.report "
        "(run.calls); run.values imports nothing else of run"]


def test_a_sub_package_in_no_layer_is_reported(tmp_path):
    root = _package(tmp_path, {"helpers/__init__.py": "", "helpers/zips.py": "", "program/__init__.py": "",
                               "arrayfiles/__init__.py": ""})
    assert check_layers.violations(root) == [
        "jaxport/helpers/__init__.py: jaxport.helpers is a sub-package in no layer; add it to SUBPACKAGES (a layer of "
        "its own) or FOUNDATION_PACKAGES in scripts/check_layers.py"]


def test_a_cycle_through_a_lazy_getattr_is_reported(tmp_path):
    # ``run``'s PEP 562 ``__getattr__`` imports ``r`` when a name is first read; ``r`` reads one of those names
    root = _package(tmp_path, {"run/__init__.py": "def __getattr__(name):\n    from . import r\n",
                               "run/r.py": "def f():\n    from . import call\n", "run/s.py": "from . import r\n"})
    assert check_layers.cycles(root) == [["jaxport.run", "jaxport.run.r"]]
    assert check_layers.import_graph(check_layers.load_package(root))["jaxport.run.s"] == {"jaxport.run.r"}


def test_a_sub_package_that_is_no_room_is_reported(tmp_path):
    root = _rooms(tmp_path, {"artifact/helpers/__init__.py": "", "artifact/helpers/zips.py": "",
                             "serve/__init__.py": "", "serve/server/__init__.py": "", "verify/__init__.py": "",
                             "verify/sub/__init__.py": ""})
    assert check_layers.violations(root) == [
        "jaxport/artifact/helpers/__init__.py: jaxport.artifact.helpers is a sub-package of artifact that is no room; "
        "add it to ROOMS in scripts/check_layers.py with the rooms it may import",
        "jaxport/serve/server/__init__.py: jaxport.serve.server is a sub-package of serve that is no room; "
        "add it to ROOMS in scripts/check_layers.py with the rooms it may import"]


def test_the_serve_core_imports_no_transport(tmp_path):
    """The serve core's rule: the engine-free core (and the batch engines' adapters on it) imports nothing of
    ``serve.transport``, which may import the core; the package's ``__init__`` reaches its room lazily."""
    root = _rooms(tmp_path, {
        "serve/__init__.py": "def __getattr__(name):\n    from .transport import models\n",
        "serve/batching.py": "", "serve/batcher.py": "from .batching import Batched\nfrom .transport import ports\n",
        "serve/engine.py": "from . import transport\n",
        "serve/transport/ports.py": "",
        "serve/transport/models.py": "from ..batching import Batched\nfrom . import ports\n",
        "ray.py": "from .serve.batching import Batched\nfrom .serve.transport.models import Serving\n"})
    why = ("imports no transport: the core stays engine-free, for the batch engines' adapters and the server alike; "
           "what needs kserve, a socket or the Open Inference Protocol belongs in serve.transport")
    assert check_layers.violations(root) == [
        f"jaxport/ray.py:2: jaxport.ray (the serve core) imports jaxport.serve.transport.models (serve.transport); the "
        f"serve core {why}",
        f"jaxport/serve/batcher.py:2: jaxport.serve.batcher (the serve core) imports jaxport.serve.transport.ports "
        f"(serve.transport); the serve core {why}",
        f"jaxport/serve/engine.py:1: jaxport.serve.engine (the serve core) imports jaxport.serve.transport "
        f"(serve.transport); the serve core {why}"]


def test_the_export_rooms_keep_their_order(tmp_path):
    """entry, then weights, then lowering, then writing, each on those before it; the core (request, pipeline,
    rebind) on them all."""
    root = _rooms(tmp_path, {
        "export/entry/paths.py": "", "export/entry/entrypoint.py": "from .paths import IN_MEMORY\n"
                                                                   "from ..weights import bind\n",
        "export/weights/bind.py": "from ..entry import entrypoint\n", "export/lowering/lower.py": "from ..weights "
        "import bind\nfrom ..entry.entrypoint import Entrypoint\nfrom ..writing import manifest\n",
        "export/writing/manifest.py": "from ..lowering.lower import function_constraints\n",
        "export/request.py": "from .entry.paths import IN_MEMORY\n",
        "export/pipeline.py": "from .lowering import lower\nfrom .writing import manifest\nfrom .request import R\n"})
    assert check_layers.violations(root) == [
        "jaxport/export/entry/entrypoint.py:2: jaxport.export.entry.entrypoint (export.entry) imports "
        "jaxport.export.weights.bind (export.weights); export.entry imports nothing else of export",
        "jaxport/export/lowering/lower.py:3: jaxport.export.lowering.lower (export.lowering) imports "
        "jaxport.export.writing.manifest (export.writing); export.lowering may import only from export.entry, "
        "export.weights",
        "import cycle: jaxport.export.entry.entrypoint -> jaxport.export.weights.bind (each imports another in the "
        "group)",
        "import cycle: jaxport.export.lowering.lower -> jaxport.export.writing.manifest (each imports another in the "
        "group)"]


# --- rule 7: records inside, keywords at the facade ------------------------------------------------------------------

_OPTIONS = "from dataclasses import dataclass\n@dataclass\nclass LoadOptions:\n    runtime: str = 'jax'\n" \
           "    cache: bool = True\n"


def test_a_facade_function_lists_every_field_of_its_records(tmp_path):
    root = _package(tmp_path, {
        "run/options.py": _OPTIONS,
        "run/load.py": "def load(path, *, runtime='jax'):\n    pass\n\ndef load_by(path, options):\n    pass\n"})
    assert check_layers.violations(root) == [
        "jaxport/run/load.py:1: load takes the fields of LoadOptions but not cache; the facade lists every field of "
        "the records it builds"]


def test_the_fields_of_a_record_include_its_bases(tmp_path):
    root = _package(tmp_path, {
        "export/request.py": "class WriteOptions:\n    name: str | None = None\n    _: KW_ONLY\n"
                             "class ExportRequest(WriteOptions):\n    bind: dict | None = None\n"
                             "    kind: ClassVar[str] = 'x'\n",
        "importer/__init__.py": "",
        "importer/request.py": "from ..export.request import WriteOptions\nclass ImportRequest(WriteOptions):\n"
                               "    function: str | None = None\n"})
    assert check_layers.record_fields(root, "jaxport.export.request.ExportRequest") == ["name", "bind"]
    assert check_layers.record_fields(root, "jaxport.importer.request.ImportRequest") == ["name", "function"]


def test_the_library_calls_the_function_beside_the_facade(tmp_path):
    root = _package(tmp_path, {
        "run/options.py": _OPTIONS,
        "run/load.py": "def load(path, *, runtime='jax', cache=True):\n    pass\n\ndef load_by(path, options):\n"
                       "    pass\n",
        "run/warm.py": "from .load import load, load_by\nfrom . import load as load_mod\nx = load_mod.load\n"
                       "y = load_mod.load_by\n"})
    assert check_layers.violations(root) == [
        "jaxport/run/warm.py:1: jaxport.run.warm imports the facade function load from jaxport.run.load; inside the "
        "library call the function beside it that takes the record",
        "jaxport/run/warm.py:3: jaxport.run.warm calls the facade function load of jaxport.run.load; inside the "
        "library call the function beside it that takes the record"]


def test_kwargs_are_a_calls_own_form_or_a_listed_bag(tmp_path):
    root = _package(tmp_path, {
        "run/a.py": "def wrapper(*args, **kwargs):\n    return f(*args, **kwargs)\n\n"
                    "def forwards(path, **options):\n    return load(path, **options)\n\n"
                    "def takes_fields(*args, **options):\n    return Options(*args, **options)\n\n"
                    "def reads(**options):\n    return options.get('runtime')\n\n"
                    "def replaces(r, *args, **changes):\n    return dataclasses.replace(r, **changes)\n",
        "export/lowering/tracing.py": "def jax_config(**updates):\n    return dict(updates)\n"})
    assert check_layers.violations(root) == [
        f"jaxport/run/a.py:{line}: {name} takes **{kwargs}; inside the library a request travels as its record: take "
        f"the record (the facade lists a record's fields as parameters of their own), or list the keyword bag in "
        f"KEYWORD_BAGS" for line, name, kwargs in ((4, "forwards", "options"), (7, "takes_fields", "options"),
                                                   (10, "reads", "options"), (13, "replaces", "changes"))]


def test_the_transport_tables_name_functions_that_exist():
    modules = check_layers.load_package(REPO / "jaxport")
    named = [*(f"{m}.{q}" for m, fs in check_layers.FACADE.items() for q in fs), *check_layers.KEYWORD_BAGS,
             *check_layers.FACADE_OMITS]
    found = {f"{m}.{q}" for m, mod in modules.items()
             for q, _ in check_layers.functions(ast.parse(mod.path.read_text()))}
    assert [n for n in named if n not in found] == []


def test_the_library_gives_a_facade_constructor_records_whole(tmp_path):
    root = _package(tmp_path, {
        "run/options.py": _OPTIONS, "run/calls/__init__.py": "",
        "run/calls/calling.py": "class CallRequest:\n    artifact: str\n    load: object = None\n",
        "run/calls/warm.py": "from .calling import CallRequest\nfrom ..options import LoadOptions\n"
                             "a = CallRequest('m', load=LoadOptions(runtime='iree'))\n"
                             "b = CallRequest('m', runtime='iree')\n"})
    assert check_layers.violations(root) == [
        "jaxport/run/calls/warm.py:4: jaxport.run.calls.warm gives CallRequest the LoadOptions field runtime by "
        "keyword; inside the library pass the record whole"]
