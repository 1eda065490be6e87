"""The ``cpasim`` Typer application, before any command is added to it.

Each sub-command lives in its own module of :mod:`cpasim.cli` and registers
itself on :data:`app`.  It lives apart from :func:`cpasim.cli.main`, so that the
entry point can take charge of Ctrl-C and SIGTERM before Typer (and everything a
command needs) is imported.
"""

from __future__ import annotations

import inspect

import typer
from typer.core import TyperCommand, TyperGroup


def _plain_flags(params: list) -> list:
    """A flag takes no value, so its help shows none (typer would label it ``<bool>``)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


def _paragraphs(text: str | None) -> str | None:
    """A docstring's paragraphs each as one line, for the help to wrap as it needs
    (typer keeps the source's line breaks, which then fall mid-sentence)."""
    if not text:
        return text
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n"))


class _PlainHelp:
    """Help as a person reads it: paragraphs rewrapped, flags without a value label."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["help"] = _paragraphs(kwargs.get("help"))
        super().__init__(*args, **kwargs)

    def get_params(self, ctx) -> list:
        return _plain_flags(super().get_params(ctx))


class _Command(_PlainHelp, TyperCommand):
    pass


class _Group(_PlainHelp, TyperGroup):
    pass


app = typer.Typer(
    cls=_Group,
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


def plain_help(typer_app: typer.Typer) -> None:
    """Every command and group of ``typer_app`` shows flags without a value label."""
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = _Command
    for group in typer_app.registered_groups:
        group.cls = _Group
        plain_help(group.typer_instance)
