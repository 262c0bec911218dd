"""``jaxport inspect``: reads the manifest without importing JAX (except for ``--mlir``)."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import IsolatableCommand, debug_option, function_option, isolate_options, json_option, run_isolated
from ..render import escape, plain, plain_lines


@click.command("inspect", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path())
@json_option
@click.option("--mlir", is_flag=True, help="Print the StableHLO text of the function(s) (imports JAX).")
@click.option("--debug-info", is_flag=True, help="With --mlir: keep source locations in the text.")
@function_option
@isolate_options
@debug_option
def command(artifact, as_json, mlir, debug_info, function, isolate, memory_limit, time_limit, debug):
    """Show what an artifact holds, without importing JAX."""
    if isolate:
        ctx = click.get_current_context()
        errors.run(lambda: run_isolated(ctx, str(artifact), memory_limit, time_limit), debug=debug, as_json=as_json)
        return

    def body():
        from jaxport.artifact.container import open_artifact
        from jaxport.artifact.manifest import function_names

        with open_artifact(artifact) as art:
            art.verify_all()
            m = art.manifest
            names = function_names(m, function)
            if mlir:
                from jaxport.artifact.payload import module_bytes
                from jaxport.module_scan import module_text

                for fname in names:
                    payload = art.read(m["functions"][fname]["payload"])
                    if len(names) > 1:
                        print(f"// function {plain(fname)}")
                    # Source locations and string attributes in the text come from the artifact.
                    print(plain_lines(module_text(module_bytes(payload, art.path, fname), debug_info=debug_info)))
                return
            if as_json:
                render.print_json(m)
                return
            _render(art, names)

    errors.run(body, debug=debug, as_json=as_json)


_MAX_ROWS = 24  # rows of a table before it is cut (the JSON has everything)


def _printable(node):
    """The manifest with every string's control characters escaped (``\\x1b``): its text comes from the artifact,
    which may be hostile, and is shown on a terminal."""
    if isinstance(node, str):
        return plain(node)
    if isinstance(node, dict):
        return {_printable(k): _printable(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_printable(v) for v in node]
    return node


def _render(art, names):
    from rich.table import Table

    from jaxport.artifact.bounds import Bounds
    from jaxport.artifact.compat import window
    from jaxport.artifact.summary import array_type, derivation_text, human_bytes, signature

    m = _printable(art.manifest)
    out = render.stdout()
    meta = m.get("metadata", {})
    prod = m["producer"]
    title = meta.get("name") or art.path.name
    if meta.get("version"):
        title += f" {meta['version']}"
    out.print(f"[bold]{escape(title)}[/]  ({escape(str(art.path))}, {human_bytes(art.size)}, "
              f"{len(art.members)} members, sha256 verified)")
    if meta.get("description"):
        out.print(f"  {meta['description']}", markup=False)
    if meta.get("labels"):
        out.print("  labels: " + ", ".join(f"{k}={v}" for k, v in meta["labels"].items()), markup=False)
    out.print(f"  format {m['format_version']}, written by jaxport {prod['jaxport']} with jax {prod['jax']}, "
              f"jaxlib {prod['jaxlib']}", markup=False)
    out.print(f"  compatibility: {window(prod['jax']).sentence()}", markup=False)
    for fname in names:
        f = m["functions"][fname]
        out.print()
        out.print(f"[bold cyan]{escape(fname)}[/]: {escape(signature(fname, f))}")
        cc = f["calling_convention_version"]
        rng = prod.get("calling_convention_range")
        rng_text = f" (writer supports {rng[0]}..{rng[1]})" if isinstance(rng, list) and len(rng) == 2 else ""
        out.print(f"  entry point {f.get('entrypoint')}; platforms {', '.join(f['platforms'])}; calling convention "
                  f"{cc}{rng_text}; StableHLO {f.get('stablehlo_version')}; devices {f.get('nr_devices', 1)}",
                  markup=False)
        _render_parallel(out, f)
        t = Table(title="inputs", title_justify="left", show_edge=False)
        for col in ("name", "type", "sharding"):
            t.add_column(col)
        for a in f["inputs"][:_MAX_ROWS]:
            t.add_row(escape(a["name"]), escape(array_type(a)), escape(_sharding(a)))
        out.print(t)
        if len(f["inputs"]) > _MAX_ROWS:
            out.print(f"  ... and {len(f['inputs']) - _MAX_ROWS} more inputs (inspect --json lists them all)",
                      markup=False)
        t = Table(title="outputs", title_justify="left", show_edge=False)
        for col in ("name", "type", "sharding"):
            t.add_column(col)
        for a in f["outputs"][:_MAX_ROWS]:
            t.add_row(escape(a["name"]), escape(array_type(a)), escape(_sharding(a)))
        out.print(t)
        if len(f["outputs"]) > _MAX_ROWS:
            out.print(f"  ... and {len(f['outputs']) - _MAX_ROWS} more outputs (inspect --json lists them all)",
                      markup=False)
        if f.get("dims"):
            t = Table(title="dimension variables", title_justify="left", show_edge=False)
            for col in ("name", "min", "max", "derived"):
                t.add_column(col)
            for dn, d in f["dims"].items():
                b = Bounds.of(d)
                t.add_row(escape(dn), str(b.lo), "-" if b.hi is None else str(b.hi), escape(derivation_text(dn, d)))
            out.print(t)
        if f.get("constraints"):
            out.print("  constraints: " + "; ".join(f["constraints"]), markup=False)
        checks = f.get("shape_assertions", [])
        out.print(f"  shape checks: {len(checks)} in the wrapped main", markup=False)
        for msg in checks:
            out.print(f"    - {_short_assertion(msg)}", markup=False)
        if f.get("custom_calls"):
            t = Table(title="custom calls", title_justify="left", show_edge=False)
            for col in ("target", "count", "stability"):
                t.add_column(col)
            for c in f["custom_calls"]:
                style = "green" if c.get("stability") == "guaranteed" else "yellow"
                stability = escape(str(c.get("stability")))
                t.add_row(escape(c["target"]), str(c.get("count", "")), f"[{style}]{stability}[/]")
            out.print(t)
        else:
            out.print("  custom calls: none", markup=False)
        dsc = f.get("disabled_safety_checks") or []
        out.print(f"  disabled safety checks: {', '.join(dsc) if dsc else 'none'}", markup=False)
        eff = f.get("effects") or {}
        effects = (eff.get("ordered") or []) + (eff.get("unordered") or [])
        out.print(f"  effects: {', '.join(effects) if effects else 'none'}", markup=False)
        bound = f.get("weights") or []
        if bound:
            tensors = (m.get("weights") or {}).get("tensors", {})
            total = sum(tensors[n]["nbytes"] for n in bound if n in tensors)
            out.print(f"  bound weights: {len(bound)} tensors, {human_bytes(total)} (supplied by the artifact)",
                      markup=False)
        consts = f.get("embedded_constants") or {}
        if consts.get("bytes"):
            out.print(f"  embedded constants: {consts.get('count')} totalling {human_bytes(consts['bytes'])}",
                      markup=False)
    _render_weights(out, m)
    out.print()
    t = Table(title="members", title_justify="left", show_edge=False)
    for col in ("name", "size", "sha256"):
        t.add_column(col)
    for name, info in m["members"].items():
        t.add_row(escape(name), human_bytes(info["size"]), info["sha256"][:16] + "…")
    out.print(t)


def _render_weights(out, m):
    from rich.table import Table

    from jaxport.artifact.summary import array_type, human_bytes

    tensors = (m.get("weights") or {}).get("tensors") or {}
    if not tensors:
        return
    users: dict[str, list[str]] = {}
    for fname, f in m["functions"].items():
        for n in f.get("weights") or []:
            users.setdefault(n, []).append(fname)
    total = sum(t["nbytes"] for t in tensors.values())
    by_dtype: dict[str, int] = {}
    for t in tensors.values():
        by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + t["nbytes"]
    out.print()
    out.print(f"[bold]weights[/]: {len(tensors)} tensors, {human_bytes(total)} ("
              + ", ".join(f"{escape(d)} {human_bytes(b)}" for d, b in sorted(by_dtype.items(), key=lambda x: -x[1]))
              + ")")
    t = Table(title="largest tensors", title_justify="left", show_edge=False)
    for col in ("name", "type", "size", "used by"):
        t.add_column(col)
    largest = sorted(tensors.items(), key=lambda kv: (-kv[1]["nbytes"], kv[0]))[:10]
    for name, info in largest:
        t.add_row(escape(name), escape(array_type(info)), human_bytes(info["nbytes"]),
                  escape(", ".join(users.get(name, [])) or "-"))
    out.print(t)
    if len(tensors) > len(largest):
        out.print(f"  ... and {len(tensors) - len(largest)} more (inspect --json lists them all)", markup=False)


def _short_assertion(msg: str) -> str:
    """The sentence that says what is checked, without JAX's boilerplate."""
    text = msg.replace("Input shapes do not match the polymorphic shapes specification. ", "")
    text = text.replace("Input shapes do not match the symbolic shape constraint ", "constraint ")
    cut = text.find(" Using the following polymorphic shapes")
    return (text[:cut] if cut > 0 else text)[:200]


def _sharding(a):
    """``P('data', None)  {devices=[4,1,2]<=[8] ...}`` for a sharded array, the HLO text alone, or ``-``."""
    from jaxport.sharding import text

    if "partition_spec" in a:
        hlo = a.get("sharding")
        return text(a["partition_spec"]) + (f"  {hlo}" if hlo else "")
    return a.get("sharding") or "-"


def _render_parallel(out, f):
    """The mesh and the bound tensors' partitioning of a sharded function, and the derivatives it carries."""
    from jaxport.sharding import mesh_devices, mesh_text, text

    mesh = f.get("mesh")
    if mesh:
        out.print(f"  mesh {mesh_text(mesh)} ({mesh_devices(mesh)} devices); run it where JAX has that many devices "
                  f"(call --host-devices {mesh_devices(mesh)} on a CPU)", markup=False)
        specs = f.get("weights_partition_specs") or {}
        sharded = {n: s for n, s in specs.items() if s and any(e is not None for e in s)}
        if sharded:
            shown = ", ".join(f"{n} {text(s)}" for n, s in list(sharded.items())[:_MAX_ROWS])
            more = f", and {len(sharded) - _MAX_ROWS} more" if len(sharded) > _MAX_ROWS else ""
            rest = len(specs) - len(sharded)
            out.print(f"  sharded weights: {shown}{more}" + (f"; {rest} replicated" if rest else ""), markup=False)
    order = f.get("vjp_order", 0)
    if order:
        out.print(f"  derivatives: VJPs up to order {order} (jax.grad through jaxport.load, call --vjp)",
                  markup=False)
    else:
        out.print("  derivatives: none (export with --vjp-order 1 to differentiate it)", markup=False)
