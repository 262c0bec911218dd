"""``jaxport warmup``: check an artifact's program and compile it for given shapes into the user's cache."""

from __future__ import annotations

import click

from .. import errors, render
from ..devices import apply, device_options
from ..options import (
    DEFAULT_CACHE,
    debug_option,
    dim_option,
    json_option,
    load_options,
    password_env_option,
    password_from,
    target_option,
)
from ..progress import stages as progress_stages
from ..render import plain
from .sign import render_vouch


@click.command("warmup")
@click.argument("artifact", type=click.Path())
@dim_option("Values of a dimension variable to compile for (e.g. batch=1,8,32); repeat for each variable. "
            "Several values: every combination.")
@load_options(omit=("runtime", "verify_weights", "cache", "check_ranges", "module_dir"), help={
    "cache_dir": f"The cache to fill: JAX's compilation cache and jaxport's check verdicts (default: {DEFAULT_CACHE}). "
                 f"Give the same directory to 'jaxport call --cache-dir' (or ship it as the default) where the "
                 f"artifact runs.",
    "allow_platform_mismatch": "Try to compile a function exported for other platforms than the local one."})
@target_option("Compile for this machine instead of the local one, here, without its devices (a TPU target needs "
               "libtpu: pip install 'jaxport[tpu]'; a GPU target JAX's CUDA plugin and ptxas: pip install "
               "'jaxport[cuda]'), and store each executable in the cache for it: on the target, "
               "call, serve, warmup and jaxport.load with that cache then compile nothing. Every function at every "
               "bucket (--dim, else the buckets 'jaxport compile' proposes from the spec's bounds); exit 10 when one "
               "does not compile or fit. Repeatable.")
@click.option("--sign", "sign_key", type=click.Path(), metavar="PRIVATE.pem",
              help="Then vouch, with this private key, for what the cache holds of the artifact (shipped executables, "
                   "check and padding verdicts): under --require-signature with its public half, nothing from the "
                   "cache is used without it. JAX's own cache entries cannot be vouched for: ship executables with "
                   "--target (cpu for this host).")
@password_env_option("With --sign: read the private key's password from environment variable VAR.")
@click.option("--retune", is_flag=True,
              help="On a GPU: compile again here, autotuned, every shape loaded from an executable compiled without "
                   "the GPU (warmup --target cuda-*, never autotuned), and replace its record in the cache, so that "
                   "later processes start with the autotuned one.")
@device_options
@json_option
@debug_option
def command(artifact, dims, load, targets, sign_key, password_env, retune, devices, as_json, debug):
    """Check an artifact's program and compile it ahead for the shapes of --dim, into the cache.

    A later 'jaxport call' (or a jaxport.load with the same JAX compilation cache) on this machine then starts no
    checking process and compiles nothing for those shapes: it fetches the compiled program. Several values of a
    dimension (--dim batch=1,8,32) compile every combination. For a container image, warm up at build time and
    ship the cache directory; compiled programs are native code for this jaxlib and device kind, and are never
    put inside an artifact. With --target, compile for another machine (a TPU or a GPU, from a CPU-only one): each
    bucket is reported compiled or failed, with XLA's message and its memory against the target's.

    \b
    Examples:
      jaxport warmup mlp.jaxport --dim batch=1,8,32
      jaxport warmup mlp.jaxport --dim batch=8 --cache-dir build/xla-cache
      jaxport warmup mlp.jaxport --target cpu --dim batch=1,8,32 --cache-dir build/shipped
    """

    def body():
        apply(devices)  # before JAX starts
        if password_env is not None and sign_key is None:
            raise click.UsageError("--password-env is the password of --sign's key; give --sign PRIVATE.pem.")
        password = password_from(password_env)
        if targets and retune:
            raise click.UsageError("--retune compiles again on this machine what was shipped for it; leave out "
                                   "--target (or run --retune where the executables run).")
        if targets:
            return _for_targets(artifact, targets, dims, load, as_json, (sign_key, password))
        from jaxport.isolation import isolate
        from jaxport.run.cache import compilation_cache, default_cache_dir
        from jaxport.run.load import load_by, open_checked

        directory = load.cache_dir or default_cache_dir()
        # --require-signature: opened once it verified, and everything read from that one opening
        with open_checked(artifact, load) as art, progress_stages(as_json) as stages:
            digests = {name: art.model.members[f.payload].sha256 for name, f in art.model.functions.items()}
            verdicts_before = {name: isolate.has_verdict(d, directory) for name, d in digests.items()}
            stages(f"loading {artifact}")
            with compilation_cache(directory) as held:  # the check's verdict goes there too
                loaded = load_by(art, load, held=held)
            done = loaded.warmup(dims, cache_dir=directory, progress=stages)
            if retune:
                stages("compiling again here, autotuned, what ran from executables compiled without the GPU")
            retuned = _retune(loaded, directory) if retune else None
        for note in loaded.notes:  # a program older than this JAX's window, read by jaxport
            render.stderr().print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        check = ("fetched" if verdicts_before[loaded.function] else
                 "checked, now cached" if isolate.has_verdict(digests[loaded.function], directory) else "checked")
        vouched = _vouch(artifact, directory, sign_key, password)
        if as_json:
            render.print_json({"artifact": str(artifact), "function": loaded.function, "cache_dir": str(directory),
                               "platform": loaded.platform, "check": {"verdict": "passed", "cache": check},
                               "signatures": [w.as_dict(loaded.input_names) for w in done],
                               **({"vouch": vouched.to_json()} if vouched else {}),
                               **({"retuned": retuned} if retuned is not None else {})})
            return
        _render(artifact, loaded, done, directory, check)
        _render_vouch(vouched)
        if retuned is not None:
            _render_retuned(retuned)

    errors.run(body, debug=debug, as_json=as_json)


def _retune(loaded, directory):
    """``--retune``: each shape loaded from a deviceless GPU executable compiled again here, as a JSON list."""
    from pathlib import Path

    from jaxport.run.compile.retune import retune

    done = retune(loaded, Path(directory))
    for note in done.notes:
        render.stderr().print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    return [{"inputs": {n: {"shape": list(shape), "dtype": dt} for n, (shape, dt) in zip(loaded.input_names, r.key)},
             "compile_s": r.seconds, "build": r.build, "executable": r.record} for r in done.retuned]


def _render_retuned(retuned):
    out = render.Document()
    if not retuned:
        out.line("retune: no shape ran from an executable compiled without the GPU; nothing compiled again")
    for r in retuned:
        shown = ", ".join(f"{plain(n)}: {v['dtype']}{v['shape']}" for n, v in r["inputs"].items())
        out.line(f"retuned {shown}: compiled again here ({plain(r['build'])}) in {_seconds(r['compile_s'])}"
                 + (f", record {plain(r['executable'])}" if r["executable"] else ""))
    out.print()


def _vouch(artifact, directory, key, password):
    """``--sign``: the vouch for the cache's entries of the artifact (None without it)."""
    if key is None:
        return None
    import jaxport

    return jaxport.vouch_cache(artifact, key, directory, password=password)


def _render_vouch(vouched):
    if vouched is None:
        return
    render_vouch(vouched, None, False)
    if not any(e.kind == "executable" for e in vouched.entries):
        render.stderr().print("note: no executable was vouched for: a required signature never uses JAX's own cache "
                              "entries (they cannot be vouched for one by one); warm up with --target (cpu for this "
                              "host) to ship executables it covers.", markup=False, highlight=False, soft_wrap=True)


def _for_targets(artifact, targets, dims, load, as_json, signing=(None, None)):
    """``warmup --target``: compile for each target and store the executables in the cache (and vouch for them
    with ``signing``'s key and password, when given)."""
    from jaxport.errors import PlatformError
    from jaxport.run.cache import default_cache_dir
    from jaxport.run.compile.aot import compile_targets

    directory = load.cache_dir or default_cache_dir()
    with progress_stages(as_json) as stages:
        reports = compile_targets(artifact, targets, options=load, dims=dims or None, cache_dir=directory,
                                  progress=stages)
    failed = [r for r in reports if r.failed]
    vouched = _vouch(artifact, directory, *signing) if not failed else None
    if as_json:
        render.print_json({"artifact": str(artifact), "cache_dir": str(directory),
                           "targets": [r.to_json() for r in reports],
                           **({"vouch": vouched.to_json()} if vouched else {})})
    else:
        for report in reports:
            render_target(report, stored=True)
        _render_vouch(vouched)
    if failed:
        errors.fail_after_result(PlatformError(failed[0].summary() + (
            f" ({len(failed)} targets failed)" if len(failed) > 1 else "")))


def render_target(report, *, stored):
    """A target's buckets as a table: compiled or failed, the memory needed against the target's, the record."""
    from jaxport.artifact.summary import type_text
    from jaxport.run.compile.aot import gib

    out = render.Document()
    t = report.target
    version = f", {report.platform_version}" if report.platform_version else ""
    out.line("Compiled ", (plain(report.artifact), "bold"), f" for {plain(t.name)} ({plain(t.description)}"
             f"{plain(version)}): {len(report.buckets) - len(report.failed)} of {len(report.buckets)} bucket"
             f"{'s' if len(report.buckets) != 1 else ''}" + (f", executables in {plain(report.cache_dir)}"
                                                             if stored and report.cache_dir else ""))
    table = render.Table("buckets", ("function", "dimensions", "inputs", "compile", "memory", "result"))
    for b in report.buckets:
        shown = ", ".join(f"{plain(n)}: {type_text(dt, shape)}" for n, (shape, dt) in zip(b.input_names, b.key))
        if b.needs is None:
            memory = "-"
        else:
            memory = gib(b.needs) + (f" of {gib(b.limit)}" if b.limit else "")
        result = ("stored" if b.record else "compiled") if b.ok else ("does not fit" if b.compiled else "failed")
        table.add_row(plain(b.function), ", ".join(f"{k}={v}" for k, v in b.dims.items()) or "-", shown,
                      _seconds(b.seconds), memory, result)
    out.table(table)
    for b in report.failed:
        dims = ", ".join(f"{k}={v}" for k, v in b.dims.items()) or "static shapes"
        out.line(("✗ ", "red"), f"{plain(b.function)} at {dims}: {plain(b.reason() or '')}")
    for note in report.notes:
        out.line(("note: ", "yellow"), plain(note))
    out.print()


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
        state = "shipped executable" if c.shipped else "fetched" if c.cache_hit else \
            "compiled, now cached" if c.cache_hit is False else "compiled"
        t.add_row(", ".join(f"{k}={v}" for k, v in w.dims.items()) or "-", shown, _seconds(c.lower_seconds),
                  _seconds(c.seconds), state)
    out.table(t)
    out.print()


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.0f} ms"
