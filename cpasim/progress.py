"""Progress of long work other than a simulation, on stderr.

:func:`activity` shows a spinner naming the step under way and the time spent,
once the work has lasted :data:`PROGRESS_AFTER_S`; shorter work
shows nothing.  It goes to stderr only (stdout stays the command's output, e.g.
its ``--json``) and is transient (gone when the work ends).  A simulation inside it
shows its own bar: the spinner steps aside between :func:`suspend` and
:func:`resume` (rich draws one live display at a time).  Where stderr is a pipe
or a file (a log) nothing is drawn; a plain line names the step and the time spent
instead, first after :data:`PROGRESS_AFTER_S`, then every :data:`PLAIN_EVERY_S`, so
that a log of a long command is never silent for long.  Written to a buffer in
memory (a test runner's capture, a notebook's), progress shows nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from cpasim.tracing.records import TraceSource

#: Work shorter than this (wall seconds) shows no progress (as a simulation's bar).
PROGRESS_AFTER_S = 2.0
#: Seconds between the plain lines written where stderr is no terminal.
PLAIN_EVERY_S = 5.0

_current: Activity | None = None


def terminal_console():
    """A rich console on stderr when stderr is a terminal, else None: progress is
    drawn only there (in a file or pipe rich would leave blank lines and bars)."""
    from rich.console import Console

    console = Console(stderr=True, force_jupyter=False)  # no ipywidgets needed
    return console if console.is_terminal else None


class Activity:
    """One spinner (or, off a terminal, plain lines); :meth:`step` names what it is doing now."""

    def __init__(self, text: str, enabled: bool) -> None:
        self.text = self.root = text
        self.enabled = enabled
        self._began = time.monotonic()
        self._console = None
        self._lock = threading.Lock()
        self._bar = None
        self._task = None
        self._timer: threading.Timer | None = None
        self._paused = 0
        self._done = threading.Event()
        self._plain: threading.Thread | None = None

    def _show(self) -> None:
        if self._console is None:
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if self._bar is not None or self._paused or self._done.is_set():
                return
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._task = self._bar.add_task(self.text, total=None)
            self._bar.start()

    def _hide(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None

    def _lines(self) -> None:
        """Off a terminal: a line naming the step, while the work lasts (from the
        moment it is due)."""
        wait = 0.0
        while not self._done.wait(wait):
            with self._lock:
                line = self.text if self.text == self.root else f"{self.root}: {self.text}"
            if not line.startswith("cpasim"):
                line = f"cpasim: {line}"
            print(f"{line} ({time.monotonic() - self._began:.0f} s)", file=sys.stderr, flush=True)
            wait = PLAIN_EVERY_S

    def step(self, text: str) -> None:
        with self._lock:
            self.text = text
            if self._bar is not None:
                self._bar.update(self._task, description=text)

    def start(self) -> None:
        """Show progress once the work has lasted :data:`PROGRESS_AFTER_S`: what to
        show is decided then, so that short work never imports rich to ask whether
        stderr is a terminal (a prediction from a trace takes less than a second)."""
        if not self.enabled:
            return
        self._timer = threading.Timer(PROGRESS_AFTER_S, self._due)
        self._timer.daemon = True
        self._timer.start()

    def _due(self) -> None:
        console = terminal_console()
        with self._lock:
            if self._done.is_set():
                return
            self._console = console
            if console is None and _is_a_file(sys.stderr):
                # A spinner in a log is noise (rich leaves a blank line): plain lines.
                self._plain = threading.Thread(target=self._lines, daemon=True)
                self._plain.start()
        self._show()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._done.set()
            plain = self._plain
        self._hide()
        if plain is not None:
            plain.join()


def _is_a_file(stream) -> bool:
    """Whether ``stream`` writes to a pipe or a file, not to a buffer in memory."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return False
    return True


@contextmanager
def activity(text: str, enabled: bool = True) -> Iterator[Activity]:
    """A spinner (off a terminal, plain lines) for the work inside; nested uses name a
    new step of the outer one."""
    global _current
    if _current is not None:
        outer, before = _current, _current.text
        outer.step(text)
        try:
            yield outer
        finally:
            outer.step(before)
        return
    act = _current = Activity(text, enabled)
    act.start()
    try:
        yield act
    finally:
        act.stop()
        _current = None


def suspend() -> None:
    """Hide the spinner (if any) while other work draws its own progress bar."""
    act = _current
    if act is not None:
        with act._lock:
            act._paused += 1
        act._hide()


def resume() -> None:
    """Undo one :func:`suspend`; the spinner shows again if it was due."""
    act = _current
    if act is not None:
        with act._lock:
            act._paused -= 1
        if act._timer is not None and not act._timer.is_alive():
            act._show()


@contextmanager
def note(text: str) -> Iterator[None]:
    """Name the step under way in the current spinner; nothing without one (library
    code says what it does this way, and shows nothing unless a command asked)."""
    act = _current
    if act is None:
        yield
        return
    before = act.text
    act.step(text)
    try:
        yield
    finally:
        act.step(before)


class CountingSource(TraceSource):
    """Passes a trace through, naming the records read so far in the current step."""

    def __init__(self, source: TraceSource, what: str) -> None:
        self.source = source
        self.name = source.name
        self.what = what

    @property
    def key(self):
        return self.source.key

    def chunks(self) -> Iterator[np.ndarray]:
        records = 0
        for chunk in self.source.chunks():
            records += len(chunk)
            if _current is not None:
                _current.step(f"{self.what}: {records:,} records")
            yield chunk
