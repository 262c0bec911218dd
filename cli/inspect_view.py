"""What ``jaxport inspect`` shows of an artifact's manifest: a document of lines and tables (``render.Document``).

No click and no JAX here: the command line's fast path (``main._inspect_fast``) prints ``inspect ARTIFACT`` and
``inspect --json ARTIFACT`` through :func:`output` without importing click, and rich only when a table needs it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from . import render
from .render import plain


def document(art, function: str | None, bundle_path=None, verified=None) -> render.Document:
    """The human view of an open, verified artifact (``function``: only that one); its signature line describes the
    bundle at ``bundle_path`` (default: ``ARTIFACT.sig``), or ``verified``, the signature check that passed."""
    from jaxport.artifact.manifest import function_names

    return _render(art, function_names(art.model, function), bundle_path, verified)


def signature_line(art, bundle_path=None, verified=None) -> str:
    """Whether a signature sits beside the artifact and by whom, unverified unless ``verified`` is given."""
    from jaxport.artifact.signing.bundle import describe

    if verified is not None:
        return f"  signature: {plain(str(verified.signature))}: verified, {verified.method}" \
               + (f" {verified.key_id[:16]}" if verified.key_id else "") + f" ({plain(verified.signer)})"
    found = describe(art.path, bundle_path)
    if found is None:
        return "  signature: none beside it (jaxport sign signs it)"
    if isinstance(found, str):
        return f"  signature: {plain(found)}"
    name = art.path.name
    signs = "" if found.subject == name else f", for a file named {plain(repr(found.subject))}, not this one"
    return (f"  signature: {plain(str(found.path))}, signed by {plain(found.signer_text())}{signs}; not verified "
            f"(jaxport check ARTIFACT --signature-key PUBLIC.pem verifies it)")


def output(artifact: str, as_json: bool, function: str | None) -> str | None:
    """All that ``inspect [--json] [--function NAME] ARTIFACT`` prints on stdout, for the fast path: None when
    only rich can render it here (see ``render.Document.render_plain``). Raises what opening, verifying or
    selecting raises; the caller then runs the command the usual way, which reports it."""
    from jaxport.artifact.container import open_artifact
    from jaxport.artifact.manifest import function_names

    with open_artifact(artifact) as art:
        art.verify_all()
        if as_json:
            function_names(art.model, function)  # an unknown --function is an error with --json too
            return json.dumps(art.manifest, indent=2) + "\n"  # the manifest's JSON as stored, unknown fields too
        return document(art, function).render_plain(sys.stdout, os.environ)


_MAX_ROWS = 24  # rows of a table before it is cut (the JSON has everything)


def _may_hold_unprintable(raw: bytes) -> bool:
    """Whether a string of the manifest with the JSON bytes ``raw`` may hold a character to escape: not when the bytes
    are ASCII without a backslash (so no escape sequence) or DEL, since strict JSON, as the reader parses it, holds no
    raw control character in a string. The usual manifest then skips :func:`_printable` (a copy of every record)."""
    return not raw.isascii() or b"\\" in raw or b"\x7f" in raw


def _printable(node):
    """The manifest's records with every string's control characters escaped (``\\x1b``): its text comes from the
    artifact, which may be hostile, and is shown on a terminal."""
    if isinstance(node, str):
        return node if node.isascii() and node.isprintable() else plain(node)  # plain keeps printable ASCII as is
    if isinstance(node, Mapping):
        return {_printable(k): _printable(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_printable(v) for v in node)
    fields = getattr(type(node), "__match_args__", None)
    if fields is not None:  # a record of the format
        return type(node)(*(_printable(getattr(node, n)) for n in fields))
    return node


def _render(art, names, bundle_path=None, verified=None) -> render.Document:
    from jaxport.artifact.summary import array_type, derivation_text, human_bytes, range_text, signature
    from jaxport.artifact.window.compat import reach, serializer_version, window

    m = _printable(art.model) if _may_hold_unprintable(art.manifest_bytes) else art.model
    out = render.Document()
    meta, prod = m.metadata, m.producer
    title = meta.name or plain(art.path.name)
    if meta.version:
        title += f" {meta.version}"
    out.line((title, "bold"), f"  ({plain(str(art.path))}, {human_bytes(art.size)}, {len(art.members)} members, "
                              f"sha256 verified)")
    if meta.description:
        out.line(f"  {meta.description}")
    if meta.labels:
        out.line("  labels: " + ", ".join(f"{k}={v}" for k, v in meta.labels.items()))
    out.line(f"  format {m.format_version}, written by jaxport {prod.jaxport} with jax {prod.jax}, "
             f"jaxlib {prod.jaxlib}")
    written = f"written by jax {prod.jax} for" if prod.for_jax else "written with"
    out.line(f"  compatibility: {window(serializer_version(prod)).sentence(written=written)}")
    out.line(f"  reach: {reach(prod, [f.stablehlo_version for f in m.functions.values()]).sentence()}")
    out.line(signature_line(art, bundle_path, verified))
    for fname in names:
        f = m.functions[fname]
        out.line()
        out.line((fname, "bold cyan"), f": {plain(signature(fname, f))}")
        rng = prod.calling_convention_range
        rng_text = f" (writer supports {rng[0]}..{rng[1]})" if rng is not None else ""
        out.line(f"  entry point {f.entrypoint}; platforms {', '.join(f.platforms)}; calling convention "
                 f"{f.calling_convention_version}{rng_text}; StableHLO {f.stablehlo_version}; devices {f.nr_devices}")
        _render_parallel(out, f)
        ranged = any(i.range is not None for i in f.inputs)  # a range column only where an input has one
        for kind, arrays in (("inputs", f.inputs), ("outputs", f.outputs)):
            shows_range = ranged and kind == "inputs"
            t = render.Table(kind, ("name", "type", *(("range",) if shows_range else ()), "sharding"))
            for a in arrays[:_MAX_ROWS]:
                shown = (plain(range_text(a) or "-"),) if shows_range else ()
                t.add_row(a.name, plain(array_type(a)), *shown, plain(_sharding(a, f.mesh is not None)))
            out.table(t)
            if len(arrays) > _MAX_ROWS:
                out.line(f"  ... and {len(arrays) - _MAX_ROWS} more {kind} (inspect --json lists them all)")
        if f.dims:
            t = render.Table("dimension variables", ("name", "min", "max", "derived"))
            for dn, d in f.dims.items():
                b = d.bounds
                t.add_row(dn, str(b.lo), "-" if b.hi is None else str(b.hi), plain(derivation_text(dn, d)))
            out.table(t)
        if f.constraints:
            out.line("  constraints: " + "; ".join(f.constraints))
        out.line(f"  shape checks: {len(f.shape_assertions)} in the wrapped main")
        repeats: dict[str, int] = {}
        for msg in f.shape_assertions:  # an imported program checks what its own main checked again: shown once
            shown = _short_assertion(msg)
            repeats[shown] = repeats.get(shown, 0) + 1
        for shown, times in repeats.items():
            out.line(f"    - {shown}" + (f" ({times} times)" if times > 1 else ""))
        if f.custom_calls:
            t = render.Table("custom calls", ("target", "count", "stability"))
            for c in f.custom_calls:
                style = "green" if c.stability == "guaranteed" else "yellow"
                t.add_row(c.target, "" if c.count is None else str(c.count), (plain(str(c.stability)), style))
            out.table(t)
        else:
            out.line("  custom calls: none")
        dsc = f.disabled_safety_checks
        out.line(f"  disabled safety checks: {', '.join(dsc) if dsc else 'none'}")
        effects = f.effects.ordered + f.effects.unordered
        out.line(f"  effects: {', '.join(effects) if effects else 'none'}")
        if f.weights:
            total = sum(m.tensors[n].nbytes for n in f.weights if n in m.tensors)
            out.line(f"  bound weights: {len(f.weights)} tensors, {human_bytes(total)} (supplied by the artifact)")
        consts = f.embedded_constants
        if consts.bytes:
            out.line(f"  embedded constants: {consts.count} totalling {human_bytes(consts.bytes)}")
    _render_weights(out, m)
    out.line()
    t = render.Table("members", ("name", "size", "sha256"))
    for name, info in m.members.items():
        t.add_row(name, human_bytes(info.size), info.sha256[:16] + "…")
    out.table(t)
    return out


def _render_weights(out, m):
    from jaxport.artifact.summary import array_type, human_bytes

    tensors = m.tensors
    if not tensors:
        return
    users: dict[str, list[str]] = {}
    for fname, f in m.functions.items():
        for n in f.weights:
            users.setdefault(n, []).append(fname)
    total = sum(t.nbytes for t in tensors.values())
    by_dtype: dict[str, int] = {}
    for t in tensors.values():
        by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.nbytes
    out.line()
    out.line(("weights", "bold"), f": {len(tensors)} tensors, {human_bytes(total)} ("
             + ", ".join(f"{d} {human_bytes(b)}" for d, b in sorted(by_dtype.items(), key=lambda x: -x[1])) + ")")
    t = render.Table("largest tensors", ("name", "type", "size", "used by"))
    largest = sorted(tensors.items(), key=lambda kv: (-kv[1].nbytes, kv[0]))[:10]
    for name, info in largest:
        t.add_row(name, plain(array_type(info)), human_bytes(info.nbytes), ", ".join(users.get(name, [])) or "-")
    out.table(t)
    if len(tensors) > len(largest):
        out.line(f"  ... and {len(tensors) - len(largest)} more (inspect --json lists them all)")


def _short_assertion(msg: str) -> str:
    """The sentence that says what is checked, without JAX's boilerplate."""
    text = msg.replace("Input shapes do not match the polymorphic shapes specification. ", "")
    text = text.replace("Input shapes do not match the symbolic shape constraint ", "constraint ")
    cut = text.find(" Using the following polymorphic shapes")
    return (text[:cut] if cut > 0 else text)[:200]


def _sharding(a, sharded):
    """``P('data', None)  {devices=[4,1,2]<=[8] ...}`` for an array of a sharded function, the HLO text alone, or
    ``-``."""
    if sharded:
        from jaxport.sharding import text  # only for a sharded function: it imports more than inspect needs

        return text(a.partition_spec) + (f"  {a.sharding}" if a.sharding else "")
    return a.sharding or "-"


def _render_parallel(out, f):
    """The mesh and the bound tensors' partitioning of a sharded function, and the derivatives it carries."""
    mesh = f.mesh
    if mesh is not None:
        from jaxport.sharding import mesh_devices, mesh_text, text

        out.line(f"  mesh {mesh_text(mesh)} ({mesh_devices(mesh)} devices); run it where JAX has that many devices "
                 f"(call --host-devices {mesh_devices(mesh)} on a CPU)")
        specs = f.weights_partition_specs or {}
        sharded = {n: s for n, s in specs.items() if s and any(e is not None for e in s)}
        if sharded:
            shown = ", ".join(f"{n} {text(s)}" for n, s in list(sharded.items())[:_MAX_ROWS])
            more = f", and {len(sharded) - _MAX_ROWS} more" if len(sharded) > _MAX_ROWS else ""
            rest = len(specs) - len(sharded)
            out.line(f"  sharded weights: {shown}{more}" + (f"; {rest} replicated" if rest else ""))
    if f.vjp_order:
        out.line(f"  derivatives: VJPs up to order {f.vjp_order} (jax.grad through jaxport.load, call --vjp)")
    else:
        out.line("  derivatives: none (export with --vjp-order 1 to differentiate it)")
