"""Properties of the pass on random, fully annotated pipelines (hypothesis).

The traces come from :mod:`cpasim.analysis.synthetic`: random stage counts,
ring sizes, credit windows, units per item, wake-up latencies and per-item
work, every block annotated.  Such a trace has no unexplained waiting, so the
identity invariant must hold; transforms must move the path the right way.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpasim.analysis import Transforms, analyze, analyze_many
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.pathlog import PARENT, Summary
from cpasim.analysis.synthetic import PipelineSpec, pipeline_source

REL = 1e-9


@st.composite
def specs(draw):
    units = draw(st.integers(1, 3))
    ring = draw(st.sampled_from([0, units, units + 1, 2 * units + 1]))
    return PipelineSpec(
        items=draw(st.integers(1, 25)),
        stages=draw(st.integers(1, 4)),
        ring=ring,
        window=draw(st.integers(0, 4)),
        work_ns=draw(st.floats(1.0, 500.0)),
        wake_ns=draw(st.sampled_from([0.0, 1.0, 37.5])),
        units=units,
        seed=draw(st.integers(0, 2**31)),
    )


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _close(a, b):
    return abs(a - b) <= REL * max(1.0, abs(a), abs(b))


@SETTINGS
@given(specs())
def test_identity_invariant(spec):
    res = analyze(pipeline_source(spec), "tx:App", "rx:App")
    assert res.warnings == []
    assert _close(res.critical_path_ns, res.elapsed_ns), (res.critical_path_ns, res.elapsed_ns)
    # The listing adds up: each cumulative = previous + increment.
    cum = 0.0
    for e in res.edges:
        cum += e["increment_ns"]
        assert _close(cum, e["cumulative_ns"])
    # Per-name totals add up to the path length.
    assert _close(sum(res.path.state_totals.values()), res.critical_path_ns)


@SETTINGS
@given(
    specs(),
    st.sampled_from(["tx:App:*", "*:Stage0:process", "rx:*", "*:*:push"]),
    st.floats(0.0, 1.0),
)
def test_scaling_down_never_lengthens(spec, pattern, factor):
    base, scaled = analyze_many(
        pipeline_source(spec),
        "tx:App",
        "rx:App",
        [Transforms(), Transforms(scale=[(pattern, factor)])],
    )
    assert scaled.critical_path_ns <= base.critical_path_ns * (1 + REL)


@SETTINGS
@given(specs(), st.sampled_from(["tx:Window", "*:Q[1-9]", "rx:*"]))
def test_break_never_lengthens(spec, pattern):
    base, broken = analyze_many(
        pipeline_source(spec), "tx:App", "rx:App", [Transforms(), Transforms(breaks=[pattern])]
    )
    if broken.reachable:
        assert broken.critical_path_ns <= base.critical_path_ns * (1 + REL)
    else:
        # only breaking a data queue may cut the path
        assert pattern != "tx:Window"


@SETTINGS
@given(specs())
def test_scale_one_changes_nothing(spec):
    base, same = analyze_many(
        pipeline_source(spec),
        "tx:App",
        "rx:App",
        [Transforms(), Transforms(scale=[("*:*", 1)], scale_comm=[("*:*", 1)])],
    )
    a, b = base.to_json(), same.to_json()
    a.pop("transforms")
    b.pop("transforms")
    assert a == b


@SETTINGS
@given(specs(), st.integers(1, 3))
def test_growing_the_window_never_lengthens(spec, k):
    spec = dataclasses.replace(spec, window=max(spec.window, 1))
    base, grown = analyze_many(
        pipeline_source(spec),
        "tx:App",
        "rx:App",
        [Transforms(), Transforms(capacity=[("tx:Window", k)])],
    )
    assert grown.critical_path_ns <= base.critical_path_ns * (1 + REL)


def _run(spec, commit_every, chunk=65536):
    src = pipeline_source(spec, chunk=chunk)
    p = CriticalPathPass(Transforms(), ("tx", "App"), ("rx", "App"), commit_every=commit_every)
    for chunk in src.chunks():
        p.feed(chunk, src.key)
    return p, src


@settings(max_examples=25, deadline=None)
@given(specs(), st.integers(1, 50))
def test_commits_and_chunking_change_nothing(spec, every):
    from cpasim.analysis import _result

    p1, src = _run(spec, 10**9)
    # small chunks too: names keep appearing in the key between chunks
    p2, _ = _run(spec, every, chunk=every)
    r1 = _result(p1, src, ("tx", "App"), ("rx", "App"), None, 0.01).to_json()
    r2 = _result(p2, src, ("tx", "App"), ("rx", "App"), None, 0.01).to_json()
    assert r1 == r2


@pytest.mark.slow
def test_live_path_nodes_stay_bounded():
    """Memory is bounded by what live paths disagree on, not by trace length."""
    spec = PipelineSpec(items=3000, stages=4, ring=4, window=8, seed=3)
    p, _src = _run(spec, 512)
    assert p.records > 90_000
    live = set()
    for h in p.handles():
        while h is not None and not isinstance(h, Summary) and id(h) not in live:
            live.add(id(h))
            h = h[PARENT]
    assert p.folded > 10_000  # the path prefix was folded into summaries as it settled
    assert len(live) < 4 * 512, len(live)


@pytest.mark.slow
def test_paths_that_part_for_good_are_folded_apart():
    """Two loops whose paths share nothing from the start to the end (the two
    halves of a TCP window on a link-limited stream) would pin the fold point
    at the start and keep every node: each is folded on its own instead, and
    the result is that of a pass that never commits."""
    from cpasim.analysis import _result
    from cpasim.analysis.synthetic import parted_loops_source

    src = parted_loops_source(20_000)
    results, live_nodes = [], []
    for every in (10**9, 512):
        p = CriticalPathPass(Transforms(), ("tx", "App"), ("rx", "App"), commit_every=every)
        for chunk in src.chunks():
            p.feed(chunk, src.key)
        live = set()
        for h in p.handles():
            while h is not None and not isinstance(h, Summary) and id(h) not in live:
                live.add(id(h))
                h = h[PARENT]
        live_nodes.append(len(live))
        results.append(_result(p, src, ("tx", "App"), ("rx", "App"), None, 0.01).to_json())
    assert results[0] == results[1]
    assert p.records > 75_000
    assert live_nodes[0] > 75_000  # without commits: every node
    assert live_nodes[1] < 2_000, live_nodes[1]
