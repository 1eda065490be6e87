"""The ``cpasim`` command line.

Each sub-command lives in its own module below this package and registers
itself on :data:`app`; this module only assembles them and turns
:class:`~cpasim.errors.CpasimError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys

import typer

from cpasim.errors import CpasimError, one_line

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


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``.
    from cpasim.cli import commands  # noqa: F401


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
