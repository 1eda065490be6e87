"""The ``cpasim`` command line.

Each sub-command lives in its own module below this package and registers
itself on :data:`app`; this module only assembles them and turns
:class:`~cpasim.errors.CpasimError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys

import typer

from cpasim.errors import CpasimError

app = typer.Typer(
    name="cpasim",
    help="What-if simulator of the network stack: simulate, find the critical path, predict.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """What-if simulator of the network stack: simulate, find the critical path, predict."""


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``.
    from cpasim.cli import commands  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    _register()
    try:
        app(args=argv, standalone_mode=True)
    except CpasimError as exc:
        print(f"cpasim: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
