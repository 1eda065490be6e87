"""The critical path of each flow of a traced run with ``[[flows]]``.

Flow ``i`` is connection ``c<i>``; its path runs between the records of its own
application (its kind's ``ends``, :mod:`cpasim.model.flow_kinds`), and the analyzer
keeps one path per connection, so one pass over the trace gives every flow of a kind:

* a bulk flow: from its writer's first record (``tx:App#i``) to its reader's last
  (``rx:App#i``), as a stream's path;
* an rpc flow: its client from first to last record (``tx:App#i``): requests,
  the server's work, responses and think time;
* a ping flow: the ping application from first to last record (``tx:Ping#i``):
  its requests through the path, the peer's kernel, the replies.

:func:`flow_paths` gives each flow's :class:`~cpasim.predict.runs.PathSummary`
(its length, its most critical states and loops, the bottleneck they name);
:func:`flow_path` one flow's.  The run's own analysis (``predict``, ``validate``)
follows the bulk flows' and rpc flows' requests together, tx:App to rx:App: a
ping flow, whose application is ``Ping``, is none of its paths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from cpasim.analysis import AnalysisResult, PathResult, analyze_many
from cpasim.analysis.transforms import Transforms
from cpasim.errors import CpasimError
from cpasim.model.flow_kinds import flow_kind
from cpasim.predict.runs import MIN_SHARE, TOP, PathSummary, merge_instances


def path_summary(path: PathResult, what: str) -> PathSummary:
    """One connection's path, reduced as :func:`~cpasim.predict.runs.summarize` reduces
    a run's (states folded over their instances, the first :data:`TOP` of them)."""
    if not path.reachable or path.critical_path_ns is None:
        raise CpasimError(f"{what}: the critical path is cut (its end is not reachable)")
    top = [m for m in merge_instances(path.most_critical) if m["share"] > MIN_SHARE][:TOP]
    return PathSummary(
        critical_path_ns={path.conn or "": float(path.critical_path_ns)},
        bottleneck=top[0]["name"] if top else None,
        share=float(top[0]["share"]) if top else 0.0,
        most_critical=top,
        loops=list(path.loops[:TOP]),
    )


def _paths_of(res: AnalysisResult) -> dict[str, PathResult]:
    if res.path is not None:
        return {res.path.conn: res.path} if res.path.conn else {}
    return dict(res.connections)


def flow_paths(
    source: Callable, flows: Iterable[Mapping], *, engine: str | None = None
) -> dict[int, PathSummary]:
    """Flow index → its path, for each of ``flows`` (a run's ``flows`` entries: their
    ``index`` and ``kind``); ``source()`` opens the trace.  One pass per kind."""
    by_kind: dict[str, list[int]] = {}
    for f in flows:
        by_kind.setdefault(f["kind"], []).append(int(f["index"]))
    out: dict[int, PathSummary] = {}
    for kind, indexes in by_kind.items():
        start, end = flow_kind(kind).ends
        (res,) = analyze_many(source(), start, end, [Transforms()], details=False, engine=engine)
        paths = _paths_of(res)
        for i in indexes:
            path = paths.get(f"c{i}")
            if path is None:  # a single-connection trace names no connection
                if len(indexes) == 1 and res.path is not None:
                    path = res.path
                else:
                    raise CpasimError(f"flow {i} ({kind}): no path of c{i} in the trace")
            out[i] = path_summary(path, f"flow {i} ({kind})")
    return out


def flow_path(source: Callable, flow: Mapping, *, engine: str | None = None) -> PathSummary:
    """One flow's path (``flow``: its entry in the run's ``flows``)."""
    return flow_paths(source, [flow], engine=engine)[int(flow["index"])]


def flows_json(flows: Iterable[Mapping], paths: Mapping[int, PathSummary]) -> list[dict]:
    """Per flow: who it is (index, kind, congestion control) and its path."""
    out = []
    for f in flows:
        p = paths[int(f["index"])]
        out.append(
            {
                "index": f["index"],
                "kind": f["kind"],
                "cc": f.get("cc"),
                "critical_path_ns": next(iter(p.critical_path_ns.values())),
                "bottleneck": p.bottleneck,
                "share": p.share,
                "most_critical": p.most_critical,
                "loops": p.loops,
            }
        )
    return out
