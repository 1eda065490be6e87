"""The *core lent* share of the most critical states (annotations.md ``run``): the
part of a state's time on the critical path during which another state machine ran
on its SM's core, on hand-built traces whose answer is known."""

from __future__ import annotations

import json

import pytest

from cpasim.analysis import Transforms, analyze
from cpasim.errors import CpasimError
from cpasim.tracing.jsonl import read_jsonl, write_jsonl

ENGINES = ("compiled", "python")
A = {"sys": "h", "sm": "App"}
B = {"sys": "h", "sm": "Callee"}
C = {"sys": "h", "sm": "Inner"}


def _trace(tmp_path, records, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _begin(t, who, state):
    return {"t": t, "op": "begin", **who, "state": state}


def _run(t, who, on):
    return {"t": t, "op": "run", **who, "to": on}


def _caller(t_call, t_back, *extra):
    """App: ``copy`` 0-10, ``call`` 10-``t_back``, ``after`` until ``t_back`` + 10; the
    ``extra`` records in between."""
    return [
        _begin(0, A, "copy"),
        _begin(10, A, "call"),
        *extra,
        _begin(t_back, A, "after"),
        _begin(t_back + 10, A, "done"),
    ]


def _states(path, engine, transforms=None):
    res = analyze(read_jsonl(path), "h:App", "h:App", transforms=transforms, engine=engine)
    return {m["name"]: m for m in res.path.most_critical}, res


@pytest.mark.parametrize("engine", ENGINES)
def test_no_run_record_no_core_lent(tmp_path, engine):
    states, res = _states(_trace(tmp_path, _caller(10, 40)), engine)
    assert res.path.critical_path_ns == 50
    assert {n: m["core_lent_share"] for n, m in states.items()} == {
        "h:App:copy": 0.0,
        "h:App:call": 0.0,
        "h:App:after": 0.0,
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_callee_for_the_whole_call_lends_all_of_it(tmp_path, engine):
    path = _trace(tmp_path, _caller(10, 40, _run(10, B, A), _run(40, B, B)))
    states, _ = _states(path, engine)
    assert states["h:App:call"]["core_lent_ns"] == 30
    assert states["h:App:call"]["core_lent_share"] == 1.0
    assert states["h:App:copy"]["core_lent_share"] == 0.0
    assert states["h:App:after"]["core_lent_share"] == 0.0


@pytest.mark.parametrize("engine", ENGINES)
def test_partial_overlap_and_nested_callees(tmp_path, engine):
    # The callee runs on App's core 15-25, a callee of its own on its core 18-22
    # (App's core stays lent), then again 30-35: 15 of the call's 30 ns.
    extra = [
        _run(15, B, A),
        _run(18, C, B),
        _run(22, C, C),
        _run(25, B, B),
        _run(30, B, A),
        _run(35, B, B),
    ]
    states, res = _states(_trace(tmp_path, _caller(10, 40, *extra)), engine)
    assert states["h:App:call"]["core_lent_ns"] == 15
    assert states["h:App:call"]["core_lent_share"] == 0.5
    # run records are no nodes: the path is that of the trace without them
    plain, res0 = _states(_trace(tmp_path, _caller(10, 40), "plain.jsonl"), engine)
    assert res.path.critical_path_ns == res0.path.critical_path_ns
    assert res.path.edge_count == res0.path.edge_count
    for name, m in plain.items():
        for k in ("share", "time_ns", "waiting_ns", "visits"):
            assert states[name][k] == m[k], (name, k)


@pytest.mark.parametrize("engine", ENGINES)
def test_lent_across_the_callers_records_is_charged_per_edge(tmp_path, engine):
    # Lent 5-35 across App's records at 10 and 40: copy 5 of 10, call all 30 ns.
    records = [
        _begin(0, A, "copy"),
        _run(5, B, A),
        _begin(10, A, "call"),
        _run(35, B, B),
        _begin(40, A, "after"),
        _begin(50, A, "done"),
    ]
    states, _ = _states(_trace(tmp_path, records), engine)
    assert states["h:App:copy"]["core_lent_share"] == 0.5
    assert states["h:App:call"]["core_lent_ns"] == 25
    assert states["h:App:after"]["core_lent_share"] == 0.0


@pytest.mark.parametrize("engine", ENGINES)
def test_scaled_state_scales_its_core_lent_time(tmp_path, engine):
    path = _trace(tmp_path, _caller(10, 40, _run(20, B, A), _run(40, B, B)))
    tf = Transforms(scale=[("h:App:call", 0.5)])
    states, res = _states(path, engine, tf)
    assert res.path.critical_path_ns == 35
    assert states["h:App:call"]["time_ns"] == 15
    assert states["h:App:call"]["core_lent_ns"] == 10
    assert states["h:App:call"]["core_lent_share"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("engine", ENGINES)
def test_time_blocked_is_waiting_not_core_lent(tmp_path, engine):
    # App blocks on q 20-40 while the callee still runs on its core: weight 0, so
    # nothing of it counts as lent; 10-20 does.
    q = {"q": "ret"}
    records = [
        {"t": 0, "op": "declare", **B, **q},
        _begin(0, A, "copy"),
        _begin(10, A, "call"),
        _run(10, B, A),
        {"t": 20, "op": "wait_empty", **A, **q},
        _run(30, B, B),
        {"t": 40, "op": "enq", **B, **q},
        {"t": 40, "op": "deq", **A, **q},
        _begin(50, A, "done"),
    ]
    states, _ = _states(_trace(tmp_path, records), engine)
    call = states["h:App:call"]
    assert call["core_lent_ns"] == 10
    assert call["waiting_ns"] == 20


def test_run_round_trips_and_needs_a_target(tmp_path):
    path = _trace(tmp_path, _caller(10, 40, _run(10, B, A), _run(40, B, B)))
    out = tmp_path / "copy.jsonl"
    write_jsonl(read_jsonl(path), out)
    assert [json.loads(line) for line in out.read_text().splitlines()][2] == {
        **_run(10, B, A),
        "to": {**A, "inst": "0"},
    }
    bad = _trace(tmp_path, [{"t": 0, "op": "run", **B}], "bad.jsonl")
    with pytest.raises(CpasimError, match="needs field 'to'"):
        list(read_jsonl(bad).chunks())


@pytest.mark.parametrize("engine", ENGINES)
def test_a_window_started_inside_a_call_keeps_the_callers_core_lent(tmp_path, engine):
    """The starting point of a what-if over a trace's tail (its snapshot and preamble)
    says on whose core each SM runs, so a caller inside a call at the cut is lent."""
    from cpasim.analysis.compiled import CompiledPass
    from cpasim.analysis.criticalpath import CriticalPathPass
    from cpasim.predict.preamble import preamble
    from cpasim.tracing.records import RUN

    src = read_jsonl(_trace(tmp_path, _caller(10, 40, _run(15, B, A), _run(35, B, B))))
    records = next(iter(src.chunks()))
    make = CompiledPass if engine == "compiled" else CriticalPathPass
    p = make(Transforms(), ("h", "App"), ("h", "App"))
    p.feed(records[records["t"] < 20], src.key)
    callee, app = src.key.sms.index(("h", "Callee", "0")), src.key.sms.index(("h", "App", "0"))
    assert p.snapshot().sms[callee].runs_on == app
    rows, _ = preamble(p, 20.0, len(src.key.sms))
    assert [(r["sm"], r["a"]) for r in rows if r["op"] == RUN] == [(callee, app)]
