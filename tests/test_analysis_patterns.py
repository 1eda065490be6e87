"""What-if patterns over the names annotations.md defines: states ``sys:sm:state``,
queues ``sys:queue`` and communication edges ``sys:sm->sys:sm[queue]``.

Any glob is a pattern (``*`` included); ``--scale-comm`` and ``--break`` take
queue or edge patterns, and an edge pattern applies to each edge (producer,
consumer, queue) on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_engine import _outcome, _passes, _rechunk, soups
from typer.testing import CliRunner

from cpasim.analysis import Transforms, analyze
from cpasim.cli import app, commands  # noqa: F401  (registers the commands)
from cpasim.errors import CpasimError
from cpasim.tracing.jsonl import read_jsonl
from cpasim.tracing.memory import MemorySource

TRACES = Path(__file__).parent / "traces"
STACK = str(TRACES / "stack_driver.jsonl")
ENGINES = ["python", "compiled"]
runner = CliRunner()


def B(t, sm, state):
    return {"t": t, "op": "begin", "sys": "h", "sm": sm, "state": state}


def Q(t, op, sm, q, **kw):
    return {"t": t, "op": op, "sys": "h", "sm": sm, "q": q, **kw}


def two_producers() -> MemorySource:
    """P1 (the start) starts P2 through queue ``go`` at 0 and enqueues a unit at 2,
    P2 one at 6; C, waiting since 0, takes both at 10.  Through P2's unit the path
    is 6 (P2's work) + 4 (latency) = 10; through P1's, 2 + 4 = 6."""
    return MemorySource.from_dicts(
        [
            B(0, "P1", "work"),
            Q(0, "enq", "P1", "go"),
            B(0, "P2", "work"),
            Q(0, "deq", "P2", "go"),
            B(0, "C", "idle"),
            Q(0, "wait_empty", "C", "q", n=2),
            Q(2, "enq", "P1", "q"),
            Q(6, "enq", "P2", "q"),
            Q(10, "deq", "C", "q", n=2),
        ],
        name="two.jsonl",
    )


def _cp(engine, **kw) -> float | None:
    res = analyze(two_producers(), "h:P1", "h:C", transforms=Transforms(**kw), engine=engine)
    return res.critical_path_ns


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bare_star_matches_every_name(engine):
    src = read_jsonl(TRACES / "stack_driver.jsonl")

    def run(**kw):
        tf = Transforms(**kw)
        return analyze(src, "h:Stack", "h:Driver", transforms=tf, engine=engine).critical_path_ns

    assert run() == 18
    assert run(scale_comm=[("*", 0)]) == run(scale_comm=[("h:pktq", 0)]) == 16
    # Every state at half (the latency is the record's): 11 / 2 + 2 + 5 / 2.
    assert run(scale=[("*", 0.5)]) == 10
    assert run(capacity=[("*", 1)]) == run(capacity=[("h:pktq", 1)])
    assert run(scale_comm=[("*:pkt*", 0)]) == 16


@pytest.mark.parametrize("engine", ENGINES)
def test_an_edge_pattern_scales_the_latency_of_its_edges_only(engine):
    assert _cp(engine) == 10
    # P2's edge without its latency: 6 through P2, still 6 through P1.
    assert _cp(engine, scale_comm=[("h:P2->h:C[h:q]", 0)]) == 6
    # P1's edge doubled: 2 + 8 = 10 against P2's 10; P2's unit came later.
    assert _cp(engine, scale_comm=[("h:P1->h:C[h:q]", 2)]) == 10
    assert _cp(engine, scale_comm=[("h:P1->h:C[h:q]", 3)]) == 14
    # Every edge into C, by any spelling of the contract's names.
    for pattern in ("*->h:C[*]", "h:*->h:C", "*->*[h:q]", "h:P?->h:C[h:[q]]"):
        assert _cp(engine, scale_comm=[(pattern, 0)]) == 6, pattern
    # The first matching entry wins, queue or edge pattern.
    assert _cp(engine, scale_comm=[("h:P2->*[*]", 0), ("h:q", 3)]) == 14
    assert _cp(engine, scale_comm=[("h:q", 3), ("h:P2->*[*]", 0)]) == 18
    # An edge pattern that matches no edge changes nothing.
    assert _cp(engine, scale_comm=[("h:C->h:P1[h:q]", 0)]) == 10


@pytest.mark.parametrize("engine", ENGINES)
def test_breaking_an_edge_leaves_the_other_units_dependencies(engine):
    # Without P2's edge, C depends on P1's unit: 2 + 4.
    assert _cp(engine, breaks=["h:P2->h:C[h:q]"]) == 6
    # Without P1's edge, P2's still decides; and P1 is where the path starts.
    assert _cp(engine, breaks=["h:P1->h:C[*]"]) == 10
    # Breaking the queue cuts every edge: the end is not reachable.
    assert _cp(engine, breaks=["h:*->h:C[*]"]) is None
    assert _cp(engine, breaks=["*"]) is None


def test_both_engines_agree_on_edge_patterns():
    whatifs = [
        {"scale_comm": [("h:P2->h:C[h:q]", 0.5)], "breaks": ["h:P1->*"]},
        {"scale_comm": [("h:P1->*[*]", 3.7), ("*", 0.25)]},
        {"breaks": ["*->h:C[h:q]"], "capacity": [("*", 1)]},
    ]
    for kw in whatifs:
        a, b = (
            analyze(two_producers(), "h:P1", "h:C", transforms=Transforms(**kw), engine=e)
            for e in ENGINES
        )
        assert a.to_json() == b.to_json(), kw


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"scale": [("h:P1->h:C[h:q]", 0.5)]}, "names an edge; scale takes states"),
        ({"capacity": [("*->*[h:q]", 1)]}, "names an edge; capacity takes queues"),
        ({"breaks": ["h:P1->h:C[h:q"]}, "unclosed"),
        ({"scale_comm": [("->h:C[h:q]", 0.5)]}, "expected PRODUCER->CONSUMER[QUEUE]"),
        ({"breaks": ["h:P1->[h:q]"]}, "expected PRODUCER->CONSUMER[QUEUE]"),
        ({"breaks": [f"h:q{i}" for i in range(64)]}, "64 patterns; at most 63"),
    ],
)
def test_malformed_patterns_are_refused(kwargs, words):
    with pytest.raises(CpasimError, match=re.escape(words)):
        Transforms(**kwargs)


def test_cli_accepts_the_contract_patterns():
    base = ["analyze", STACK, "--start", "h:Stack", "--end", "h:Driver", "--json"]
    for extra in (
        ["--scale-comm", "*=0"],
        ["--scale-comm", "h:Stack->h:Driver[h:pktq]=0"],
        ["--scale-comm", "*->*[*]=0", "--scale", "*=1"],
        ["--scale-comm", "*:*->h:Driver=0"],
    ):
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code == 0, (extra, r.output)
        assert '"critical_path_ns": 16' in r.output
    # Accepted, and they cut the one data path: the analyzer says so.
    for extra in (
        ["--break", "*"],
        ["--break", "*:pkt*"],
        ["--break", "h:Stack->h:Driver[*]"],
        ["--capacity", "*=+1"],
    ):
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code != 0
        assert "not reachable from start" in str(r.exception) + r.output, extra


@pytest.mark.parametrize(
    ("option", "pattern", "words"),
    [
        ("--scale-comm", "h:Nic->h:Driver[*]=0", "h:Nic->h:Driver[*]': producer 'h:Nic' matches"),
        ("--break", "h:Stack->h:Nick", "consumer 'h:Nick' matches no state machine"),
        ("--scale-comm", "*->*[h:ring]=0", "queue 'h:ring' matches no queue (sys:queue)"),
        ("--scale", "*:Nothing=2", "--scale '*:Nothing' matches no state"),
    ],
)
def test_cli_edge_pattern_parts_must_each_match(option, pattern, words):
    r = runner.invoke(
        app, ["analyze", STACK, "--start", "h:Stack", "--end", "h:Driver", option, pattern]
    )
    assert r.exit_code != 0, r.output
    assert words in str(r.exception) or words in r.output


# -- both engines, random records --------------------------------------------------

EDGES = ["*->r:C[*]", "s:A->*[s:Q*]", "s:B*->*", "*->s:B#1[*:*]", "s:*->r:*[r:Q3]", "*"]


@st.composite
def edge_whatifs(draw):
    """Edge patterns, alone and mixed with queue patterns, in both lists."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        factor = draw(st.sampled_from([0.0, 0.5, 2.0, 3.7]))
        comm = draw(st.lists(st.sampled_from([*EDGES, "s:Q1", "r:Q3"]), max_size=3))
        breaks = draw(st.lists(st.sampled_from([*EDGES[:-1], "s:Q2"]), max_size=2))
        out.append(
            Transforms(
                scale_comm=[(p, factor * (i + 1)) for i, p in enumerate(comm)],
                breaks=breaks,
                capacity=[("s:Q2", 1)] if draw(st.booleans()) else [],
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(soups(), edge_whatifs(), st.lists(st.integers(1, 30), min_size=1, max_size=3))
def test_engines_agree_on_edge_patterns(records, tfs, sizes):
    src = _rechunk(MemorySource.from_dicts(records), sizes)
    start, end = ("s", "A"), ("r", "C")
    ref = _outcome(lambda: _passes("python", src, start, end, tfs, True, 16384, 10_000))
    got = _outcome(lambda: _passes("compiled", src, start, end, tfs, True, 3, 10_000))
    assert got == ref
