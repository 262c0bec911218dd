"""The click group of the ``jaxport`` command line (``main.cli``): commands load lazily, from ``commands.COMMANDS``."""

from __future__ import annotations

import difflib
import importlib
import sys
from typing import Any

import click

from jaxport import __version__

from .commands import COMMANDS
from .files import refuse_empty_paths


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

            report_usage_error(e, as_json="--json" in argv, argv=argv)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                            list[str]]:
        """Click's, with the closest command named for a mistyped one, as click names the closest option."""
        name = args[0]
        if name not in COMMANDS and not name.startswith("-"):
            close = difflib.get_close_matches(name, sorted(COMMANDS), n=1)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(COMMANDS[name][0])
        return refuse_empty_paths(module.command)  # every file option: '' is a usage error

    def format_commands(self, ctx: click.Context, formatter: Any) -> None:
        rows = [(name, help_) for name, (_, help_) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="jaxport")
def cli() -> None:
    """jaxport: turn a JAX function into a versioned, portable, verifiable artifact.

    Exit codes: 0 ok, 1 internal error, 2 usage, 3 spec, 4 entry point, 5 export, 6 policy, 7 format,
    8 integrity, 9 input, 10 platform, 11 output, 12 verification failed, 13 diff found changes, 14 policy check
    failed, 15 crash (an --isolate child died or reached its limits; out of memory). See specs/CLI.md.
    """
