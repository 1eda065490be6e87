"""The ``cpasim`` command line.

Each sub-command lives in its own module below this package and registers
itself on :data:`app`; this module only assembles them and turns
:class:`~cpasim.errors.CpasimError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import inspect
import sys

import typer
from typer.core import TyperCommand, TyperGroup

from cpasim.errors import CpasimError, one_line


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


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``.
    from cpasim.cli import commands  # noqa: F401

    _plain_help(app)


def _plain_help(typer_app: typer.Typer) -> None:
    """Every command and group of ``typer_app`` shows flags without a value label."""
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = _Command
    for group in typer_app.registered_groups:
        group.cls = _Group
        _plain_help(group.typer_instance)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    Every error a person can cause — a bad scenario, trace or option — ends in
    one ``cpasim: error: ...`` line on stderr and a non-zero exit (2 for bad
    input), never a traceback.
    """
    _register()
    try:
        code = app(args=argv, standalone_mode=False)
    except CpasimError as exc:
        _fail(str(exc), 2)
    except typer.Abort:
        _fail("aborted", 130)
    except KeyboardInterrupt:
        # Ctrl-C (a second one too) while a command cleans up: outputs already keep
        # what they held (cpasim.files), so one line is all there is to say.
        print("cpasim: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:
        # Usage errors (unknown option, missing argument, bad value) are click
        # exceptions; typer may vendor click, so recognise them by interface.
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _fail(exc.format_message() + hint, exc.exit_code)
    raise SystemExit(code if isinstance(code, int) else 0)


def _fail(message: str, status: int) -> None:
    print(f"cpasim: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(status) from None
