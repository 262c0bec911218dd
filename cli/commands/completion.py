"""``jaxport completion SHELL``: print the shell completion script (click's), to source from the shell's profile."""

from __future__ import annotations

import click

#: How each shell installs the script; shown by ``--help`` and in the README.
INSTALL = {
    "bash": "jaxport completion bash > ~/.jaxport-complete.bash; echo '. ~/.jaxport-complete.bash' >> ~/.bashrc",
    "zsh": "jaxport completion zsh > ~/.jaxport-complete.zsh; echo '. ~/.jaxport-complete.zsh' >> ~/.zshrc",
    "fish": "jaxport completion fish > ~/.config/fish/completions/jaxport.fish",
}


@click.command("completion")
@click.argument("shell", type=click.Choice(sorted(INSTALL)))
def command(shell):
    """Print the completion script for SHELL (bash, zsh or fish) on stdout.

    Completes commands, options, the values of options that take names (--platform, --target, --runtime,
    --fail-on, ...) and file arguments. Install it once: write the script to a file and source that
    file from the shell's profile (~/.bashrc, ~/.zshrc); fish loads its completions directory by itself.

    \b
    Examples:
      jaxport completion bash > ~/.jaxport-complete.bash && echo '. ~/.jaxport-complete.bash' >> ~/.bashrc
      jaxport completion zsh > ~/.jaxport-complete.zsh && echo '. ~/.jaxport-complete.zsh' >> ~/.zshrc
      jaxport completion fish > ~/.config/fish/completions/jaxport.fish
    """
    from click.shell_completion import get_completion_class

    from ..group import cli

    cls = get_completion_class(shell)
    assert cls is not None  # every choice is one of click's shells
    click.echo(cls(cli, {}, "jaxport", "_JAXPORT_COMPLETE").source())
