"""Running cpasim's command line from a test, and the processes a command leaves.

:func:`cli` runs one command in the test's own process and returns its exit
status and output (a traceback escapes and fails the test); :func:`session`
lists the live processes of a process session (a command started with
``start_new_session=True`` and every worker it started); :func:`at_call` does
something (sends a signal, raises Ctrl-C) at a chosen moment of a command.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

from cpasim.cli import main


def cli(*argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one in-process command; a traceback escapes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def session(sid: int) -> list[int]:
    """Live processes of the session ``sid`` (not zombies)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def at_call(monkeypatch, target, name: str, call: int, action: Callable[[], None]) -> None:
    """Run ``action()`` at the ``call``-th call of ``target.name``, before the call."""
    real = getattr(target, name)
    calls = 0

    def wrapped(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == call:
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, wrapped)
