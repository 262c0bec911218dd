"""Plain helpers shared by the tests, imported absolutely (``from tests.support import EXAMPLES``)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """The Python file at PATH as a module, executed from its file (not put in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name or f"loaded_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def layer_checker() -> ModuleType:
    """``scripts/check_layers.py`` (the import-layer contract) as the module ``check_layers``, put in ``sys.modules``
    as its dataclasses need."""
    import sys

    spec = importlib.util.spec_from_file_location("check_layers", REPO / "scripts" / "check_layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def example(name: str) -> ModuleType:
    """``examples/NAME/model.py``, loaded once per test run (its functions keep their identity, so ``jax.jit``
    compiles each of them once)."""
    return load_module(EXAMPLES / name / "model.py", f"example_{name}")


def npz_arrays(path: Path | str) -> dict:
    """Every array of the ``.npz`` at PATH, by name (read without pickle)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


GOLDEN_MLP = REPO / "tests" / "golden" / "1.0" / "mlp.jaxport"


def function_record(entry: dict, name: str = "f"):
    """The ``jaxport.artifact.model.Function`` for a partial manifest function entry (``inputs``, ``dims``,
    ``constraints``, ...): the golden MLP's entry with ENTRY's fields in its place (no outputs unless given), read
    through ``manifest.validate``, the one parser, as every library reader gets it."""
    import copy
    import json
    import zipfile

    from jaxport.artifact import manifest

    with zipfile.ZipFile(GOLDEN_MLP) as z:
        raw = json.loads(z.read("manifest.json"))
    base = raw["functions"]["predict"]
    inputs = [{"sharding": None, **i} for i in entry["inputs"]]
    f = {**base, "outputs": [], "output_tree": {"tuple": []}, "dims": {}, "constraints": [], "shape_assertions": [],
         "custom_calls": [], **copy.deepcopy(entry), "inputs": inputs,
         "signature": {"args": [{"input": k, "name": i["name"]} for k, i in enumerate(inputs)], "kwargs": {}},
         "kept_inputs": list(range(len(inputs)))}
    raw["functions"] = {name: f}
    return manifest.validate(raw).functions[name]


def tree_by_path(tree) -> dict:
    """The leaves of TREE by key path, ``/``-joined as jaxport names inputs and outputs (``0/opt_state/0/mu/w``), each
    as ``(dtype name, numpy array)``, a typed PRNG key as its key dtype and key data: a user's pytree and the nested
    dicts of the same paths compare leaf by leaf."""
    import jax
    import numpy as np

    def part(key) -> str:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                return str(getattr(key, attr))
        return str(key)

    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        name = "/".join(part(k) for k in path)
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
            out[name] = (str(leaf.dtype), np.asarray(jax.random.key_data(leaf)))
        else:
            array = np.asarray(leaf)
            out[name] = (array.dtype.name, array)
    return out


def assert_same_tree(actual, expected, rtol: float = 1e-5, atol: float = 1e-6, what: str = "",
                     structure: bool = True) -> None:
    """ACTUAL has EXPECTED's leaves (paths, dtypes, shapes, values within RTOL/ATOL) and, with STRUCTURE, its pytree
    structure too (the user's namedtuples and dataclasses, not dicts of their paths)."""
    import jax
    import numpy as np

    got, want = tree_by_path(actual), tree_by_path(expected)
    assert sorted(got) == sorted(want), what
    for name, (dtype, value) in want.items():
        where = f"{what} {name}".strip()
        assert got[name][0] == dtype, f"{where}: dtype {got[name][0]}, expected {dtype}"
        assert got[name][1].shape == value.shape, f"{where}: shape {got[name][1].shape}, expected {value.shape}"
        np.testing.assert_allclose(got[name][1], value, rtol=rtol, atol=atol, err_msg=where)
    if structure:
        got_nodes, want_nodes = _nodes(jax.tree_util.tree_structure(actual)), _nodes(jax.tree_util.tree_structure(
            expected))
        assert got_nodes == want_nodes, f"{what} pytree nodes {got_nodes}, expected {want_nodes}"


def _nodes(treedef) -> object:
    """TREEDEF's nodes as (type name, children), a dict's keys kept: the classes a pytree is built of, without the
    static fields a node may carry (a TrainState's ``apply_fn``, equal only within one import of its module)."""
    data = treedef.node_data()
    if data is None:
        return "*"
    kind, aux = data
    children = [_nodes(child) for child in treedef.children()]
    return (kind.__name__, list(aux) if isinstance(aux, (list, tuple)) and issubclass(kind, dict) else None,
            children)


def assert_steps(loaded, live, args: tuple, advance, steps: int = 3, rtol: float = 1e-5, atol: float = 1e-6,
                 structure: bool = True):
    """Call LOADED and ``jax.jit(LIVE)`` on ARGS, then feed each side's own outputs back STEPS - 1 times
    (``ADVANCE(args, outputs)`` gives the next arguments: the returned state in place of the one passed), the outputs
    compared at every step (:func:`assert_same_tree`). Returns the artifact's last outputs."""
    import jax

    jitted = jax.jit(live)
    got_args = want_args = args
    got = None
    for step in range(steps):
        got, want = loaded(*got_args), jitted(*want_args)
        assert_same_tree(got, want, rtol, atol, f"step {step}:", structure)
        got_args, want_args = advance(got_args, got), advance(want_args, want)
    return got


def assert_iree_matches(path, args: tuple, cache_dir, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """The artifact at PATH compiled by IREE and called on ARGS gives what the JAX runtime gives (skips without
    ``jaxport[iree]``)."""
    import pytest

    import jaxport

    pytest.importorskip("iree.compiler")
    want = jaxport.load(path)(*args)
    got = jaxport.load(path, runtime="iree", cache_dir=cache_dir)(*args)
    assert_same_tree(got, want, rtol, atol, "iree:")


def live_module(path: Path, name: str, monkeypatch):
    """The Python file at PATH imported as module NAME (in ``sys.modules`` for the test, as a user's own module is
    when ``jaxport.load`` rebuilds its classes): the live side a test compares an artifact with."""
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def module_writer(tmp_path: Path, monkeypatch):
    """``make(name, files)``: write FILES (file name: text) into TMP_PATH, chdir there and import the first file as
    module NAME (:func:`live_module`)."""
    monkeypatch.chdir(tmp_path)

    def make(name: str, files: dict[str, str]):
        for file, text in files.items():
            (tmp_path / file).write_text(text)
        return live_module(tmp_path / next(iter(files)), name, monkeypatch)

    return make


def exported_manifest(run_cli, *args: str) -> dict:
    """``jaxport export ARGS...`` (exit 0), then the manifest of what it wrote, as ``jaxport inspect --json`` shows
    it."""
    import json

    res = run_cli("export", *args)
    assert res.exit_code == 0, res.stderr
    res = run_cli("inspect", args[args.index("-o") + 1], "--json")
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def verified(run_cli, path: str) -> dict:
    """``jaxport verify PATH --json``: exit 0 and a report that passed, returned."""
    import json

    res = run_cli("verify", path, "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["passed"], report
    return report
