"""Critical paths of hand-built traces, worked out by hand (annotations.md, Saidi ch. 4-5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpasim.analysis import Transforms, analyze
from cpasim.errors import CpasimError
from cpasim.tracing.jsonl import read_jsonl
from cpasim.tracing.memory import MemorySource

TRACES = Path(__file__).parent / "traces"


def _names(res):
    return [(e["name"], e["increment_ns"]) for e in res.edges]


def _src(*records):
    return MemorySource.from_dicts(list(records), name="t")


def B(t, sm, state, sys="h", **kw):
    return {"t": t, "op": "begin", "sys": sys, "sm": sm, "state": state, **kw}


def Q(t, op, sm, q, sys="h", **kw):
    return {"t": t, "op": op, "sys": sys, "sm": sm, "q": q, **kw}


# -- Saidi fig 4.3/4.4: stack -> driver through one queue -------------------------
#
# Stack: Append hdrs 0-5, Look up dest 5-9, Queue pkt 9-11, enq at 11.
# Driver: Idle and waiting (wait_empty at 0) until it dequeues at 13: the 13 units
# of idling weigh 0 and the 2 units between the packet's arrival (11) and the
# dequeue (13) are the communication latency.  Then Fill desc 13-17, Notify 17-18.
# cp = 5 + 4 + 2 + 2 (latency) + 0 (Idle 13-13) + 4 + 1 = 18 = elapsed.


def test_stack_driver_fig_4_4():
    res = analyze(read_jsonl(TRACES / "stack_driver.jsonl"), ("h", "Stack"), ("h", "Driver"))
    assert res.critical_path_ns == 18
    assert res.elapsed_ns == 18
    assert _names(res) == [
        ("h:Stack:(start)", 0),
        ("h:Stack:Append hdrs", 5),
        ("h:Stack:Look up dest", 4),
        ("h:Stack:Queue pkt", 2),
        ("h:Stack->h:Driver[h:pktq]", 2),
        ("h:Driver:Idle", 0),
        ("h:Driver:Fill desc", 4),
        ("h:Driver:Notify NIC", 1),
    ]
    assert [e["cumulative_ns"] for e in res.edges] == [0, 5, 9, 11, 13, 13, 17, 18]
    top = res.most_critical[0]
    assert top["name"] == "h:Stack:Append hdrs"
    assert top["share"] == pytest.approx(5 / 18)
    (q,) = res.to_json()["queues"]
    assert q["comm_latency_mean_ns"] == 2
    assert q["waited_empty_ns"] == 13
    assert res.warnings == []
    # The driver's profile: 13 units of Idle all waiting, Fill desc 4 active.
    driver = next(p for p in res.to_json()["profile"] if p["sm"] == "h:Driver")
    states = {s["state"]: s for s in driver["states"]}
    assert states["Idle"]["waiting_ns"] == 13
    assert states["Fill desc"]["active_ns"] == 4


def test_stack_driver_whatifs():
    src = read_jsonl(TRACES / "stack_driver.jsonl")
    # Without the 2-unit communication latency the path is 16.
    no_comm = analyze(src, "h:Stack", "h:Driver", transforms=Transforms(scale_comm=[("h:pktq", 0)]))
    assert no_comm.critical_path_ns == 16
    # Halving Look up dest (4 -> 2) saves 2.
    half = analyze(
        src, "h:Stack", "h:Driver", transforms=Transforms(scale=[("h:Stack:Look*", 0.5)])
    )
    assert half.critical_path_ns == 16
    # Breaking the data queue cuts the path: said, not invented.
    cut = analyze(src, "h:Stack", "h:Driver", transforms=Transforms(breaks=["h:pktq"]))
    assert cut.critical_path_ns is None and not cut.reachable
    assert any("not reachable from start" in w for w in cut.warnings)


# -- Saidi 1.3: the bird house ---------------------------------------------------
#
# Plan hands out two jobs at 0.  Carpenter: get wood 0-3, cut wood 3-5, build 5-9,
# hands over the house at 9.  Shopper: get paint 0-1, paint ready at 1.  Painter
# waits for the house, takes it at 9 and the paint (already there) at 9, paints
# 9-11.  cp = 3 + 2 + 4 + 2 = 11; getting paint is off the path with 8 units of
# slack: it could take up to 9 units before the house waits for it.


def test_birdhouse_section_1_3():
    src = read_jsonl(TRACES / "birdhouse.jsonl")
    res = analyze(src, "home:Plan", "home:Painter")
    assert res.critical_path_ns == 11 == res.elapsed_ns
    shares = {m["name"]: m["share"] for m in res.most_critical}
    assert shares == pytest.approx(
        {
            "home:Carpenter:get wood": 3 / 11,
            "home:Carpenter:cut wood": 2 / 11,
            "home:Carpenter:build": 4 / 11,
            "home:Painter:paint": 2 / 11,
        }
    )
    assert "home:Shopper:get paint" not in shares
    assert res.slack[0] == {"name": "home:Shopper->home:Painter[home:paint]", "slack_ns": 8.0}
    # Growing "get paint" within its slack changes nothing; past it, the path moves.
    for f, expect in ((9, 11), (10, 12)):
        tf = Transforms(scale=[("home:Shopper:get paint", f)])
        assert analyze(src, "home:Plan", "home:Painter", transforms=tf).critical_path_ns == expect


# -- links: a call into another layer and its return ------------------------------
#
# App: prepare 0-2, syscall at 2 links to Kernel and waits.  Kernel: copy 2-6,
# return 6-8, links back at 8.  App: after 8-10.  cp = 2 + 4 + 2 + 2 = 10.


def test_link_call_and_return():
    res = analyze(read_jsonl(TRACES / "link_call.jsonl"), "tx:App", "tx:App")
    assert res.critical_path_ns == 10 == res.elapsed_ns
    assert _names(res) == [
        ("tx:App:(start)", 0),
        ("tx:App:prepare", 2),
        ("tx:App:syscall", 0),
        ("tx:App->tx:Kernel[link]", 0),
        ("tx:Kernel:copy", 4),
        ("tx:Kernel:return", 2),
        ("tx:Kernel->tx:App[link]", 0),
        ("tx:App:after", 2),
    ]


# -- connections -------------------------------------------------------------------
#
# Two apps (c1, c2) share one NIC.  c1: write 0-2, NIC send 2-6, wire -> Sink at 10:
# cp 6 (the sink's first record is at 10 and only what it depends on counts).
# c2: write 0-5; the NIC turns to c2 at 6 (its c2 path starts from the unit: 5),
# send 6-10, wire, Sink recv 10-11: cp 5 + 4 + 1 = 10.


def test_two_connections_each_get_a_path():
    res = analyze(read_jsonl(TRACES / "two_conns.jsonl"), "tx:App", "rx:Sink")
    assert res.path is None
    assert set(res.connections) == {"c1", "c2"}
    assert res.connections["c1"].critical_path_ns == 6
    assert res.connections["c2"].critical_path_ns == 10
    c2 = [e["name"] for e in res.connections["c2"].edges]
    assert all("App#a" not in n for n in c2)
    assert res.connection_trace == {
        "tx:App#a": ["c1"],
        "tx:App#b": ["c2"],
        "tx:NIC": ["c1", "c2"],
        "rx:Sink": ["c1", "c2"],
    }
    only = analyze(read_jsonl(TRACES / "two_conns.jsonl"), "tx:App", "rx:Sink", conn="c2")
    assert only.critical_path_ns == 10
    js = res.to_json()
    assert set(js["connections"]) == {"c1", "c2"}
    with pytest.raises(CpasimError, match="no connection 'c3'"):
        analyze(read_jsonl(TRACES / "two_conns.jsonl"), "tx:App", "rx:Sink", conn="c3")


# -- queue operations ---------------------------------------------------------------


def test_capacity_edge_carries_latency_when_blocked():
    # Ring of 1.  P enqueues at 1 and blocks at 1; C (started by P's unit) takes it
    # at 4 (wait from 0, latency 3), works 4-6, so the slot is freed at 4;
    # P enqueues at 7: its slot edge weighs 7 - 4 = 3 and P's wait weighs 0.
    src = _src(
        Q(0, "declare", "P", "ring", capacity=1),
        B(0, "P", "make"),
        B(0, "C", "idle"),
        Q(0, "wait_empty", "C", "ring"),
        Q(1, "enq", "P", "ring"),
        Q(1, "wait_full", "P", "ring"),
        Q(4, "deq", "C", "ring"),
        B(4, "C", "work"),
        Q(7, "enq", "P", "ring"),
        B(7, "P", "end"),
        B(8, "P", "done"),
    )
    res = analyze(src, "h:P", "h:P")
    # P: make 0-1 (1), wait 1-7 (0) vs slot: cp(C deq at 4) = 1 + 3 = 4, + 3 = 7.
    assert res.critical_path_ns == 8 == res.elapsed_ns
    assert ("h:C->h:P[h:ring]", 3.0) in _names(res)
    assert res.loops == [{"edge": "h:C->h:P[h:ring]", "count": 1}]
    # A ring of 2 would not have blocked P: predicted cp = make 1 + end 1 = 2.
    grown = analyze(src, "h:P", "h:P", transforms=Transforms(capacity=[("h:ring", 1)]))
    assert grown.critical_path_ns == 2


def test_peek_reserve_resize_and_deq_all():
    src = _src(
        B(0, "A", "fill"),
        Q(0, "resize", "A", "win", n=2),  # two anonymous units (no producer)
        B(0, "B", "look"),
        Q(0, "wait_empty", "B", "win", n=4),
        Q(1, "enq", "A", "win", n=3),  # cp 1
        B(1, "A", "done"),
        Q(3, "peek", "B", "win", n=4),  # units 0..3, newest arrived at 1: c = 2, cp 3
        Q(3, "deq", "B", "win", n=-1),  # all 5 units, no longer waiting: c = 0
        Q(3, "reserve", "B", "out"),  # no capacity: no dependency
        Q(3, "resize", "B", "win", n=1),
        B(4, "B", "end"),
    )
    res = analyze(src, "h:A", "h:B")
    # A: fill 0-1 (cp 1); B's peek: 1 + 2 = 3; look 3-4: cp 4 = elapsed.
    assert res.critical_path_ns == 4 == res.elapsed_ns
    q = {d["queue"]: d for d in res.to_json()["queues"]}["h:win"]
    assert q["held_at_end"] == 1
    assert q["max_occupancy"] == 5


def test_waiting_when_condition_holds_is_a_warning():
    src = _src(
        B(0, "A", "a"),
        Q(1, "enq", "A", "q"),
        B(2, "B", "b"),
        Q(2, "wait_empty", "B", "q"),
        Q(3, "deq", "B", "q"),
        Q(3, "wait_full", "B", "q"),
        Q(4, "enq", "B", "q"),
    )
    res = analyze(src, "h:A", "h:B")
    assert len(res.warnings) == 2
    assert "wait_empty on h:q while it held 1 >= 1 units" in res.warnings[0]
    assert "(record 4)" in res.warnings[0]
    assert "wait_full on h:q while it had room (no capacity declared)" in res.warnings[1]


def test_taking_more_than_held_is_an_error_unless_lenient():
    path = TRACES / "bad_deq_more.jsonl"
    with pytest.raises(CpasimError) as err:
        analyze(read_jsonl(path), "h:A", "h:B")
    assert str(err.value).startswith(f"{path}: record 3: h:B takes 3 units from queue h:x")
    res = analyze(read_jsonl(path), "h:A", "h:B", lenient=True)
    assert res.critical_path_ns == 2
    assert len(res.warnings) == 1 and "more units than held" in res.warnings[0]


def test_unknown_start_or_end_lists_the_state_machines():
    src = read_jsonl(TRACES / "stack_driver.jsonl")
    with pytest.raises(
        CpasimError, match=r"no state machine h:Nic; the trace has: h:Driver, h:Stack"
    ):
        analyze(src, "h:Stack", "h:Nic")
    with pytest.raises(CpasimError, match="expected SYS:SM"):
        analyze(src, "Stack", "h:Driver")


def test_scale_identity_leaves_everything_unchanged():
    src = read_jsonl(TRACES / "birdhouse.jsonl")
    base = analyze(src, "home:Plan", "home:Painter").to_json()
    same = analyze(
        src, "home:Plan", "home:Painter", transforms=Transforms(scale=[("home:*", 1)])
    ).to_json()
    same.pop("transforms")
    base.pop("transforms")
    assert same == base


def test_bad_transforms_are_refused():
    for kwargs, words in [
        ({"scale": [("h:a->h:b[q]", 0.5)]}, "names an edge; scale takes states"),
        ({"capacity": [("*->*[q]", 1)]}, "names an edge; capacity takes queues"),
        ({"breaks": ["h:a->h:b[q"]}, "unclosed"),
        ({"scale_comm": [("->h:b[q]", 0.5)]}, "expected PRODUCER->CONSUMER"),
        ({"scale": [("h:[ab", 0.5)]}, "unclosed"),
        ({"scale": [("h:*", -1)]}, ">= 0"),
        ({"scale": [("h:*", "x")]}, "not a number"),
        ({"capacity": [("h:q", -2)]}, "shrinking"),
        ({"capacity": [("h:q", 1.5)]}, "whole number"),
    ]:
        with pytest.raises(CpasimError, match=words):
            Transforms(**kwargs)


def test_reserve_waits_for_the_slot_like_an_enqueue():
    # Ring of 1.  P fills it at 1 and blocks; C (waiting since 0) takes the unit at 4
    # (latency 3, cp 4).  P reserves the freed slot at 6: slot edge 6 - 4 = 2, cp 6;
    # fills 6-8 and enqueues at 8 (no longer blocked, so the slot edge weighs 0 and
    # P's own 2 units win: cp 8); end 8-9.  cp = 9 = elapsed.
    src = _src(
        Q(0, "declare", "P", "ring", capacity=1),
        B(0, "P", "make"),
        B(0, "C", "idle"),
        Q(0, "wait_empty", "C", "ring"),
        Q(1, "enq", "P", "ring"),
        Q(1, "wait_full", "P", "ring"),
        Q(4, "deq", "C", "ring"),
        B(4, "C", "work"),
        Q(6, "reserve", "P", "ring"),
        B(6, "P", "fill"),
        Q(8, "enq", "P", "ring"),
        B(8, "P", "end"),
        B(9, "P", "done"),
    )
    res = analyze(src, "h:P", "h:P")
    assert res.critical_path_ns == 9 == res.elapsed_ns
    assert ("h:C->h:P[h:ring]", 2.0) in _names(res)
    assert ("h:P:fill", 2.0) in _names(res)
    q = {d["queue"]: d for d in res.to_json()["queues"]}["h:ring"]
    assert q["waited_full_ns"] == 5 and q["waited_empty_ns"] == 4
    assert q["comm_latency_max_ns"] == 3
