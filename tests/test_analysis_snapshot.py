"""Both engines give the same snapshot (:mod:`cpasim.analysis.snapshot`) after the
same records: the state a what-if over a trace's tail starts from does not depend
on the engine that read its head."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_engine import soups

from cpasim.analysis import Transforms
from cpasim.analysis.compiled import CompiledPass
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.snapshot import ON_EMPTY, ON_LINK
from cpasim.errors import CpasimError
from cpasim.tracing.jsonl import read_jsonl
from cpasim.tracing.memory import MemorySource

TRACES = Path(__file__).parent / "traces"


def _snapshots(src, cut: int):
    """Each engine's snapshot after the first ``cut`` records (None if they are bad)."""
    out = []
    for make in (CriticalPathPass, CompiledPass):
        p = make(Transforms(), ("s", "A"), ("r", "C"), lenient=True)
        try:
            for chunk in src.chunks():
                p.feed(chunk[:cut], src.key)
        except CpasimError:
            return None
        out.append(p.snapshot())
    return out


@settings(max_examples=80, deadline=None)
@given(soups(), st.integers(0, 90))
def test_engines_give_the_same_snapshot(records, cut):
    snaps = _snapshots(MemorySource.from_dicts(records), cut)
    if snaps is not None:
        assert snaps[0] == snaps[1]


def test_snapshot_of_the_stack_driver():
    src = read_jsonl(TRACES / "stack_driver.jsonl")
    records = next(iter(src.chunks()))
    key = src.key
    for make in (CriticalPathPass, CompiledPass):
        p = make(Transforms(), ("h", "Stack"), ("h", "Driver"))
        # Before the stack enqueues (t = 11) the driver waits on an empty pktq.
        p.feed(records[records["t"] < 11], key)
        snap = p.snapshot()
        driver = snap.sms[key.sms.index(("h", "Driver", "0"))]
        assert (driver.waits, driver.queue, driver.recorded) == (ON_EMPTY, 0, True)
        assert snap.queues[0].units == ()
        p.feed(records[records["t"] == 11], key)
        stack = key.sms.index(("h", "Stack", "0"))
        assert p.snapshot().queues[0].units == ((1, -1, stack),)
        assert ON_LINK not in [s.waits for s in p.snapshot().sms]
