"""The ``jaxport`` command line. Commands load lazily so that ``jaxport --help`` does not import JAX."""

from __future__ import annotations

import gc
import importlib
import sys
from typing import Any

import click

from jaxport._version import __version__

_COMMANDS = {
    "export": ("jaxport_cli.commands.export", "Export a JAX function into an artifact, from a YAML shape spec."),
    "inspect": ("jaxport_cli.commands.inspect", "Show what an artifact holds, without importing JAX."),
    "call": ("jaxport_cli.commands.call", "Run an artifact on real inputs, checking them first."),
    "verify": ("jaxport_cli.commands.verify", "Run an artifact and the live function on the same inputs; compare."),
    "diff": ("jaxport_cli.commands.diff", "Compare two artifacts; classify each difference as breaking or not."),
    "check": ("jaxport_cli.commands.check", "Check an artifact against a policy (platforms, custom calls, ...)."),
    "compile": ("jaxport_cli.commands.compile", "Compile an artifact's function into an IREE module (.vmfb)."),
    "extract": ("jaxport_cli.commands.extract", "Write parts of an artifact for other tools: weights, JAX payload, "
                                                "StableHLO."),
    "import": ("jaxport_cli.commands.import_", "Import a StableHLO module written by another producer into an "
                                               "artifact."),
}


class LazyGroup(click.Group):
    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Click's ``main``, with usage errors reported like every other error: one ``error[usage]: ...`` line on
        stderr (and the JSON error object with ``--json``), exit 2, instead of click's usage block."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # bare ``jaxport``: the help, as click shows it
                e.show()
                sys.exit(e.exit_code)
            from .errors import report_usage_error

            report_usage_error(e, as_json="--json" in argv)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _COMMANDS:
            return None
        module = importlib.import_module(_COMMANDS[name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: Any) -> None:
        rows = [(name, help_) for name, (_, help_) in sorted(_COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="jaxport")
def cli() -> None:
    """jaxport: turn a JAX function into a versioned, portable, verifiable artifact.

    Exit codes: 0 ok, 1 internal error, 2 usage, 3 spec, 4 entry point, 5 export, 6 policy, 7 format,
    8 integrity, 9 input, 10 platform, 11 output, 12 verification failed, 13 diff found changes, 14 policy check
    failed. See specs/CLI.md.
    """


def main() -> None:
    try:
        cli(prog_name="jaxport")
    finally:
        # Python's final garbage collection walks every object JAX created (about half a second after
        # `import jax`); a process that is about to exit does not need it. IREE's bindings report objects left
        # uncollected as leaks, so a process that used IREE collects as usual.
        if not any(name.startswith("iree.") for name in sys.modules):
            gc.freeze()
