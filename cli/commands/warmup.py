"""``jaxport warmup``: check an artifact's program and compile it for given shapes into the user's cache."""

from __future__ import annotations

import click

from .. import errors, render
from ..devices import apply, device_options
from ..options import DEFAULT_CACHE, debug_option, dim_option, json_option, load_options
from ..render import plain


@click.command("warmup")
@click.argument("artifact", type=click.Path())
@dim_option("Values of a dimension variable to compile for (e.g. batch=1,8,32); repeat for each variable. "
            "Several values: every combination.")
@load_options(omit=("runtime", "verify_weights", "cache"), help={
    "cache_dir": f"The cache to fill: JAX's compilation cache and jaxport's check verdicts (default: {DEFAULT_CACHE}). "
                 f"Give the same directory to 'jaxport call --cache-dir' (or ship it as the default) where the "
                 f"artifact runs.",
    "allow_platform_mismatch": "Try to compile a function exported for other platforms than the local one."})
@device_options
@json_option
@debug_option
def command(artifact, dims, load, devices, as_json, debug):
    """Check an artifact's program and compile it ahead for the shapes of --dim, into the cache.

    A later 'jaxport call' (or a jaxport.load with the same JAX compilation cache) on this machine then starts no
    checking process and compiles nothing for those shapes: it fetches the compiled program. Several values of a
    dimension (--dim batch=1,8,32) compile every combination. For a container image, warm up at build time and
    ship the cache directory; compiled programs are native code for this jaxlib and device kind, and are never
    put inside an artifact.

    \b
    Examples:
      jaxport warmup mlp.jaxport --dim batch=1,8,32
      jaxport warmup mlp.jaxport --dim batch=8 --cache-dir build/xla-cache
    """

    def body():
        apply(devices)  # before JAX starts
        from jaxport.isolation import isolate
        from jaxport.run.cache import compilation_cache, default_cache_dir
        from jaxport.run.load import check_signature, load_with

        directory = load.cache_dir or default_cache_dir()
        check_signature(artifact, load)  # --require-signature: before the artifact is read
        digests = _payload_digests(artifact)
        verdicts_before = {name: isolate.has_verdict(d, directory) for name, d in digests.items()}
        with compilation_cache(directory):  # the check's verdict goes there too
            loaded = load_with(artifact, load, cache_dir=directory)
        done = loaded.warmup(dims, cache_dir=directory)
        for note in loaded.notes:  # a program older than this JAX's window, read by jaxport
            render.stderr().print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        check = ("fetched" if verdicts_before[loaded.function] else
                 "checked, now cached" if isolate.has_verdict(digests[loaded.function], directory) else "checked")
        if as_json:
            render.print_json({"artifact": str(artifact), "function": loaded.function, "cache_dir": str(directory),
                               "platform": loaded.platform, "check": {"verdict": "passed", "cache": check},
                               "signatures": [w.as_dict(loaded.input_names) for w in done]})
            return
        _render(artifact, loaded, done, directory, check)

    errors.run(body, debug=debug, as_json=as_json)


def _payload_digests(artifact):
    """The sha256 of each function's program, by function name: what a check's verdict is about."""
    from jaxport.artifact.container import open_artifact

    with open_artifact(artifact) as art:
        return {name: art.model.members[f.payload].sha256 for name, f in art.model.functions.items()}


#: The line that gives the check's verdict, by where it came from.
CHECK_LINES = {
    "fetched": "check: passed (its verdict was already in the cache: no check ran)",
    "checked, now cached": "check: passed; its verdict is now in the cache, so a call with this cache starts no "
                           "check",
    "checked": "check: passed; its verdict could not be written to the cache, so each process checks again",
}


def _render(artifact, loaded, done, directory, check):
    from jaxport.artifact.summary import type_text

    out = render.Document()
    fetched = sum(1 for w in done if w.compilation.cache_hit)
    out.line("Warmed up ", (plain(loaded.function), "bold cyan"), f" of {plain(str(artifact))} on "
             f"{plain(loaded.platform)}: {len(done)} shape signature{'s' if len(done) != 1 else ''} in "
             f"{plain(str(directory))} ({len(done) - fetched} compiled, {fetched} already there)")
    out.line(CHECK_LINES[check])
    t = render.Table("signatures", ("dimensions", "inputs", "lower", "compile", "cache"))
    for w in done:
        c = w.compilation
        shown = ", ".join(f"{plain(n)}: {type_text(dt, shape)}"
                          for n, (shape, dt) in zip(loaded.input_names, w.key))
        state = "fetched" if c.cache_hit else "compiled, now cached" if c.cache_hit is False else "compiled"
        t.add_row(", ".join(f"{k}={v}" for k, v in w.dims.items()) or "-", shown, _seconds(c.lower_seconds),
                  _seconds(c.seconds), state)
    out.table(t)
    out.print()


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.0f} ms"
