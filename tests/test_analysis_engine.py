"""The compiled engine reproduces the reference pass bit for bit (hypothesis).

Both engines run on the same random traces -- synthetic pipelines and random
record soups with several SMs, queues, capacities, links and connections --
under every kind of what-if, chunking, commit spacing and listing limit; the
whole result (JSON with exact float reprs, profile, queue statistics,
transition counts, queue ops, links) must be identical, and so must the error
message when the trace is malformed.  The regression digests
(``test_analysis_regression.py``) run on both engines too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpasim.analysis import Transforms, _result, analyze, analyze_many
from cpasim.analysis.compiled import CompiledPass
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.dot import to_dot
from cpasim.analysis.synthetic import PipelineSpec, pipeline_source
from cpasim.errors import CpasimError
from cpasim.tracing import open_trace
from cpasim.tracing.memory import MemorySource
from cpasim.tracing.records import RECORD_DTYPE

TRACES = Path(__file__).parent / "traces"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SMS = [("s", "A", "0"), ("s", "B", "0"), ("s", "B", "1"), ("r", "C", "0")]
QUEUES = [("s", "Q1"), ("s", "Q2"), ("r", "Q3")]
STATES = ["run", "idle", "send"]
CONNS = ["c1", "c2"]


def _blob(res) -> str:
    p = res.pass_state
    return json.dumps(
        {
            "result": res.to_json(),
            "transitions": sorted(p.transition_counts()),
            "queue_ops": sorted(p.queue_ops()),
            "links": sorted(p.links.items()),
        },
        sort_keys=True,
    )


def _outcome(fn):
    """``fn()``'s blobs, or the message of the CpasimError it raised."""
    try:
        return [_blob(r) for r in fn()]
    except CpasimError as exc:
        return f"error: {exc}"


def _rechunk(src, sizes: list[int]) -> MemorySource:
    """The same records, cut into chunks of the given sizes (cycled)."""
    records = np.concatenate([np.zeros(0, RECORD_DTYPE), *src.chunks()])
    chunks, i, k = [], 0, 0
    while i < len(records):
        step = sizes[k % len(sizes)]
        chunks.append(records[i : i + step])
        i += step
        k += 1
    return MemorySource(chunks, src.key, name="random.jsonl")


def _passes(engine, src, start, end, transforms, lenient, commit_every, limit):
    """analyze_many's feeding, with the commit spacing and listing limit chosen."""
    make = CompiledPass if engine == "compiled" else CriticalPathPass
    passes = [
        make(
            tf,
            start,
            end,
            lenient=lenient,
            listing_limit=limit,
            source_name=src.name,
            commit_every=commit_every,
        )
        for tf in transforms
    ]
    for chunk in src.chunks():
        for p in passes:
            p.feed(chunk, src.key)
    if engine == "compiled":
        for p in passes:
            p.key = src.key
        passes = [p.view() for p in passes]
    return [_result(p, src, start, end, None, 0.01) for p in passes]


# -- random what-ifs -----------------------------------------------------------


@st.composite
def whatifs(draw, states: list[str], queues: list[str]):
    """A list of Transforms: the identity and random ones of every kind."""
    out = [Transforms()]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["scale", "scale_comm", "break", "capacity", "mixed"]))
        factor = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, 3.7]))
        state = draw(st.sampled_from(states))
        queue = draw(st.sampled_from(queues))
        k = draw(st.integers(1, 4))
        if kind == "scale":
            out.append(Transforms(scale=[(state, factor)]))
        elif kind == "scale_comm":
            out.append(Transforms(scale_comm=[(queue, factor)]))
        elif kind == "break":
            out.append(Transforms(breaks=[queue]))
        elif kind == "capacity":
            out.append(Transforms(capacity=[(queue, k)]))
        else:
            out.append(
                Transforms(
                    scale=[(state, factor)], scale_comm=[(queue, 2.0)], capacity=[(queue, k)]
                )
            )
    return out


# -- random pipelines ------------------------------------------------------------


@st.composite
def pipelines(draw):
    units = draw(st.integers(1, 3))
    return PipelineSpec(
        items=draw(st.integers(1, 40)),
        stages=draw(st.integers(1, 4)),
        ring=draw(st.sampled_from([0, units, units + 1, 2 * units + 1])),
        window=draw(st.integers(0, 4)),
        work_ns=draw(st.floats(1.0, 500.0)),
        wake_ns=draw(st.sampled_from([0.0, 1.0, 37.5])),
        units=units,
        seed=draw(st.integers(0, 2**31)),
        conn=draw(st.sampled_from([None, "c0"])),
    )


PIPE_STATES = ["tx:App:*", "*:Stage0:process", "rx:*", "*:*:push", "tx:*"]
PIPE_QUEUES = ["tx:Window", "*:Q[1-9]", "rx:*", "tx:*", "*:Q1"]


@pytest.mark.slow
@SETTINGS
@given(
    pipelines(),
    whatifs(PIPE_STATES, PIPE_QUEUES),
    st.integers(1, 300),
    st.sampled_from([1, 7, 64, 16384]),
    st.sampled_from([0, 5, 10_000]),
)
def test_engines_agree_on_pipelines(spec, tfs, chunk, every, limit):
    # Chunks from the generator itself: names keep appearing in the key between them.
    start, end = ("tx", "App"), ("rx", "App")
    ref = _outcome(
        lambda: _passes(
            "python", pipeline_source(spec, chunk=chunk), start, end, tfs, False, 16384, limit
        )
    )
    got = _outcome(
        lambda: _passes(
            "compiled", pipeline_source(spec, chunk=chunk), start, end, tfs, False, every, limit
        )
    )
    assert got == ref


# -- random record soups ------------------------------------------------------------


@st.composite
def soups(draw):
    """Random records over a few SMs, queues and connections (every op kind).

    Takes stay within what a queue holds, but for an occasional over-draw (an
    error, or a counted warning with ``lenient``); data tends to flow from
    ``s:A`` through ``s:B`` to ``r:C`` so that paths join up.
    """
    records = []
    held = {q: 0 for q in QUEUES}
    t = 0.0
    for q in QUEUES:
        if draw(st.booleans()):
            decl = {"t": t, "op": "declare", "sys": q[0], "sm": "A", "q": q[1]}
            if draw(st.booleans()):
                decl["capacity"] = draw(st.integers(1, 4))
            if draw(st.booleans()):
                decl["conn_flow"] = False
            records.append(decl)
    # Start and end SMs record first, so both are in the trace.
    records.append({"t": t, "op": "begin", "sys": "s", "sm": "A", "state": "run"})
    records.append({"t": t, "op": "begin", "sys": "r", "sm": "C", "state": "idle"})
    ops = st.sampled_from(
        ["begin"] * 8
        + ["enq"] * 8
        + ["deq"] * 8
        + ["peek", "reserve", "resize", "wait_empty", "wait_full", "wait_empty", "link"] * 2
        + ["identify"]
    )
    for _ in range(draw(st.integers(0, 80))):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 2.5, 10.0]))
        op = draw(ops)
        qi = draw(st.integers(0, len(QUEUES) - 1))
        if op in ("enq", "reserve"):
            who = SMS[qi] if draw(st.integers(0, 3)) else draw(st.sampled_from(SMS))
        elif op in ("deq", "peek", "wait_empty"):
            who = SMS[qi + 1] if draw(st.integers(0, 3)) else draw(st.sampled_from(SMS))
        else:
            who = draw(st.sampled_from(SMS))
        rec = {"t": t, "op": op, "sys": who[0], "sm": who[1], "inst": who[2]}
        if op == "begin":
            rec["state"] = draw(st.sampled_from(STATES))
        elif op == "link":
            to = draw(st.sampled_from(SMS))
            rec["to"] = {"sys": to[0], "sm": to[1], "inst": to[2]}
        elif op == "identify":
            rec["conn"] = draw(st.sampled_from(CONNS))
        else:
            q = QUEUES[qi]
            rec.update(qsys=q[0], q=q[1], qinst="0")
            if op in ("deq", "peek"):
                if draw(st.integers(0, 29)) == 0:
                    n = held[q] + 1  # over-draw
                elif op == "deq" and draw(st.integers(0, 5)) == 0:
                    n = -1
                else:
                    n = draw(st.integers(min(1, held[q]), held[q]))
                if op == "deq":
                    held[q] -= held[q] if n < 0 else min(n, held[q])
            else:
                n = draw(st.integers(0, 3))
                if op == "enq":
                    held[q] += n
                elif op == "resize":
                    held[q] = n
            rec["n"] = n
        records.append(rec)
    return records


SOUP_STATES = ["s:A:*", "s:B:run", "s:B#1:*", "*:*:send", "r:*"]
SOUP_QUEUES = ["s:Q1", "s:Q*", "r:Q3", "*:*"]


# In the quick suite, the engines' agreement on a few random soups and handoffs
# (tests/conftest.py's QUICK_EXAMPLES each); the whole suite tries SETTINGS' 150.
@SETTINGS
@given(
    soups(),
    whatifs(SOUP_STATES, SOUP_QUEUES),
    st.booleans(),
    st.lists(st.integers(1, 30), min_size=1, max_size=3),
    st.sampled_from([1, 3, 16384]),
    st.sampled_from([("s:A", "r:C"), ("s:A", "s:A"), ("s:B", "s:B#1"), ("s:B#1", "r:C")]),
)
def test_engines_agree_on_random_records(records, tfs, lenient, sizes, every, ends):
    src = _rechunk(MemorySource.from_dicts(records), sizes)
    start, end = (tuple(x.split(":")) for x in ends)
    start = (start[0], *start[1].split("#"))
    end = (end[0], *end[1].split("#"))
    ref = _outcome(lambda: _passes("python", src, start, end, tfs, lenient, 16384, 10_000))
    got = _outcome(lambda: _passes("compiled", src, start, end, tfs, lenient, every, 10_000))
    assert got == ref
    # The public entry point (its own checks and messages) agrees too.
    for conn in (None, "c1"):
        ref = _outcome(
            lambda conn=conn: analyze_many(
                src, ends[0], ends[1], tfs, conn=conn, lenient=lenient, engine="python"
            )
        )
        got = _outcome(
            lambda conn=conn: analyze_many(
                src, ends[0], ends[1], tfs, conn=conn, lenient=lenient, engine="compiled"
            )
        )
        assert got == ref


@st.composite
def handoffs(draw):
    """A producer and a consumer around one bounded queue, blocking as annotated,
    with many equal times (waits that begin as a slot frees or a unit arrives)."""
    cap = draw(st.integers(1, 3))
    records = [
        {"t": 0, "op": "declare", "sys": "h", "sm": "P", "q": "buf", "capacity": cap},
        {"t": 0, "op": "begin", "sys": "h", "sm": "P", "state": "make"},
        {"t": 0, "op": "begin", "sys": "h", "sm": "C", "state": "idle"},
    ]
    held = 0
    t = 0.0
    for _ in range(draw(st.integers(0, 60))):
        t += draw(st.sampled_from([0.0, 0.0, 0.5, 1.0]))
        who = draw(st.sampled_from(["P", "C"]))
        base = {"t": t, "sys": "h", "sm": who}
        if who == "P":
            n = draw(st.integers(1, cap))
            if held + n > cap:
                records.append({**base, "op": "wait_full", "q": "buf", "n": n})
                if draw(st.booleans()):
                    continue  # the consumer frees slots first
                n = cap - held
                if not n:
                    continue
            records.append({**base, "op": "enq", "q": "buf", "n": n})
            records.append({**base, "op": "begin", "state": draw(st.sampled_from(["make", "x"]))})
            held += n
        else:
            if held == 0:
                records.append({**base, "op": "wait_empty", "q": "buf"})
                continue
            n = draw(st.integers(1, held))
            records.append(
                {**base, "op": draw(st.sampled_from(["deq", "deq", "peek"])), "q": "buf", "n": n}
            )
            if records[-1]["op"] == "deq":
                held -= n
            records.append({**base, "op": "begin", "state": draw(st.sampled_from(["use", "idle"]))})
    return records


@SETTINGS
@given(
    handoffs(),
    st.lists(st.integers(1, 9), min_size=1, max_size=2),
    st.sampled_from([1, 2, 16384]),
    st.sampled_from(
        [
            Transforms(),
            Transforms(capacity=[("h:buf", 1)]),
            Transforms(capacity=[("h:buf", 2)], scale_comm=[("h:*", 0.5)]),
            Transforms(scale=[("h:P:make", 0.0)]),
            Transforms(breaks=["h:buf"]),
        ]
    ),
)
def test_engines_agree_on_handoffs(records, sizes, every, tf):
    src = _rechunk(MemorySource.from_dicts(records), sizes)
    start, end = ("h", "P"), ("h", "C")
    tfs = [Transforms(), tf]
    ref = _outcome(lambda: _passes("python", src, start, end, tfs, True, 16384, 10_000))
    got = _outcome(lambda: _passes("compiled", src, start, end, tfs, True, every, 10_000))
    assert got == ref


def test_short_take_error_is_the_same():
    records = [
        {"t": 0, "op": "begin", "sys": "h", "sm": "A", "state": "x"},
        {"t": 1, "op": "enq", "sys": "h", "sm": "A", "q": "q", "n": 2},
        {"t": 2, "op": "deq", "sys": "h", "sm": "B", "qsys": "h", "q": "q", "n": 3},
    ]
    src = MemorySource.from_dicts(records, name="short.jsonl")
    messages = []
    for engine in ("python", "compiled"):
        with pytest.raises(CpasimError) as exc:
            analyze(src, "h:A", "h:B", engine=engine)
        messages.append(str(exc.value))
    assert messages[0] == messages[1]
    assert "record 3: h:B takes 3 units from queue h:q, which holds 2" in messages[0]


# -- memory, integration ------------------------------------------------------------


@pytest.mark.slow
def test_compiled_memory_stays_bounded():
    """Path nodes in use are bounded by what live paths disagree on, and every
    node's reference count matches its holders."""
    src = pipeline_source(PipelineSpec(items=3000, stages=4, ring=4, window=8, seed=3))
    p = CompiledPass(Transforms(), ("tx", "App"), ("rx", "App"), commit_every=512)
    for chunk in src.chunks():
        p.feed(chunk, src.key)
    assert p.records > 90_000
    assert p.folded > 10_000
    assert p.live_nodes < 4 * 512, p.live_nodes
    assert p.peak_nodes < 16 * 512, p.peak_nodes
    assert p.refcount_errors() == 0


def test_dot_graphs_are_the_same():
    """The reports built from the pass state (DOT graphs) do not depend on the engine."""
    src = open_trace(TRACES / "model_webserver.cpt")
    res = {e: analyze(src, "rx:App", "rx:App", engine=e) for e in ("python", "compiled")}
    for graph in ("high", "global", "sm:rx:App"):
        assert to_dot(res["compiled"], graph) == to_dot(res["python"], graph)


def test_engine_choice(monkeypatch):
    src = pipeline_source(PipelineSpec(items=5, stages=2, ring=2, window=2))
    assert isinstance(
        analyze(src, "tx:App", "rx:App", engine="python").pass_state, CriticalPathPass
    )
    monkeypatch.setenv("CPASIM_ANALYZER", "python")
    assert isinstance(analyze(src, "tx:App", "rx:App").pass_state, CriticalPathPass)
    monkeypatch.setenv("CPASIM_ANALYZER", "fast")
    with pytest.raises(CpasimError, match="analyzer engine 'fast'"):
        analyze(src, "tx:App", "rx:App")
    monkeypatch.delenv("CPASIM_ANALYZER")
    assert not isinstance(analyze(src, "tx:App", "rx:App").pass_state, CriticalPathPass)


def test_import_stays_light():
    """numba is loaded on the first compiled pass, not by importing cpasim."""
    code = "import sys, cpasim, cpasim.analysis; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_compiled_folds_paths_that_part_for_good_apart():
    """As the reference pass (test_analysis_properties): two loops that share
    nothing between the start and the end are folded apart, every node's count
    stays right, and the result is the reference's."""
    from cpasim.analysis.synthetic import parted_loops_source

    src = parted_loops_source(20_000)
    p = CompiledPass(Transforms(), ("tx", "App"), ("rx", "App"), commit_every=512)
    for chunk in src.chunks():
        p.feed(chunk, src.key)
    assert p.records > 75_000
    assert p.live_nodes < 2_000, p.live_nodes
    assert p.refcount_errors() == 0
    got = analyze(src, "tx:App", "rx:App", engine="compiled")
    want = analyze(src, "tx:App", "rx:App", engine="python")
    assert got.to_json() == want.to_json()
