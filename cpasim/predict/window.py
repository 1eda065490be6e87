"""The measured interval of a traced run: what happened after ``sim.warmup``.

The trace covers the whole run, warm-up included, and its critical path
runs from the sender's first record to the receiver's last.  The run's metric
is measured after the warm-up, though, and start-up work (a writer filling a
4 MiB send buffer at CPU speed, slow start) is not steady-state work: counted
in a path length or a resource's busy time it biases the ratio a prediction
scales the metric by.  So every length and busy time a prediction compares is
taken over the measured interval, as the whole trace's figure minus the
figure of its warm-up prefix (:class:`Prefix`, analysed with the same
transforms).  For the baseline this is the path from the first record to the
last minus the path to the last receiver record of the warm-up — the measured
elapsed time; for a changed graph, the predicted time to do the measured
interval's work.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from cpasim.analysis import AnalysisResult, Transforms, analyze_many
from cpasim.trace.records import TraceKey, TraceSource


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
    open_source, start, end, transforms: Sequence[Transforms], warmup: float
) -> list[tuple[AnalysisResult, AnalysisResult | None]]:
    """Per transform set: the whole trace's analysis and its warm-up prefix's
    (``None`` without a warm-up).  ``open_source()`` opens the trace afresh."""
    whole = analyze_many(open_source(), start, end, transforms, min_share=0.0)
    if warmup <= 0:
        return [(w, None) for w in whole]
    before = analyze_many(Prefix(open_source(), warmup), start, end, transforms, min_share=0.0)
    return list(zip(whole, before, strict=True))


def prefix_lengths(res: AnalysisResult | None) -> dict[str, float]:
    """Connection ("" for the whole trace) → critical-path length of the warm-up
    prefix; a connection whose prefix path is cut (it had not reached the
    receiver yet) has done no measured-interval work before the cut: 0."""
    if res is None:
        return {}
    paths = {"": res.path} if res.path is not None else dict(res.connections)
    return {
        c: float(p.critical_path_ns) if p.reachable and p.critical_path_ns is not None else 0.0
        for c, p in paths.items()
    }
