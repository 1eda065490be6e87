"""Stopping a command: Ctrl-C, SIGTERM and SIGHUP end it the same way.

``kill``, ``timeout`` and batch schedulers send SIGTERM; a closed terminal sends
SIGHUP.  Left to the system, either ends the process where it stands: a
temporary file stays behind, a trace recorded so far is lost.  While a command
runs (:func:`handled`), each of them raises :class:`KeyboardInterrupt` in the
main thread, as Ctrl-C does, so every clean-up written for Ctrl-C runs for them
too: outputs keep what they held (:mod:`cpasim.files`), an interrupted run keeps
its partial trace, a sweep writes its finished rows and stops its workers.  The
command then ends with one line on stderr and status 128 + the signal's number
(:func:`exit_status`): 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP — what a
shell reports for a process the signal ended.

A signal the process started with ignored (``nohup`` ignores SIGHUP, a
background job SIGINT) stays ignored.  Once the command is over
(:func:`exit_at_once`), a signal ends the process at once with that status:
nothing is left to clean up, and the interpreter's own shutdown must not print
an interrupted clean-up of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

#: The signals that stop a command as Ctrl-C does.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: int | None = None  # the first stop signal of this command
_reported = False  # the command said itself that it was interrupted


class Terminated(KeyboardInterrupt):
    """A stop signal other than SIGINT; ``signum`` is its number."""

    def __init__(self, signum: int):
        super().__init__(signum)  # (the args rebuild it: the model's kernel re-raises so)
        self.signum = signum


def _stop(signum: int, frame) -> None:
    global _received
    if _received is None:
        _received = signum
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)


def received() -> int | None:
    """The first stop signal received since :func:`handled` began (None: none)."""
    return _received


def exit_status() -> int:
    """128 + the signal that stopped the command; 130 (Ctrl-C) for an interrupt
    that came without a signal."""
    return 128 + (_received or signal.SIGINT)


def report(message: str) -> None:
    """Say on stderr how the command was interrupted (what it kept); the command line
    then adds no line of its own."""
    global _reported
    _reported = True
    print(message, file=sys.stderr)


def reported() -> bool:
    return _reported


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Within: the stop signals raise :class:`KeyboardInterrupt`; after, the handlers
    found are back.  Outside the main thread, signals are left alone."""
    global _received, _reported
    _received, _reported = None, False
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in STOP_SIGNALS:
        found = signal.getsignal(signum)
        if found is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, found in previous.items():
            signal.signal(signum, found)


def _exit_now(signum: int, frame) -> None:
    for stream in (sys.stdout, sys.stderr):  # what the command printed is not lost
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(128 + signum)


def exit_at_once() -> None:
    """For the rest of the process: a stop signal ends it at once, with status 128 +
    its number (the command is over; the interpreter's shutdown is all that is left).
    In the shutdown's last instants Python gives the signals back to the system, which
    then ends the process by the signal itself: the same status to a shell."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _exit_now)
