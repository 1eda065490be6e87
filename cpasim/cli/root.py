"""The ``cpasim`` Typer application, before any command is added to it.

Each sub-command lives in its own module of :mod:`cpasim.cli` and registers
itself on :data:`app`.  It lives apart from :func:`cpasim.cli.main`, so that the
entry point can take charge of Ctrl-C and SIGTERM before Typer (and everything a
command needs) is imported.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="cpasim",
    help="What-if simulator of the network stack: simulate, find the critical path, predict.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from cpasim import __version__

        typer.echo(f"cpasim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print cpasim's version and exit.",
    ),
) -> None:
    """What-if simulator of the network stack: simulate, find the critical path, predict."""
