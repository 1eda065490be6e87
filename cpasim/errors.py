"""The one exception type meant for people, and how values appear in its messages.

Anything raised as :class:`CpasimError` reaches the user as a single line on
stderr and exit status 2 (see :mod:`cpasim.cli`).  Its message must name the
key, record or file at fault and say what was expected.

Values quoted in a message come from files a user may not have written (a
trace's names, a scenario's strings): :func:`shown` makes them safe to print —
control characters (newlines, terminal escapes) escaped, long values cut — and
:func:`one_line` does the same for a whole message as it is printed.  Human
output that is not an error (tables, listings) prints such names through
:func:`printable`, which escapes them the same way and cuts nothing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

#: Characters of a quoted value shown before it is cut.
SHOWN_LIMIT = 80
#: Characters of a whole error line shown before its middle is cut.
LINE_LIMIT = 2000

# C0 and C1 control characters, DEL, the Unicode line/paragraph separators, the
# bidirectional overrides and isolates (they reorder what a terminal shows), and
# lone surrogates (a file name of undecodable bytes; no encoding can print them).
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


class CpasimError(Exception):
    """A user-facing error: bad scenario, bad trace, bad command-line value."""


def _escape(text: str) -> str:
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def printable(value: object) -> str:
    """``value`` (its ``str``) fit for a terminal, whole: control characters (an
    escape sequence that would set the terminal's title, colours or cursor), line
    separators, bidirectional overrides and lone surrogates are written as Python
    escapes (``\\x1b``, ``\\u202e``, ``\\udcff``); everything else is left as it is.
    Every name from a file that reaches human output goes through it."""
    return _escape(value if isinstance(value, str) else str(value))


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """``value`` (its ``str``) fit for an error line: escaped, at most ``limit``
    characters of it, then how long it was."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return _escape(text[:limit]) + f"... ({len(text):,} characters)"
    return _escape(text)


def one_line(message: str, limit: int = LINE_LIMIT) -> str:
    """A whole message fit for one line on a terminal: escaped, its middle cut
    when it is longer than ``limit``."""
    text = _escape(message)
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]} ... ({len(text) - 2 * half:,} characters cut) ... {text[-half:]}"
    return text


def script_main(prog: str, main: Callable[..., int | None], *args) -> int:
    """Run ``main(*args)`` of a script outside the CLI (``bench/``, ``calibration/``)
    the way the CLI runs a command: a :class:`CpasimError` (a bad ``--duration``, a
    missing scenario, an unknown key) ends in one ``prog: error: ...`` line on stderr
    and status 2, Ctrl-C in status 130; otherwise ``main``'s status (None: 0).  For
    ``raise SystemExit(script_main(...))``."""
    try:
        code = main(*args)
    except CpasimError as exc:
        print(f"{prog}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return code or 0
