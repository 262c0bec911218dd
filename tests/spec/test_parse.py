"""The YAML shape spec: what it parses to, and the exact message for each way it can be wrong."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import jaxport
from jaxport.errors import SpecError
from jaxport.export.lowering.lower import InputLeaf, function_constraints
from jaxport.spec import MAX_SPEC_BYTES, ArrayLeaf, StaticLeaf, load_spec, parse_spec

DTYPES = ("bool, i8, i16, i32, i64, u8, u16, u32, u64, bf16, f16, f32, f64, c64, c128, f8e4m3fn, f8e5m2, i4, u4, "
          "f4e2m1fn")
KEY_DTYPES = "or key for a PRNG key (key<rbg>, key<unsafe_rbg> for other implementations)"
TOP_KEYS = ("jaxport, name, dims, constraints, args, kwargs, outputs, platforms, allow_custom_calls, metadata, "
            "functions, mesh, outputs_sharding, vjp_order")
TAG_HELP = "only plain strings, numbers, booleans, null, lists and mappings are. Remove the tag."

MODEL = """\
import jax.numpy as jnp


def f(x, y):
    return x + y


def g(x, *, scale):
    return x * scale
"""


def spec_text(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def spec_error(text: str) -> str:
    """The message of the SpecError that parsing ``text`` (as file ``spec.yaml``) raises."""
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(text), "spec.yaml")
    return str(e.value)


# --- what a good spec parses to ----------------------------------------------------------------------------------


def test_compact_and_long_leaves_pytrees_kwargs_and_statics():
    spec = parse_spec(spec_text("""
        jaxport: 1
        dims:
          batch: {min: 1, max: 4096}
          h:
        constraints:
          - "batch <= 8*h"
        args:
          - "f32[batch, 784]"
          - {shape: [2*h, 3], dtype: bfloat16}
          - w: "i8[]"
            bs: ["u8[h]", {static: [1, 2]}]
        kwargs:
          mode: {static: train}
        platforms: [CPU, tpu]
        allow_custom_calls: [my_target]
        metadata: {name: demo, version: 1.0, labels: {team: ml, n: 3}}
        """), "spec.yaml")
    f = spec.functions[None]
    assert f.args[0] == ArrayLeaf(("batch", 784), "float32", f.args[0].where)
    assert str(f.args[0].where) == "spec.yaml:8"
    assert f.args[1].shape == ("2*h", 3) and f.args[1].dtype == "bfloat16"
    assert f.args[2]["w"].shape == () and f.args[2]["w"].dtype == "int8"
    assert f.args[2]["bs"][0].shape == ("h",)
    assert f.args[2]["bs"][1] == StaticLeaf((1, 2), f.args[2]["bs"][1].where)
    assert f.kwargs["mode"].value == "train"
    assert spec.dims["batch"].min == 1 and spec.dims["batch"].max == 4096
    assert spec.dims["h"].min is None and spec.dims["h"].max is None
    assert [c.text for c in spec.constraints] == ["batch <= 8*h"]
    assert spec.platforms == ["cpu", "tpu"]
    assert spec.allow_custom_calls == ["my_target"]
    assert spec.metadata == {"name": "demo", "version": "1.0", "labels": {"team": "ml", "n": "3"}}


def test_dimension_expressions_are_normalised_to_jax_spelling():
    spec = parse_spec("jaxport: 1\nargs: ['f32[2*h, floordiv(h,2), h+1, (h)]']\n")
    assert spec.functions[None].args[0].shape == ("2*h", "floordiv(h, 2)", "h + 1", "h")


def test_dims_may_be_a_plain_list_and_lower_bounds_above_one_become_constraints():
    spec = parse_spec("jaxport: 1\ndims: [b, n]\nargs: ['f32[b, n]']\n")
    assert list(spec.dims) == ["b", "n"]
    spec = parse_spec("jaxport: 1\ndims: {b: {min: 2}}\nargs: ['f32[b]']\n")
    leaf = spec.functions[None].args[0]
    assert function_constraints([InputLeaf("x", "args[0]", leaf)], spec) == (["b >= 2"], [])


def test_several_functions():
    spec = parse_spec(spec_text("""
        jaxport: 1
        functions:
          encode:
            entrypoint: model.py:encode
            args: ["f32[n, 4]"]
          decode:
            args: ["f32[n, 2]"]
        """))
    assert list(spec.functions) == ["encode", "decode"]
    assert spec.functions["encode"].entrypoint == "model.py:encode"
    assert spec.functions["decode"].entrypoint is None


def test_anchors_and_aliases_are_allowed_in_moderation():
    spec = parse_spec("jaxport: 1\nargs: [&x 'f32[3]', *x]\n")
    assert [a.shape for a in spec.functions[None].args] == [(3,), (3,)]


def test_load_spec_reads_a_file(tmp_path: Path):
    p = tmp_path / "spec.yaml"
    p.write_text("jaxport: 1\nargs: ['f32[3]']\n")
    spec = load_spec(p)
    assert spec.file == str(p)
    assert spec.base_dir == tmp_path


# --- YAML-level errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nargs: [\n  - f32[3]\n",
         "spec.yaml:3: invalid YAML: while parsing a flow node, expected the node content, but found '-'. "
         "Fix the YAML syntax at that line."),
        ("jaxport: 1\n\targs: []\n",
         "spec.yaml:2: invalid YAML: while scanning for the next token, found character '\\t' that cannot start "
         "any token. Fix the YAML syntax at that line."),
        ("jaxport: 1\nargs: [*x]\n",
         "spec.yaml:2: invalid YAML: found undefined alias 'x'. Fix the YAML syntax at that line."),
        ("jaxport: 1\n---\njaxport: 1\n",
         "spec.yaml:2: invalid YAML: expected a single document in the stream, but found another document. "
         "Fix the YAML syntax at that line."),
        ("jaxport: 1\nargs: ['f32[3]\x00']\n",
         "spec.yaml:2: invalid YAML: the character #x0000 is not allowed in YAML text. Remove it."),
        ("", "spec.yaml: the spec is empty. Start it with 'jaxport: 1'."),
        ("# only a comment\n", "spec.yaml: the spec is empty. Start it with 'jaxport: 1'."),
        ("- f32[3]\n", "spec.yaml:1: a spec must be a YAML mapping starting with 'jaxport: 1'."),
        ("jaxport: 1\njaxport: 1\n", "spec.yaml:2: duplicate key 'jaxport'."),
        ("jaxport: 1\n[a]: 1\n", "spec.yaml:2: mapping keys must be strings, found ['a']."),
    ],
)
def test_yaml_errors(text, message):
    assert spec_error(text) == message


@pytest.mark.parametrize(
    ("tag_text", "shown"),
    [
        ("!!python/object/apply:os.system ['echo hi']", "!!python/object/apply:os.system"),
        ("!!python/name:os.system", "!!python/name:os.system"),
        ("!!python/tuple [1, 2]", "!!python/tuple"),
        ("!!binary aGVsbG8=", "!!binary"),
        ("!!set {a: null}", "!!set"),
        ("!custom [1]", "!custom"),
    ],
)
def test_tags_beyond_plain_yaml_are_refused(tag_text, shown):
    assert spec_error(f"jaxport: 1\nargs: {tag_text}\n") == f"spec.yaml:2: YAML tag {shown!r} is not allowed in a " \
                                                             f"spec: {TAG_HELP}"


def test_merge_keys_are_refused():
    message = spec_error("jaxport: 1\nmetadata:\n  <<: {name: a}\nargs: []\n")
    assert message == f"spec.yaml:3: YAML tag '!!merge' is not allowed in a spec: {TAG_HELP}"


def test_python_tag_never_runs_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    canary = tmp_path / "CANARY"
    (tmp_path / "spec.yaml").write_text(
        'jaxport: 1\nargs:\n  - !!python/object/apply:os.system ["touch CANARY"]\n')
    with pytest.raises(SpecError) as e:
        load_spec("spec.yaml")
    assert str(e.value) == f"spec.yaml:3: YAML tag '!!python/object/apply:os.system' is not allowed in a spec: " \
                           f"{TAG_HELP}"
    assert not canary.exists()


BOMB = spec_text("""
    jaxport: 1
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
    """)


def test_alias_bomb_is_capped():
    assert spec_error(BOMB) == ("spec.yaml: the spec expands to more than 100000 YAML nodes (aliases included). "
                                "Write it without deep alias chains.")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nargs: " + "[" * 10000 + "]" * 10000 + "\n",
         "spec.yaml:2: the spec nests deeper than 64 levels. Flatten it."),
        ("jaxport: 1\nargs: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
         "spec.yaml:2: the spec nests deeper than 64 levels. Flatten it."),
        ("jaxport: 1\nargs:\n" + "".join("  " * (i + 1) + "-\n" for i in range(300)),
         "spec.yaml:66: the spec nests deeper than 64 levels. Flatten it."),
        # each level is shallow, but the alias puts one inside the other
        ("jaxport: 1\nx: &x " + "[" * 40 + "]" * 40 + "\nargs: " + "[" * 40 + "*x" + "]" * 40 + "\n",
         "spec.yaml:2: the spec nests deeper than 64 levels (aliases included). Flatten it."),
    ],
)
def test_deep_nesting_is_capped(text, message):
    assert spec_error(text) == message


def test_file_size_is_capped(tmp_path: Path):
    p = tmp_path / "big.yaml"
    p.write_text("jaxport: 1\n" + "#" * MAX_SPEC_BYTES + "\n")
    size = p.stat().st_size
    with pytest.raises(SpecError) as e:
        load_spec(p)
    assert str(e.value) == f"{p}: the spec is {size} bytes; specs are capped at 1048576 bytes. Shorten it."
    with pytest.raises(SpecError) as e:
        parse_spec(p.read_text(), "big.yaml")
    assert str(e.value) == f"big.yaml: the spec is {size} bytes; specs are capped at 1048576 bytes. Shorten it."


def test_unreadable_spec_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=re.escape("missing.yaml: spec file not found.")):
        load_spec("missing.yaml")
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(SpecError, match=re.escape("dir.yaml: is a directory, not a spec file.")):
        load_spec("dir.yaml")
    (tmp_path / "latin1.yaml").write_bytes(b"jaxport: 1\nmetadata: {description: caf\xe9}\n")
    with pytest.raises(SpecError) as e:
        load_spec("latin1.yaml")
    assert str(e.value) == "latin1.yaml:2: the spec is not UTF-8 text (byte 38 is 0xe9). Save it as UTF-8."


# --- spec-level errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nargz:\n  - f32[3]\n",
         f"spec.yaml:2: unknown key 'argz' in the spec. Did you mean 'args'? Allowed keys: {TOP_KEYS}."),
        ("jaxport: 1\nplatform: [cpu]\nargs: []\n",
         f"spec.yaml:2: unknown key 'platform' in the spec. Did you mean 'platforms'? Allowed keys: {TOP_KEYS}."),
        ("jaxport: 1\nzzz: 1\n",
         f"spec.yaml:2: unknown key 'zzz' in the spec. Allowed keys: {TOP_KEYS}."),
        ("jaxport: 1\nargs:\n  - {shape: [3], dtype: f32, dtpye: f32}\n",
         "spec.yaml:3: unknown key 'dtpye' in the array spec args[0]. Did you mean 'dtype'? Allowed keys: shape, "
         "dtype, sharding, range."),
        ("jaxport: 1\ndims:\n  b: {min: 1, mx: 3}\nargs: ['f32[b]']\n",
         "spec.yaml:3: unknown key 'mx' in dims['b']. Did you mean 'max'? Allowed keys: min, max."),
        ("jaxport: 1\nargs: ['f32[3]']\nmetadata: {nmae: x}\n",
         "spec.yaml:3: unknown key 'nmae' in metadata. Did you mean 'name'? Allowed keys: name, version, "
         "description, labels."),
        ("jaxport: 1\nargs:\n  - {static: 1, extra: 2}\n",
         "spec.yaml:3: unknown key 'extra' in args[0]. Allowed keys: static."),
    ],
)
def test_unknown_keys_suggest_the_closest(text, message):
    assert spec_error(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nargs:\n  - 'flaot32[3]'\n",
         f"spec.yaml:3: args[0]: unknown dtype 'flaot32'. Did you mean 'float32'? Use one of: {DTYPES} (or numpy "
         f"names such as float32), {KEY_DTYPES}."),
        ("jaxport: 1\nargs:\n  - a: 'f32[3]'\n    b:\n      - 'f33[4]'\n",
         f"spec.yaml:5: args[0]['b'][0]: unknown dtype 'f33'. Did you mean 'f32'? Use one of: {DTYPES} (or numpy "
         f"names such as float32), {KEY_DTYPES}."),
        ("jaxport: 1\nkwargs:\n  x: {shape: [3], dtype: object}\n",
         f"spec.yaml:3: kwargs['x']: unknown dtype 'object'. Use one of: {DTYPES} (or numpy names such as "
         f"float32), {KEY_DTYPES}."),
        ("jaxport: 1\nargs:\n  - {shape: [3], dtype: 32}\n",
         "spec.yaml:3: args[0]: dtype must be a string such as 'f32', found 32."),
        ("jaxport: 1\nargs:\n  - {shape: [3]}\n",
         "spec.yaml:3: args[0]: missing 'dtype' next to 'shape'."),
    ],
)
def test_dtype_errors(text, message):
    assert spec_error(text) == message


HOW_DIM = "Write an integer, a dimension variable or an expression such as '2*h'."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nargs:\n  - 'f32[b +, 3]'\n",
         f"spec.yaml:3: args[0].shape[0]: cannot parse dimension 'b +': unexpected end of 'b +'. {HOW_DIM}"),
        ("jaxport: 1\nargs:\n  - 'f32[3, foo(b)]'\n",
         "spec.yaml:3: args[0].shape[1]: cannot parse dimension 'foo(b)': unknown function 'foo' in 'foo(b)' "
         f"(known: floordiv, max, min, mod, non_negative). {HOW_DIM}"),
        ("jaxport: 1\nargs:\n  - 'f32[1.5]'\n",
         f"spec.yaml:3: args[0].shape[0]: cannot parse dimension '1.5': unexpected character '.' in '1.5'. {HOW_DIM}"),
        ("jaxport: 1\nargs:\n  - 'f32[3, ]'\n",
         f"spec.yaml:3: args[0].shape[1]: empty dimension. {HOW_DIM}"),
        ("jaxport: 1\nargs:\n  - 'f32[-3]'\n",
         "spec.yaml:3: args[0].shape[0]: dimension -3 is negative."),
        ("jaxport: 1\nargs:\n  - 'f32[99999999999999999999999]'\n",
         "spec.yaml:3: args[0].shape[0]: dimension 99999999999999999999999 is larger than 2**62."),
        ("jaxport: 1\nargs:\n  - {shape: [3, true], dtype: f32}\n",
         "spec.yaml:3: args[0].shape[1]: True is not a dimension."),
        ("jaxport: 1\nargs:\n  - {shape: {a: 1}, dtype: f32}\n",
         "spec.yaml:3: args[0]: shape must be a string like 'batch, 16' or a list, found {'a': 1}."),
        ("jaxport: 1\nargs:\n  - 'f32'\n",
         "spec.yaml:3: args[0]: 'f32' is not an array spec. Write 'dtype[dims]' such as 'f32[batch, 784]' ('f32[]' "
         "for a scalar), or use {static: ...} for a Python value."),
        ("jaxport: 1\nargs:\n  - 3\n",
         "spec.yaml:3: args[0]: 3 is not an array spec. Write 'dtype[dims]' such as 'f32[batch, 784]', or {static: "
         "3} to bake a Python value into the program."),
        ("jaxport: 1\nargs:\n  -\n",
         "spec.yaml:3: args[0]: empty argument. Write an array spec such as 'f32[batch, 784]' or {static: null} for "
         "a None argument."),
        ("jaxport: 1\nargs:\n  - {static: {a: 1}}\n",
         "spec.yaml:3: args[0]: a static value must be a number, string, boolean, null or a list of those, found a "
         "mapping."),
        ("jaxport: 1\nargs: {x: 'f32[3]'}\n",
         "spec.yaml:2: 'args' must be a list of positional arguments."),
    ],
)
def test_argument_errors_name_the_argument_path(text, message):
    assert spec_error(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nconstraints:\n  - 'b <= 8*hh'\nargs:\n  - 'f32[b, h]'\n",
         "spec.yaml:3: constraints[0]: 'b <= 8*hh' names dimension variable 'hh', which is not declared under "
         "'dims' nor used in any shape. Did you mean 'h'?"),
        ("jaxport: 1\nconstraints: ['b >= 2', 'q <= 3']\nargs: ['f32[b]']\n",
         "spec.yaml:2: constraints[1]: 'q <= 3' names dimension variable 'q', which is not declared under 'dims' "
         "nor used in any shape."),
        ("jaxport: 1\nargs: ['f32[b]']\nconstraints:\n  - 'b < 3'\n",
         "spec.yaml:4: constraints[0]: cannot parse 'b < 3': unexpected character '<' in 'b < 3'. Write 'lhs >= "
         "rhs', 'lhs <= rhs' or 'lhs == rhs'."),
        ("jaxport: 1\nargs: ['f32[b]']\nconstraints:\n  - 3\n",
         "spec.yaml:4: constraints[0]: must be a string like 'batch <= 8*h', found 3."),
        ("jaxport: 1\nargs: ['f32[b]']\nconstraints: 'b <= 3'\n",
         "spec.yaml:3: 'constraints' must be a list of strings like 'b <= 8*h'."),
    ],
)
def test_constraint_errors(text, message):
    assert spec_error(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 2\nargs: []\n",
         "spec.yaml:1: spec format version 2 is not one this jaxport reads (supported: 1). Upgrade jaxport or "
         "write 'jaxport: 1'."),
        ("jaxport: '1'\nargs: []\n",
         "spec.yaml:1: spec format version '1' is not one this jaxport reads (supported: 1). Upgrade jaxport or "
         "write 'jaxport: 1'."),
        ("args: []\n", "spec.yaml:1: missing 'jaxport: 1' (the spec format version) at the top."),
    ],
)
def test_spec_version(text, message):
    assert spec_error(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\ndims: {b: {min: 5, max: 2}}\nargs: ['f32[b]']\n",
         "spec.yaml:2: dims['b']: min 5 is greater than max 2."),
        ("jaxport: 1\ndims:\n  b: {min: 0}\nargs: ['f32[b]']\n",
         "spec.yaml:3: dims['b'].min: must be an integer >= 1, found 0."),
        ("jaxport: 1\ndims:\n  b: {max: many}\nargs: ['f32[b]']\n",
         "spec.yaml:3: dims['b'].max: must be an integer >= 1, found 'many'."),
        ("jaxport: 1\ndims:\n  b: 4\nargs: ['f32[b]']\n",
         "spec.yaml:3: dims['b']: bounds must be a mapping like {min: 1, max: 4096}, found 4."),
        ("jaxport: 1\ndims: {max: {}}\nargs: ['f32[3]']\n",
         "spec.yaml:2: dims: 'max' is not a valid dimension variable name (letters, digits, '_'; not a function of "
         "dimension expressions, nor '_' alone, which JAX reads as 'the size the argument has')."),
        ("jaxport: 1\ndims: {_: {max: 4}}\nargs: ['f32[_, 3]']\n",
         "spec.yaml:2: dims: '_' is not a valid dimension variable name (letters, digits, '_'; not a function of "
         "dimension expressions, nor '_' alone, which JAX reads as 'the size the argument has')."),
        ("jaxport: 1\nargs: ['f32[2*_ + 1, 3]']\n",
         "spec.yaml:2: args[0].shape[0]: cannot parse dimension '2*_ + 1': '_' in '2*_ + 1' is no dimension variable "
         "(JAX reads it as 'the size the argument has'); give the dimension a name, such as 'batch'. Write an "
         "integer, a dimension variable or an expression such as '2*h'."),
        ("jaxport: 1\ndims:\n  b:\n  q: {min: 2}\nargs: ['f32[b]']\n",
         "spec.yaml:4: dims['q'] is declared but no argument shape uses it; JAX can only derive a dimension "
         "variable from an argument shape. Use it or remove it."),
        ("jaxport: 1\ndims: 3\nargs: []\n",
         "spec.yaml:2: 'dims' must map each dimension variable to its bounds, e.g. 'batch: {min: 1, max: 4096}'."),
    ],
)
def test_dims_errors(text, message):
    assert spec_error(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jaxport: 1\nargs: ['f32[3]']\nplatforms: [cpu, gpu]\n",
         "spec.yaml:3: platforms: unknown platform 'gpu'. Did you mean 'cuda'? (JAX names an NVIDIA GPU cuda, an AMD "
         "one rocm.) Use some of: cpu, cuda, rocm, tpu."),
        ("jaxport: 1\nargs: ['f32[3]']\nplatforms: []\n",
         "spec.yaml:3: 'platforms' must be a list such as [cpu, cuda, tpu]."),
        ("jaxport: 1\nargs: ['f32[3]']\nallow_custom_calls: [1]\n",
         "spec.yaml:3: 'allow_custom_calls' must be a list of custom-call target names."),
        ("jaxport: 1\nargs: ['f32[3]']\nmetadata: {name: '../evil'}\n",
         "spec.yaml:3: metadata.name: '../evil' is not a valid artifact name: use letters, digits, '_', '-', '.' (at "
         "most 128 characters, not starting with '.' or '-')."),
        ("jaxport: 1\nargs: ['f32[3]']\nfunctions: {f: {args: []}}\n",
         "spec.yaml:3: use either top-level 'args'/'kwargs' (one function) or 'functions:' (several), not both."),
        ("jaxport: 1\nfunctions:\n  f:\n    args: []\n    kwarg: {}\n",
         "spec.yaml:5: unknown key 'kwarg' in functions['f']. Did you mean 'kwargs'? Allowed keys: entrypoint, "
         "args, kwargs, outputs, outputs_sharding."),
    ],
)
def test_other_spec_errors(text, message):
    assert spec_error(text) == message


# --- errors found against the function (jaxport/export/lower.py) ----------------------------------------------------


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("entry", "spec", "message"),
    [
        ("model.py:f", "jaxport: 1\nargs: ['f32[3]']\n",
         "spec.yaml:1: the spec gives 1 positional argument, which does not fit f(x, y): missing a required "
         "argument: 'y'. Make 'args' and 'kwargs' match the function's parameters."),
        ("model.py:f", "jaxport: 1\nargs: ['f32[3]', 'f32[3]', 'f32[3]']\n",
         "spec.yaml:1: the spec gives 3 positional arguments, which do not fit f(x, y): too many positional "
         "arguments. Make 'args' and 'kwargs' match the function's parameters."),
        ("model.py:f", "jaxport: 1\nargs: ['f32[3]', 'f32[3]']\nkwargs: {z: 'f32[3]'}\n",
         "spec.yaml:1: the spec gives 2 positional arguments and keyword z, which do not fit f(x, y): keyword 'z' "
         "is not a parameter. Make 'args' and 'kwargs' match the function's parameters."),
        ("model.py:g", "jaxport: 1\nargs: ['f32[3]']\nkwargs: {scal: {static: 2}}\n",
         "spec.yaml:1: the spec gives 1 positional argument and keyword scal, which do not fit g(x, *, scale): "
         "keyword 'scal' is not a parameter (did you mean 'scale'?). Make 'args' and 'kwargs' match the function's "
         "parameters."),
    ],
)
def test_arguments_must_match_the_signature(model_dir: Path, entry, spec, message):
    (model_dir / "spec.yaml").write_text(spec)
    with pytest.raises(SpecError) as e:
        jaxport.export(entry, "spec.yaml", output="out.jaxport")
    assert str(e.value) == message
    assert not (model_dir / "out.jaxport").exists()


# --- through the command line ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("jaxport: 1\nargs: [\n", "spec.yaml:3: invalid YAML: while parsing a flow node, expected the node content, "
                                  "but found '<stream end>'. Fix the YAML syntax at that line."),
        ("jaxport: 1\nargz: ['f32[3]']\n",
         f"spec.yaml:2: unknown key 'argz' in the spec. Did you mean 'args'? Allowed keys: {TOP_KEYS}."),
        ("jaxport: 1\nargs: ['f23[3]', 'f32[3]']\n",
         f"spec.yaml:2: args[0]: unknown dtype 'f23'. Did you mean 'f32'? Use one of: {DTYPES} (or numpy names "
         f"such as float32), {KEY_DTYPES}."),
        ("jaxport: 7\nargs: ['f32[3]', 'f32[3]']\n",
         "spec.yaml:1: spec format version 7 is not one this jaxport reads (supported: 1). Upgrade jaxport or "
         "write 'jaxport: 1'."),
        (BOMB, "spec.yaml: the spec expands to more than 100000 YAML nodes (aliases included). Write it without "
               "deep alias chains."),
        ("jaxport: 1\nargs: ['f32[3]']\n",
         "spec.yaml:1: the spec gives 1 positional argument, which does not fit f(x, y): missing a required "
         "argument: 'y'. Make 'args' and 'kwargs' match the function's parameters."),
    ],
)
def test_cli_reports_spec_errors_with_exit_code_3(model_dir: Path, run_cli, spec, message):
    (model_dir / "spec.yaml").write_text(spec)
    result = run_cli("export", "model.py:f", "--shapes", "spec.yaml")
    assert result.exit_code == 3
    assert result.stderr == f"error[spec]: {message}\n"
    assert "Traceback" not in result.stderr + result.stdout
    assert not list(model_dir.glob("*.jaxport"))


def test_cli_never_runs_a_python_tag(model_dir: Path, run_cli):
    (model_dir / "spec.yaml").write_text('jaxport: 1\nargs:\n  - !!python/object/apply:os.system ["touch CANARY"]\n')
    result = run_cli("export", "model.py:f", "--shapes", "spec.yaml")
    assert result.exit_code == 3
    assert result.stderr == (f"error[spec]: spec.yaml:3: YAML tag '!!python/object/apply:os.system' is not allowed "
                             f"in a spec: {TAG_HELP}\n")
    assert not (model_dir / "CANARY").exists()


def test_name_range_and_digest_are_parsed(tmp_path: Path):
    text = "jaxport: 1\nname: model\nargs:\n  - {shape: [t], dtype: u16, range: [0, 65536]}\n  - 'f32[t]'\n"
    (tmp_path / "spec.yaml").write_bytes(text.encode())
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.name == "model"
    assert list(spec.functions) == [None]
    assert spec.sha256 == __import__("hashlib").sha256(text.encode()).hexdigest()
    tok, x = spec.functions[None].args
    assert tok == ArrayLeaf(("t",), "uint16", tok.where, None, (0, 65536))
    assert x.range is None
    assert parse_spec("jaxport: 1\nargs: []\n").name is None
