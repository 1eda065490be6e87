"""The one exception type meant for people.

Anything raised as :class:`CpasimError` reaches the user as a single line on
stderr and exit status 2 (see :mod:`cpasim.cli`).  Its message must name the
key, record or file at fault and say what was expected.
"""


class CpasimError(Exception):
    """A user-facing error: bad scenario, bad trace, bad command-line value."""


def printable(text: object, limit: int = 200) -> str:
    """``text`` as an error line may quote it: control characters (newlines, terminal
    escapes) escaped, and at most ``limit`` characters, the cut marked."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text)[: limit + 1])
    if len(shown) > limit:
        shown = shown[:limit] + f"... ({len(str(text))} characters)"
    return shown
