"""The analyzer's results, bit for bit, on fixed traces.

Each case reduces everything a pass produces (the result JSON with exact float
reprs, per-state transition counts and times, who adds to / takes from each
queue, link counts) to a SHA-256 digest.  The reference digests are the
output of the plain record-by-record pass; speed work on the analyzer must
reproduce them exactly, whatever the chunking and however often it commits,
with both engines (the compiled kernel and the reference pass).
The model traces are stored short runs (``scenarios/tcp-stream.toml``, 4 ms;
``scenarios/webserver.toml``, 3 ms, four connections) so that model changes
do not move them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cpasim.analysis import ENGINES, Transforms, analyze_many
from cpasim.analysis.compiled import CompiledPass
from cpasim.analysis.criticalpath import CriticalPathPass
from cpasim.analysis.report import Names, path_result, profile, queue_stats
from cpasim.analysis.synthetic import PipelineSpec, pipeline_source
from cpasim.tracing import open_trace
from cpasim.tracing.jsonl import read_jsonl
from cpasim.tracing.memory import MemorySource

TRACES = Path(__file__).parent / "traces"

PIPELINE_WHATIFS = [
    Transforms(),
    Transforms(scale=[("tx:Stage*:process", 0.5), ("rx:App:*", 2.0)]),
    Transforms(scale_comm=[("rx:Q*", 0.0)], breaks=["tx:Window"]),
    Transforms(capacity=[("tx:Window", 8), ("rx:Q3", 16)]),
]
MODEL_WHATIFS = [
    Transforms(),
    Transforms(scale=[("tx:MAC:*", 0.1), ("*:Link:propagate", 0.5)]),
    Transforms(breaks=["tx:*"], scale_comm=[("rx:*", 2.0)]),
]

PIPELINES = {
    "ring8": dict(items=400, stages=6, ring=8, window=16),
    "unbounded": dict(items=300, stages=4, ring=0, window=0, units=3, conn=None),
    "units2": dict(items=300, stages=5, ring=4, window=8, units=2, seed=7),
}


def _no_core_lent(result: dict) -> dict:
    """``result`` without the core-lent figures, which must be 0: these traces have no
    ``run`` records (the digests date from before the figures; tests of them:
    tests/test_analysis_core_lent.py)."""
    for path in [result, *(result.get("connections") or {}).values()]:
        for m in path.get("most_critical") or []:
            assert m.pop("core_lent_ns") == 0.0
            assert m.pop("core_lent_share") == 0.0
    return result


def _blob(res, p: CriticalPathPass) -> dict:
    return {
        "result": _no_core_lent(res.to_json()),
        "transitions": sorted(p.transition_counts()),
        "queue_ops": sorted(p.queue_ops()),
        "links": sorted(p.links.items()),
    }


def _digest(blob) -> str:
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def _pipeline(name: str, chunk: int) -> MemorySource:
    src = pipeline_source(PipelineSpec(**PIPELINES[name]), chunk=chunk)
    return MemorySource(list(src.chunks()), src.key)


def _cases():
    """name -> (source factory, start, end, transforms, lenient)."""
    cases = {}
    for name in PIPELINES:
        for chunk in (997, 65536):
            cases[f"{name}/{chunk}"] = (
                lambda name=name, chunk=chunk: _pipeline(name, chunk),
                "tx:App",
                "rx:App",
                PIPELINE_WHATIFS,
                False,
            )
    cases["tcp-stream"] = (
        lambda: open_trace(TRACES / "model_tcp_stream.cpt"),
        "tx:App",
        "rx:App",
        MODEL_WHATIFS,
        False,
    )
    cases["webserver"] = (
        lambda: open_trace(TRACES / "model_webserver.cpt"),
        "rx:App",
        "rx:App",
        MODEL_WHATIFS,
        False,
    )
    for fname, start, end in [
        ("stack_driver", "h:Stack", "h:Driver"),
        ("birdhouse", "home:Plan", "home:Painter"),
        ("link_call", "tx:App", "tx:App"),
        ("two_conns", "tx:App", "rx:Sink"),
        ("bad_deq_more", "h:A", "h:B"),
    ]:
        cases[fname] = (
            lambda fname=fname: read_jsonl(TRACES / f"{fname}.jsonl"),
            start,
            end,
            [Transforms()],
            True,
        )
    return cases


CASES = _cases()

#: Digests of the record-by-record pass, one per what-if of each case.
EXPECTED = {
    "bad_deq_more": ["52d225e9f942b934"],
    "birdhouse": ["47cd45d6e44feb4c"],
    "link_call": ["81b02c0239c64a41"],
    "ring8/65536": ["5e68494de47060fd", "5f57e47d3356b815", "168e4c21b0d1e803", "1bbccc9bc2965bab"],
    "ring8/997": ["5e68494de47060fd", "5f57e47d3356b815", "168e4c21b0d1e803", "1bbccc9bc2965bab"],
    "stack_driver": ["82dfb160c9c2e93d"],
    "tcp-stream": ["617cbc9033493c89", "94ec4bdb0285f316", "3f79a11502ca09be"],
    "two_conns": ["fa724cf4a1110b99"],
    "unbounded/65536": [
        "4ef3697f501fe0a2",
        "507f89e24588d3c1",
        "156f235c40a7454c",
        "0e4d702c8a94fb1d",
    ],
    "unbounded/997": [
        "4ef3697f501fe0a2",
        "507f89e24588d3c1",
        "156f235c40a7454c",
        "0e4d702c8a94fb1d",
    ],
    "units2/65536": [
        "4f34656288974393",
        "cfc1e45dab583691",
        "4448fbf0e9d2ee82",
        "6b8727b9812a6d62",
    ],
    "units2/997": ["4f34656288974393", "cfc1e45dab583691", "4448fbf0e9d2ee82", "6b8727b9812a6d62"],
    "webserver": ["9a54be9fb52f804b", "697004b3dcd72c12", "8910fa0b4eab5e9b"],
}


def case_digests(name: str, engine: str = "python") -> list[str]:
    make, start, end, whatifs, lenient = CASES[name]
    results = analyze_many(make(), start, end, whatifs, lenient=lenient, engine=engine)
    return [_digest(_blob(r, r.pass_state)) for r in results]


def committed_digest(name: str, commit_every: int, engine: str = "python") -> str:
    """Path, profile and queues of a pass that commits every ``commit_every`` records."""
    make, start, end, whatifs, lenient = CASES[name]
    src = make()
    p = (CompiledPass if engine == "compiled" else CriticalPathPass)(
        whatifs[-1],
        tuple(start.split(":")),
        tuple(end.split(":")),
        lenient=lenient,
        commit_every=commit_every,
    )
    for chunk in src.chunks():
        p.feed(chunk, src.key)
    if engine == "compiled":
        p = p.view()
    names = Names(src.key)
    paths = {
        c: _no_core_lent(path_result(p, names, None, e, 0.01).to_json()) for c, e in p.ends.items()
    }
    return _digest(
        {
            "paths": sorted(paths.items()),
            "profile": profile(p, names),
            "queues": queue_stats(p, names),
        }
    )


COMMITTED = {
    "ring8/997": "a142362514f765bf",
    "tcp-stream": "f66ce8d0d588b2d4",
    "webserver": "ec12a968e1eec2ad",
}


#: The reference pass on the synthetic pipelines (a fifth to a third of a second a
#: case): the whole suite runs it; the quick suite, on the model's traces and fixtures.
SLOW_REFERENCE = {name for name in CASES if name.split("/")[0] in PIPELINES}


def _engines(names):
    """(name, engine) pairs, the reference pass on SLOW_REFERENCE marked slow."""
    return [
        pytest.param(name, engine, marks=pytest.mark.slow)
        if engine == "python" and name in SLOW_REFERENCE
        else (name, engine)
        for name in names
        for engine in ENGINES
    ]


@pytest.mark.parametrize(("name", "engine"), _engines(sorted(CASES)))
def test_results_are_unchanged(name, engine):
    assert case_digests(name, engine) == EXPECTED[name]


@pytest.mark.parametrize(("name", "engine"), _engines(["ring8/997", "tcp-stream", "webserver"]))
def test_frequent_commits_change_nothing(name, engine):
    assert committed_digest(name, 256, engine) == COMMITTED[name]
    assert committed_digest(name, 1 << 30, engine) == COMMITTED[name]
