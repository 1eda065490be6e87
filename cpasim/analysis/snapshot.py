"""Where the traced system stands after the records a pass was fed.

Both engines (:class:`~cpasim.analysis.criticalpath.CriticalPathPass` and
:class:`~cpasim.analysis.compiled.CompiledPass`) give the same
:class:`Snapshot` from ``snapshot()``: per state machine its state, its
connection and what it waits on (a queue, or an answer to a ``link``), who
called it and on whose core it runs; per queue the units it holds, with the
connection each carries and the SM that enqueued it.
:mod:`cpasim.predict.preamble` writes a what-if's starting point from it,
without knowing how either engine keeps its state.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What an SM waits on (:attr:`SmState.waits`): nothing, units in a queue, room
#: in a queue, or a ``link`` back to it.
NOT_WAITING, ON_EMPTY, ON_FULL, ON_LINK = 0, 1, 2, 3


@dataclass(frozen=True)
class SmState:
    """One state machine."""

    recorded: bool  # it emitted a record (else it was only named, e.g. linked to)
    state: int  # state index: 0 before its first ``begin``, else the state id + 1
    conn: int  # connection it works for (-1: none yet)
    waits: int  # NOT_WAITING, ON_EMPTY, ON_FULL or ON_LINK
    queue: int  # the queue it waits on (ON_EMPTY, ON_FULL), else -1
    called_by: int  # the SM whose ``link`` to it it has not taken yet, else -1
    runs_on: int = -1  # the SM whose core it runs on (``run``), else -1


@dataclass(frozen=True)
class QueueUnits:
    """One queue: its declaration and the units it holds, oldest first, as runs
    ``(units, connection, producing SM)`` (connection -1: none; SM of the
    ``resize`` for anonymous units)."""

    cap: int  # declared capacity, -1 if none
    flow: bool  # units carry connection ids
    units: tuple[tuple[int, int, int], ...]

    @property
    def held(self) -> int:
        return sum(n for n, _, _ in self.units)


@dataclass(frozen=True)
class Snapshot:
    sms: tuple[SmState, ...]
    queues: tuple[QueueUnits, ...]
