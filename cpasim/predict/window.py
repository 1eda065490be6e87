"""The measured interval of a traced run: what happened after ``sim.warmup``.

The trace covers the whole run, warm-up included, and its critical path
runs from the sender's first record to the receiver's last.  The run's metric
is measured after the warm-up, though, and start-up work (a writer filling a
4 MiB send buffer at CPU speed, slow start) is not steady-state work: counted
in a path length or a resource's busy time it biases the ratio a prediction
scales the metric by.  So every length and busy time a prediction compares is
taken over the measured interval, as the whole trace's figure minus the
figure of its warm-up prefix: a path's length at the warm-up's end comes from
the same pass (``analyze_many(mark=)``), busy times from an analysis of the
prefix (:class:`Prefix`) with the same transforms.  For the baseline this is
the path from the first record to the last minus the path to the last
receiver record of the warm-up — the measured elapsed time; for a changed
graph, the predicted time to do the measured interval's work.

Streams also keep a *window* (:class:`Window`): the tail of the trace, which
predictions analyse instead of the whole, from the state recorded at its start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cpasim.analysis import AnalysisResult, Transforms, analyze_many, engine_name, parse_sm
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.errors import CpasimError
from cpasim.predict.preamble import origin_names, preamble
from cpasim.tracing.columnar import read_cpt
from cpasim.tracing.records import RECORD_DTYPE, TraceKey, TraceSource
from cpasim.tracing.validate import check_chunk


class Prefix(TraceSource):
    """The records of ``source`` before time ``t`` (ns).  A prefix of a trace is a
    trace: operations still open at the cut simply never complete."""

    def __init__(self, source: TraceSource, t: float):
        self.source = source
        self.t = t
        self.name = f"{source.name} (before {t:g} ns)"

    @property
    def key(self) -> TraceKey:  # the source's key grows as its chunks are read
        return self.source.key

    def chunks(self) -> Iterator[np.ndarray]:
        for chunk in self.source.chunks():
            cut = int(np.searchsorted(chunk["t"], self.t, side="left"))
            if cut:
                yield chunk[:cut]
            if cut < len(chunk):
                return


def analyses(
    open_source,
    start,
    end,
    transforms: Sequence[Transforms],
    warmup: float,
    *,
    profiles=False,
    commit_every: int | None = None,
    conns=None,
) -> list[tuple[AnalysisResult, dict[str, float], AnalysisResult | None]]:
    """Per transform set, from one pass: the whole trace's analysis and its path
    lengths at the end of the warm-up (``{}`` without one); with ``profiles``, also
    the warm-up prefix's own analysis (a second pass), whose busy times
    :func:`~cpasim.predict.runs.measured_active` subtracts.  ``open_source()``
    opens the trace afresh.  Without ``profiles`` the analyses carry the paths
    only (what predictions read).  ``commit_every``: as for
    :func:`~cpasim.analysis.analyze_many` (:data:`WINDOW_COMMIT_EVERY` for a window);
    ``conns``: the connections whose paths count (a run's ``analysis_conns``)."""
    whole = analyze_many(
        open_source(),
        start,
        end,
        transforms,
        min_share=0.0,
        mark=warmup if warmup > 0 else None,
        details=profiles,
        listing_limit=10_000 if profiles else 0,  # predictions read no edge listing
        commit_every=commit_every,
        conns=conns,
    )
    cuts = [res.lengths_at_mark or {} for res in whole]
    if warmup > 0 and profiles:
        before = analyze_many(
            Prefix(open_source(), warmup), start, end, transforms, min_share=0.0, conns=conns
        )
    else:
        before = [None] * len(whole)
    return list(zip(whole, cuts, before, strict=True))


# -- what-ifs over the tail of a trace ------------------------------------------------

#: Records between the folds of a window's pass.  Its preamble hands every SM
#: its history at once, and each fold walks all of it again; a window is only a
#: few ordinary commit intervals long, so its pass folds rarely (memory is then
#: bounded by the window's length instead, which is fixed).
WINDOW_COMMIT_EVERY = 1 << 18


@dataclass(frozen=True)
class Window:
    """The tail of a trace a prediction may analyse instead of the whole.

    From ``t0`` on, after the preamble that recreates the state at ``t0``
    (:mod:`cpasim.predict.preamble`); lengths are measured from ``t_measure``
    on (the stretch ``t0 .. t_measure`` lets the changed graph settle from the
    baseline's state, as the warm-up does for the whole trace).
    """

    t0: float
    t_measure: float
    sms: int  # SMs the whole trace defines; the origin SMs follow them
    origins: tuple[tuple[str, str, str], ...]
    rows: np.ndarray  # the preamble, RECORD_DTYPE

    def source(self, trace: Path) -> TraceSource:
        return WindowSource(trace, self)

    def to_json(self) -> dict:
        return {
            "t0": self.t0,
            "t_measure": self.t_measure,
            "sms": self.sms,
            "origins": [list(o) for o in self.origins],
            "preamble": [
                [int(r["op"]), int(r["flags"]), int(r["sm"]), int(r["a"]), int(r["n"])]
                for r in self.rows
            ],
        }

    @classmethod
    def from_json(cls, d: dict) -> Window:
        t0 = float(d["t0"])
        rows = np.array(
            [(t0, op, flags, sm, a, n) for op, flags, sm, a, n in d["preamble"]],
            dtype=RECORD_DTYPE,
        )
        return cls(
            t0, float(d["t_measure"]), int(d["sms"]), tuple(tuple(o) for o in d["origins"]), rows
        )


class WindowSource(TraceSource):
    """A ``.cpt`` trace from ``window.t0`` on, after the window's preamble."""

    def __init__(self, trace: Path, window: Window):
        self.window = window
        self._cpt = read_cpt(trace)
        self.key = self._cpt.read_names()
        if len(self.key.sms) != window.sms:
            raise CpasimError(
                f"{trace}: defines {len(self.key.sms)} state machines, its run sidecar "
                f"{window.sms}; the trace changed since it was recorded"
            )
        for name in window.origins:
            self.key.intern_sm(*name)
        self.name = f"{trace} (from {window.t0:g} ns)"
        # The preamble comes from the run's sidecar: it obeys the rules of any trace.
        check_chunk(window.rows, self.key, f"{trace} (the window's preamble in its sidecar)")

    def chunks(self) -> Iterator[np.ndarray]:
        yield self.window.rows
        yield from self._cpt.chunks(since=self.window.t0)


def make_window(trace: Path, start, end, t0: float, t_measure: float) -> Window:
    """Snapshot the trace's state at ``t0`` with one pass over the records before it
    (either engine gives the same :meth:`snapshot`)."""
    sms = len(read_cpt(trace).read_names().sms)
    if engine_name() == "compiled":
        from cpasim.analysis.compiled import CompiledPass as make_pass
    else:
        make_pass = CriticalPathPass
    p = make_pass(Transforms(), parse_sm(start), parse_sm(end), source_name=str(trace))
    head = Prefix(read_cpt(trace), t0)
    for chunk in head.chunks():
        p.feed(chunk, head.key)
    rows, conns = preamble(p, t0, sms)
    return Window(t0, t_measure, sms, tuple(origin_names(parse_sm(start), conns)), rows)
