"""The analyzer's memory grows with what is live, not with products of names.

A trace of many state machines, each with a state and a connection of its own,
once needed an SM x state (and SM x connection) table: 20,000 such SMs asked
for a (20002, 20002) array.  Both engines must hold memory linear in the SMs,
states, queued units and connections: doubling the SMs at most about doubles
what the pass holds, and 20,000 of them fit in a few tens of megabytes.
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from cpasim.analysis import Transforms, analyze
from cpasim.analysis.compiled import CompiledPass
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.pathlog import MAX_IDS
from cpasim.errors import CpasimError
from cpasim.tracing.memory import MemorySource
from cpasim.tracing.records import BEGIN, DEQ, ENQ, IDENTIFY, RECORD_DTYPE, TraceKey

SMS = 20_000


def many_sms(n: int) -> MemorySource:
    """A source hands ``n`` units to ``n`` workers; worker i works for connection
    ``c<i>`` in state ``S<i>`` of its own, and passes its unit to a sink."""
    key = TraceKey()
    src = key.intern_sm("tx", "App")
    sink = key.intern_sm("rx", "Sink")
    q_in = key.intern_queue("tx", "Work")
    q_out = key.intern_queue("rx", "Done")
    run = key.intern_state("run")
    rows = [(0.0, BEGIN, 0, src, run, 0), (1.0, ENQ, 0, src, q_in, n)]
    for i in range(n):
        w = key.intern_sm("w", f"W{i}")
        t = 2.0 + 4 * i
        rows += [
            (t, IDENTIFY, 0, w, key.intern_conn(f"c{i}"), 0),
            (t + 1, BEGIN, 0, w, key.intern_state(f"S{i}"), 0),
            (t + 2, DEQ, 0, w, q_in, 1),
            (t + 3, ENQ, 0, w, q_out, 1),
        ]
    rows.append((4.0 * n + 10, DEQ, 0, sink, q_out, n))
    return MemorySource([np.array(rows, dtype=RECORD_DTYPE)], key, name="many.jsonl")


def _python_peak(n: int) -> int:
    """Peak bytes Python allocates while the reference pass analyses ``many_sms(n)``."""
    source = many_sms(n)
    gc.collect()
    tracemalloc.start()
    try:
        analyze(source, "tx:App", "rx:Sink", conn="c0", engine="python")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _compiled_bytes(n: int) -> int:
    """Bytes of every array the compiled pass holds after ``many_sms(n)``."""
    source = many_sms(n)
    p = CompiledPass(Transforms(scale=[("w:*", 0.5)]), ("tx", "App"), ("rx", "Sink"))
    for chunk in source.chunks():
        p.feed(chunk, source.key)
    assert p.refcount_errors() == 0
    return p.pool_bytes()


@pytest.mark.slow
def test_reference_pass_memory_is_linear_in_state_machines():
    half, full = _python_peak(SMS // 4), _python_peak(SMS // 2)
    assert full < 2.5 * half, (half, full)
    assert full < 50e6, full


@pytest.mark.slow
def test_compiled_pass_memory_is_linear_in_state_machines():
    half, full = _compiled_bytes(SMS // 2), _compiled_bytes(SMS)
    assert full < 2.5 * half, (half, full)
    assert full < 50e6, full


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_many_state_machines_analyse_to_the_same_result(engine):
    res = analyze(
        many_sms(SMS),
        "tx:App",
        "rx:Sink",
        conn="c0",
        transforms=Transforms(scale=[("w:*", 0.5)]),
        engine=engine,
    )
    # The source's enq (1 ns), then worker 0's deq and its enq (1 ns at half).
    assert res.critical_path_ns == 1.5
    profile = {d["sm"]: d for d in res.profile}
    assert len(profile) == SMS + 2
    last = [(d["state"], d["active_ns"]) for d in profile[f"w:W{SMS - 1}"]["states"]]
    assert last == [(f"S{SMS - 1}", 2.0), ("(initial)", 1.0)]


@pytest.mark.slow
@pytest.mark.parametrize("make", [CriticalPathPass, CompiledPass])
def test_ids_beyond_the_edge_code_fields_are_refused(make):
    key = TraceKey()
    key.intern_sm("tx", "App")
    key.states.extend(f"S{i}" for i in range(MAX_IDS + 1))
    p = make(Transforms(), ("tx", "App"), ("tx", "App"), source_name="big.cpt")
    with pytest.raises(CpasimError, match=r"big.cpt: names 2097152 states; the analyzer handles"):
        p.feed(np.zeros(0, RECORD_DTYPE), key)


def million_states() -> MemorySource:
    """Two SMs in a trace that names 10^6 states (as a crafted ``.cpt`` can): the
    source enters the last one and hands a unit to the sink."""
    key = TraceKey()
    src = key.intern_sm("tx", "App")
    sink = key.intern_sm("rx", "Sink")
    q = key.intern_queue("rx", "Done")
    key.states.extend(f"S{i}" for i in range(1_000_000))
    rows = [
        (0.0, BEGIN, 0, src, 999_999, 0),
        (2.0, ENQ, 0, src, q, 1),
        (5.0, BEGIN, 0, sink, 0, 0),
        (7.0, DEQ, 0, sink, q, 1),
    ]
    return MemorySource([np.array(rows, dtype=RECORD_DTYPE)], key, name="crafted.cpt")


@pytest.mark.slow
def test_a_million_named_states_cost_only_those_entered():
    source = million_states()
    gc.collect()
    tracemalloc.start()
    try:
        res = analyze(source, "tx:App", "rx:Sink", engine="python")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.critical_path_ns == 2.0
    assert peak < 10e6, peak
    p = CompiledPass(Transforms(scale=[("*:S9*", 0.5)]), ("tx", "App"), ("rx", "Sink"))
    p.feed(next(iter(source.chunks())), source.key)
    assert p.end_lengths() == {-1: (7.0, 1.0)}
    assert p.pool_bytes() < 10e6, p.pool_bytes()
