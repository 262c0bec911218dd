"""Loading ``path/model.py:NAME`` and ``package.module:obj.attr`` entry points, and the errors when that fails."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from jaxport.errors import EntrypointError
from jaxport.export.entry.entrypoint import load_entrypoint

# Helper modules get names no other test uses: a module, once imported, stays in sys.modules.
MODEL = """\
import ep_sibling_helper

VALUE = 3
CONFIG = {"scale": 2}


def predict(x):
    return x * ep_sibling_helper.SCALE


def predict_all(xs):
    return [predict(x) for x in xs]


def lazy(x):
    import ep_lazy_helper

    return x + ep_lazy_helper.OFFSET


def prefix(x):
    return x


class Model:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return x * self.scale

    @staticmethod
    def run(x):
        return -x


model = Model(5)
"""

BROKEN = """\
import os


def fail():
    raise RuntimeError("boom in user code")


fail()
"""


@pytest.fixture(autouse=True)
def _isolated_imports(monkeypatch: pytest.MonkeyPatch):
    """Undo what loading does to sys.path and sys.modules, so tests cannot see each other's modules."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``models/model.py`` with sibling helpers, a package ``eppkg``, and a few broken modules; cwd is the root."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "model.py").write_text(MODEL)
    (models / "ep_sibling_helper.py").write_text("SCALE = 3\n")
    (models / "ep_lazy_helper.py").write_text("OFFSET = 10\n")
    (models / "broken.py").write_text(BROKEN)
    (models / "syntax.py").write_text("def f(x)\n    return x\n")
    (models / "missing_import.py").write_text("import ep_no_such_module_anywhere\n")
    (models / "empty.py").write_text("import os\n\n\ndef alpha(x):\n    return x\n\n\ndef beta(x):\n    return x\n")
    (models / "my.model.py").write_text("def f(x):\n    return x + 1\n")
    (models / "getattr_raises.py").write_text(textwrap.dedent("""\
        def __getattr__(name):
            raise ValueError(f"no lazy attribute {name}")
        """))
    pkg = tmp_path / "eppkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("def fn(x):\n    return 2 * x\n\n\nclass K:\n    @staticmethod\n    def m(x):\n"
                                "        return 3 * x\n")
    (pkg / "bad.py").write_text("X = 1\nraise KeyError('bad package module')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load_error(text: str, base_dir: Path | None = None) -> str:
    with pytest.raises(EntrypointError) as e:
        load_entrypoint(text, base_dir)
    return str(e.value)


# --- loading -----------------------------------------------------------------------------------------------------


def test_file_entrypoint_with_a_sibling_import(project: Path):
    entry = load_entrypoint("models/model.py:predict")
    assert entry.function(2) == 6
    assert entry.spec == "model.py:predict"
    assert entry.attribute == "predict"
    assert entry.name == "predict"
    assert entry.root == project / "models"


def test_the_files_directory_stays_importable_for_lazy_imports(project: Path):
    entry = load_entrypoint("models/model.py:lazy")
    assert entry.function(1) == 11


def test_file_path_resolves_against_base_dir(project: Path, tmp_path_factory: pytest.TempPathFactory,
                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    entry = load_entrypoint("model.py:predict", base_dir=project / "models")
    assert entry.function(1) == 3
    entry = load_entrypoint(f"{project / 'models' / 'model.py'}:predict")  # absolute
    assert entry.spec == "model.py:predict"


@pytest.mark.parametrize(
    ("text", "attribute", "name", "arg", "result"),
    [
        ("models/model.py:Model.run", "Model.run", "run", 4, -4),
        ("models/model.py:model.apply", "model.apply", "apply", 4, 20),  # a bound method of an instance
        ("models/my.model.py:f", "f", "f", 4, 5),
    ],
)
def test_dotted_attribute_paths(project: Path, text, attribute, name, arg, result):
    entry = load_entrypoint(text)
    assert (entry.attribute, entry.name) == (attribute, name)
    assert entry.function(arg) == result


def test_package_module_entrypoints(project: Path):
    entry = load_entrypoint("eppkg.mod:fn")
    assert entry.function(4) == 8
    assert entry.spec == "eppkg.mod:fn"
    assert entry.root == project
    entry = load_entrypoint("eppkg.mod:K.m")
    assert (entry.attribute, entry.name, entry.function(2)) == ("K.m", "m", 6)


# --- errors ------------------------------------------------------------------------------------------------------

FORM = "expected 'path/to/model.py:NAME' or 'package.module:NAME'."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models/model.py", f"entry point 'models/model.py': {FORM}"),
        ("models/model.py:", f"entry point 'models/model.py:': {FORM}"),
        (":predict", f"entry point ':predict': {FORM}"),
        ("models/nope.py:f", "entry point 'models/nope.py:f': file models/nope.py not found."),
        ("nodir/nope.py:f", "entry point 'nodir/nope.py:f': file nodir/nope.py not found (its directory does not "
                            "exist)."),
        ("models/model.py:predcit", "entry point 'models/model.py:predcit': models/model.py has no attribute "
                                    "'predcit'. Did you mean 'predict', 'predict_all' or 'prefix'?"),
        ("models/model.py:Modl", "entry point 'models/model.py:Modl': models/model.py has no attribute 'Modl'. Did "
                                 "you mean 'Model' or 'model'?"),
        ("models/model.py:lzay", "entry point 'models/model.py:lzay': models/model.py has no attribute 'lzay'. Did "
                                 "you mean 'lazy'?"),
        ("models/model.py:pref", "entry point 'models/model.py:pref': models/model.py has no attribute 'pref'. Did "
                                 "you mean 'prefix'?"),
        ("models/empty.py:zzz", "entry point 'models/empty.py:zzz': models/empty.py has no attribute 'zzz'. It "
                                "defines: alpha, beta."),
        ("models/model.py:Model.aply", "entry point 'models/model.py:Model.aply': Model has no attribute 'aply'. "
                                       "Did you mean 'apply'?"),
        ("models/model.py:Model.zzzzzz", "entry point 'models/model.py:Model.zzzzzz': Model has no attribute "
                                         "'zzzzzz'. It defines: apply, run."),
        ("models/model.py:VALUE", "entry point 'models/model.py:VALUE': VALUE is an int, not a function. Point at "
                                  "a function (or any callable)."),
        ("models/model.py:CONFIG", "entry point 'models/model.py:CONFIG': CONFIG is a dict, not a function. Point "
                                   "at a function (or any callable)."),
        ("models/model.py:Model..run", "entry point 'models/model.py:Model..run': 'Model..run' is not an attribute "
                                       "path."),
        ("models/model.py:Model.1run", "entry point 'models/model.py:Model.1run': 'Model.1run' is not an attribute "
                                       "path."),
        ("eppkg.nope:fn", "entry point 'eppkg.nope:fn': no module named 'eppkg.nope'. Check the spelling, or give a "
                          "file path such as 'model.py:fn'."),
        ("ep_no_such_pkg:fn", "entry point 'ep_no_such_pkg:fn': no module named 'ep_no_such_pkg'. Check the "
                              "spelling, or give a file path such as 'model.py:fn'."),
        ("eppkg.mod:fnn", "entry point 'eppkg.mod:fnn': eppkg.mod has no attribute 'fnn'. Did you mean 'fn'?"),
    ],
)
def test_errors(project: Path, text, message):
    assert load_error(text) == message


def test_an_exception_while_importing_shows_the_users_frames(project: Path):
    path = project / "models" / "broken.py"
    # Python 3.13 marks the failing call with a caret line (``    ~~~~^^``); 3.11 and 3.12 do not
    shown = "\n".join(line for line in load_error("models/broken.py:fail").splitlines()
                      if line.strip(" ~^") or not line.strip())
    assert shown == (
        "entry point 'models/broken.py:fail': importing models/broken.py raised an exception:\n"
        f'  File "{path}", line 8, in <module>\n'
        "    fail()\n"
        f'  File "{path}", line 5, in fail\n'
        '    raise RuntimeError("boom in user code")\n'
        "RuntimeError: boom in user code")
    assert "_jaxport_entry_broken" not in sys.modules


def test_a_syntax_error_shows_the_line(project: Path):
    path = project / "models" / "syntax.py"
    assert load_error("models/syntax.py:f") == (
        "entry point 'models/syntax.py:f': importing models/syntax.py raised an exception:\n"
        f'  File "{path}", line 1\n'
        "    def f(x)\n"
        "            ^\n"
        "SyntaxError: expected ':'")


def test_a_missing_import_inside_the_users_module_is_theirs(project: Path):
    path = project / "models" / "missing_import.py"
    assert load_error("models/missing_import.py:f") == (
        "entry point 'models/missing_import.py:f': importing models/missing_import.py raised an exception:\n"
        f'  File "{path}", line 1, in <module>\n'
        "    import ep_no_such_module_anywhere\n"
        "ModuleNotFoundError: No module named 'ep_no_such_module_anywhere'")


def test_an_exception_while_importing_a_package_module(project: Path):
    message = load_error("eppkg.bad:X")
    path = project / "eppkg" / "bad.py"
    assert message == (
        "entry point 'eppkg.bad:X': importing eppkg.bad raised an exception:\n"
        f'  File "{path}", line 2, in <module>\n'
        "    raise KeyError('bad package module')\n"
        "KeyError: 'bad package module'")


def test_an_attribute_that_raises_while_read(project: Path):
    path = project / "models" / "getattr_raises.py"
    assert load_error("models/getattr_raises.py:predict") == (
        "entry point 'models/getattr_raises.py:predict': reading 'predict' raised:\n"
        f'  File "{path}", line 2, in __getattr__\n'
        '    raise ValueError(f"no lazy attribute {name}")\n'
        "ValueError: no lazy attribute predict")


# --- through the command line ------------------------------------------------------------------------------------


def test_cli_exit_code_4(project: Path, run_cli):
    (project / "spec.yaml").write_text("jaxport: 1\nargs: ['f32[3]']\n")
    result = run_cli("export", "models/model.py:lzay", "--shapes", "spec.yaml")
    assert result.exit_code == 4
    assert result.stderr == ("error[entrypoint]: entry point 'models/model.py:lzay': models/model.py has no "
                             "attribute 'lzay'. Did you mean 'lazy'?\n")
    assert not list(project.glob("*.jaxport"))


def test_cli_shows_the_users_frames_and_no_jaxport_traceback(project: Path, run_cli):
    (project / "spec.yaml").write_text("jaxport: 1\nargs: []\n")
    result = run_cli("export", "models/broken.py:fail", "--shapes", "spec.yaml")
    assert result.exit_code == 4
    assert result.stderr.startswith("error[entrypoint]: entry point 'models/broken.py:fail': importing "
                                    "models/broken.py raised an exception:\n")
    assert re.search(r'File ".*broken\.py", line 5, in fail\n', result.stderr)
    assert result.stderr.endswith("RuntimeError: boom in user code\n")
    assert "Traceback" not in result.stderr
    assert "jaxport/" not in result.stderr.replace(str(project), "")
    assert "importlib" not in result.stderr


def test_models_in_two_directories_get_their_own_same_named_helper(tmp_path: Path):
    for name, value in (("one", 1), ("two", 2)):
        d = tmp_path / name
        d.mkdir()
        (d / "ep_twin_helper.py").write_text(f"VALUE = {value}\n")
        (d / "ep_twin_lazy.py").write_text(f"VALUE = {10 * value}\n")
        (d / "model.py").write_text("import ep_twin_helper\n\n\ndef f():\n    import ep_twin_lazy\n\n"
                                    "    return ep_twin_helper.VALUE, ep_twin_lazy.VALUE\n")
    first = load_entrypoint("one/model.py:f", tmp_path)
    assert first.function() == (1, 10)
    second = load_entrypoint("two/model.py:f", tmp_path)
    assert second.function() == (2, 20)
