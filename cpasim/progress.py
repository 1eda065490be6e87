"""Progress of long work other than a simulation, on stderr.

:func:`activity` shows a spinner naming the step under way and the time spent,
once the work has lasted :data:`PROGRESS_AFTER_S`; shorter work
shows nothing.  It goes to stderr only (stdout stays the command's output, e.g.
its ``--json``), is transient (gone when the work ends) and draws only on a
terminal.  A simulation inside it shows its own bar: the spinner steps aside
between :func:`suspend` and :func:`resume` (rich draws one live display at a time).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from cpasim.trace.records import TraceSource

#: Work shorter than this (wall seconds) shows no progress (as a simulation's bar).
PROGRESS_AFTER_S = 2.0

_current: Activity | None = None


def terminal_console():
    """A rich console on stderr when stderr is a terminal, else None: progress is
    drawn only there (in a file or pipe rich would leave blank lines and bars)."""
    from rich.console import Console

    console = Console(stderr=True, force_jupyter=False)  # no ipywidgets needed
    return console if console.is_terminal else None


class Activity:
    """One spinner; :meth:`step` names what it is doing now."""

    def __init__(self, text: str, enabled: bool) -> None:
        self.text = text
        self.enabled = enabled
        self._lock = threading.Lock()
        self._bar = None
        self._task = None
        self._timer: threading.Timer | None = None
        self._paused = 0

    def _show(self) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if self._bar is not None or self._paused or not self.enabled:
                return
            console = terminal_console()
            if console is None:
                return  # a spinner in a log file is noise
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._task = self._bar.add_task(self.text, total=None)
            self._bar.start()

    def _hide(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None

    def step(self, text: str) -> None:
        with self._lock:
            self.text = text
            if self._bar is not None:
                self._bar.update(self._task, description=text)

    def start(self) -> None:
        if self.enabled:
            self._timer = threading.Timer(PROGRESS_AFTER_S, self._show)
            self._timer.daemon = True
            self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._hide()


@contextmanager
def activity(text: str, enabled: bool = True) -> Iterator[Activity]:
    """A spinner for the work inside; nested uses name a new step of the outer one."""
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
