"""Critical-path analysis of annotation traces (annotations.md; Saidi ch. 4-5).

    from cpasim.analysis import analyze, analyze_many, Transforms
    res = analyze(source, start=("tx", "App"), end=("rx", "App"))
    res.critical_path_ns, res.most_critical, res.loops, res.to_json()

One streaming pass computes the critical path, its listing, the most critical
states, resource loops, slack, per-SM profiles and per-queue statistics;
:func:`analyze_many` runs several what-ifs from a single read of the trace.
Works on any :class:`~cpasim.tracing.records.TraceSource`; never imports the model.

Two engines give bit-identical results: the compiled kernel
(:mod:`cpasim.analysis.compiled`, numba, the default) and the readable
reference pass (:class:`~cpasim.analysis.criticalpath.CriticalPathPass`),
chosen with ``engine=`` or ``$CPASIM_ANALYZER=python``.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from cpasim.analysis.criticalpath import COMMIT_EVERY, CriticalPathPass
from cpasim.analysis.names import hint
from cpasim.analysis.report import (
    AnalysisResult,
    Names,
    PathResult,
    connection_trace,
    path_result,
    profile,
    queue_stats,
    warning_lines,
)
from cpasim.analysis.transforms import Transforms
from cpasim.errors import CpasimError
from cpasim.tracing.records import TraceSource

__all__ = ["AnalysisResult", "PathResult", "Transforms", "analyze", "analyze_many", "parse_sm"]

#: Analyzer engines: the compiled kernel and the readable reference pass.
ENGINES = ("compiled", "python")

#: Names above this share of the critical path are listed as most critical.
MIN_SHARE = 0.01


def parse_sm(spec) -> tuple[str, ...]:
    """``"sys:sm"`` / ``"sys:sm#inst"`` / ``(sys, sm)`` / ``(sys, sm, inst)`` → tuple."""
    if isinstance(spec, str):
        sys, sep, rest = spec.partition(":")
        if not sep or not sys or not rest:
            raise CpasimError(f"state machine {spec!r}: expected SYS:SM (or SYS:SM#INST)")
        sm, hash_, inst = rest.partition("#")
        return (sys, sm, inst) if hash_ else (sys, sm)
    spec = tuple(spec)
    if len(spec) not in (2, 3) or not all(isinstance(x, str) and x for x in spec):
        raise CpasimError(f"state machine {spec!r}: expected (sys, sm) or (sys, sm, inst)")
    return spec


def _display(spec: tuple[str, ...]) -> str:
    return f"{spec[0]}:{spec[1]}" + (f"#{spec[2]}" if len(spec) == 3 else "")


def analyze(
    source: TraceSource,
    start,
    end,
    conn: str | None = None,
    transforms: Transforms | None = None,
    lenient: bool = False,
    *,
    min_share: float = MIN_SHARE,
    listing_limit: int = 10_000,
    engine: str | None = None,
    conns: Sequence[str] | None = None,
) -> AnalysisResult:
    """Critical path from ``start``'s first record to ``end``'s last, in one pass.

    ``start``/``end``: ``(sys, sm)`` (every instance) or ``(sys, sm, inst)``,
    or the same as ``"sys:sm[#inst]"``.  ``conn`` restricts the analysis to one
    connection id, ``conns`` to several.  The listing keeps the first
    ``listing_limit`` edges.  ``engine``: see :func:`analyze_many`.
    """
    return analyze_many(
        source,
        start,
        end,
        [transforms or Transforms()],
        conn=conn,
        lenient=lenient,
        min_share=min_share,
        listing_limit=listing_limit,
        engine=engine,
        conns=conns,
    )[0]


def engine_name(engine: str | None = None) -> str:
    """``engine``, else ``$CPASIM_ANALYZER``, else ``"compiled"``; checked."""
    name = engine or os.environ.get("CPASIM_ANALYZER") or "compiled"
    if name not in ENGINES:
        raise CpasimError(
            f"analyzer engine {name!r} (CPASIM_ANALYZER or engine=): expected one of "
            + ", ".join(ENGINES)
        )
    return name


def analyze_many(
    source: TraceSource,
    start,
    end,
    transforms: Sequence[Transforms],
    conn: str | None = None,
    lenient: bool = False,
    *,
    min_share: float = MIN_SHARE,
    listing_limit: int = 10_000,
    engine: str | None = None,
    mark: float | None = None,
    details: bool = True,
    commit_every: int | None = None,
    conns: Sequence[str] | None = None,
) -> list[AnalysisResult]:
    """Several what-ifs from one read of the trace: one result per ``Transforms``.

    ``engine``: ``"compiled"`` (numba, the default) or ``"python"`` (the
    reference :class:`CriticalPathPass`); ``$CPASIM_ANALYZER`` sets the default.
    Both give bit-identical results.  ``mark``: also note each path's length as
    of the records before this time (``AnalysisResult.lengths_at_mark``), what
    an analysis of just those records would give as its length.  Without
    ``details`` the results carry the paths only (empty ``profile``, ``queues``
    and ``connection_trace``), which is cheaper to build.  ``commit_every``: records
    between the passes' folds of settled path prefixes (a memory/time trade that
    never changes a result; default
    :data:`~cpasim.analysis.criticalpath.COMMIT_EVERY`).  ``conns``: the connections
    whose paths the results report, when the trace has several (default: every
    one); the others' records still take part in everyone's paths.
    """
    start_t = parse_sm(start)
    end_t = parse_sm(end)
    if engine_name(engine) == "compiled":
        from cpasim.analysis.compiled import CompiledPass as make_pass
    else:
        make_pass = CriticalPathPass
    passes = [
        make_pass(
            tf,
            start_t,
            end_t,
            lenient=lenient,
            listing_limit=listing_limit,
            source_name=source.name,
            commit_every=commit_every or COMMIT_EVERY,
        )
        for tf in transforms
    ]
    at_mark = _feed(passes, source, mark)
    key = source.key
    if make_pass is not CriticalPathPass:
        for p in passes:
            p.key = key
        passes = [p.view(details) for p in passes]
    _check_names(passes, source.name, key, start_t, end_t, conn)
    with _gc_paused():
        results = [
            _result(p, source, start_t, end_t, conn, min_share, details, conns) for p in passes
        ]
    if at_mark is not None:
        for res, ends in zip(results, at_mark, strict=True):
            res.lengths_at_mark = _mark_lengths(ends, key.conns, conn, conns)
    return results


def _feed(passes: list, source: TraceSource, mark: float | None) -> list | None:
    """Feed every chunk of ``source`` to every pass; with a ``mark``, the lengths
    of their paths as of the records before it (see :func:`analyze_many`)."""
    at_mark = None
    with _gc_paused():
        for chunk in source.chunks():
            key = source.key
            if mark is not None and at_mark is None:
                cut = int(np.searchsorted(chunk["t"], mark, side="left"))
                if cut < len(chunk):
                    for p in passes:
                        p.feed(chunk[:cut], key)
                    at_mark = [p.end_lengths() for p in passes]
                    chunk = chunk[cut:]
            for p in passes:
                p.feed(chunk, key)
    if mark is not None and at_mark is None:  # the trace ends before the mark
        at_mark = [p.end_lengths() for p in passes]
    return at_mark


def _check_names(passes: list, source_name: str, key, start_t, end_t, conn) -> None:
    """Refuse a start or end that names no state machine, or an unknown connection."""
    for spec, flags in ((start_t, passes[0].s_is_start), (end_t, passes[0].s_is_end)):
        if passes and not any(flags):
            known = sorted({f"{s}:{m}" for s, m, _ in key.sms})
            raise CpasimError(
                f"{source_name}: no state machine {_display(spec)}; "
                + hint(_display(spec[:2]), known)
            )
    if conn is not None and conn not in key.conns:
        raise CpasimError(
            f"{source_name}: no connection {conn!r}; "
            f"the trace has: {', '.join(key.conns) or '(none)'}"
        )


def _path_ends(ends: dict, conns: list[str], conn: str | None, wanted=None):
    """How a result lays out its paths: ``(True, {conn name or None: end})`` for the
    single path (connection ``conn``, else the latest end of any), else ``(False,
    {conn name: end})`` for the connections ``wanted`` (None: all).  ``ends``:
    connection id → entry whose first item is its time."""
    if conn is not None:
        return True, {conn: ends.get(conns.index(conn))}
    if len(conns) <= 1:
        last = max(ends.values(), key=lambda e: e[0], default=None)
        return True, {conns[0] if conns else None: last}
    return False, {
        name: ends.get(cid) for cid, name in enumerate(conns) if wanted is None or name in wanted
    }


def _mark_lengths(ends: dict, conns: list[str], conn: str | None, wanted=None) -> dict[str, float]:
    """Per path of a result ("" for the single one), the length at its end SM's last
    record of ``ends`` (``{conn id: (t, length | None)}``), 0 without one."""
    single, picked = _path_ends(ends, conns, conn, wanted)
    return {
        "" if single else name: end[1] if end is not None and end[1] is not None else 0.0
        for name, end in picked.items()
    }


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the pass runs and reports.

    The pass allocates a path node per record and keeps many alive for a
    while; each collection would walk them all again, yet they never form
    cycles (a node points only at older nodes and summaries), so the
    collector cannot free any of them.  Plain reference counting still frees
    them as soon as they are dropped (``bench/bench_analyzer.py`` measures the pass).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _result(
    p: CriticalPathPass, source, start, end, conn, min_share, details: bool = True, wanted=None
) -> AnalysisResult:
    key = source.key
    names = Names(key)
    single, picked = _path_ends(p.ends, key.conns, conn, wanted)
    paths = {name: path_result(p, names, name, e, min_share) for name, e in picked.items()}
    path = next(iter(paths.values())) if single else None
    connections: dict[str, PathResult] = {} if single else paths
    warnings = warning_lines(p)
    for pr in [path] if path is not None else connections.values():
        if not pr.reachable:
            which = f" for connection {pr.conn}" if pr.conn is not None else ""
            warnings.append(
                f"end {_display(end)} not reachable from start {_display(start)}{which}"
                " (no dependence path joins them; a broken data queue cuts the path)"
            )
    return AnalysisResult(
        start=_display(start),
        end=_display(end),
        transforms=p.tf.describe(),
        records=p.records,
        path=path,
        connections=connections,
        warnings=warnings,
        profile=profile(p, names) if details else [],
        queues=queue_stats(p, names) if details else [],
        connection_trace=connection_trace(p, names) if details else {},
        pass_state=p,
    )
