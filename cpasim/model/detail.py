"""Levels of detail of a host (``host.detail``): which parts each has, and when the
ideal one would be wrong.

``full`` simulates every state machine of a host; ``ideal`` (:mod:`cpasim.model.ideal`)
keeps what ns-3 keeps.  This module is light (no model import), for the configuration
checks, ``predict`` and the verdict.
"""

from __future__ import annotations

FULL, IDEAL = "full", "ideal"

#: Sections of a host's keys that an ideal host has no part for, and what it lacks.
ABSENT = {
    "cpu": "no CPU (every cost is 0 cycles and takes no time)",
    "memory": "no memory model",
    "bus": "no I/O bus",
    "pcie": "no PCIe link",
    "nic": "no NIC (no rings, FIFOs, DMA, interrupts or offloads)",
    "driver": "no driver",
    "copy_engine": "no copy engine",
}


def is_ideal(cfg, host: str) -> bool:
    """Whether end host ``host`` of ``cfg`` is simulated ideal."""
    return cfg.host(host).host.detail == IDEAL


def absent(key: str) -> str | None:
    """Why an ideal host has nothing that per-host key ``key`` (``cpu.freq``, no host
    prefix) acts on, or None when it has."""
    return ABSENT.get(key.split(".", 1)[0])


#: Below this much of the critical path, the hosts' states do not change a figure by
#: more than the agreement the levels promise (docs/detail-levels.md): 1 %.
AGREEMENT = 0.01

#: State machines of the path between the hosts (the link's MAC and carriers, a
#: bottleneck), which an ideal host keeps as they are.
_PATH_SMS = ("MAC", "Link", "Bottleneck")
#: States of real, fixed time that an ideal host keeps too: TCP's timers and pacing,
#: the application's pause.
_KEPT_STATES = ("armed", "pace", "think")
#: Drop reasons of a full host's device, which an ideal host does not have.
_DEVICE_DROPS = ("rx_fifo", "rx_ring_full")


def host_time(state_totals, hosts=("tx", "rx")) -> dict[str, float]:
    """Of a critical path's time per name (``sys:sm:state`` -> ns,
    :attr:`~cpasim.analysis.PathResult.state_totals`), the states of ``hosts`` that
    an ideal host does not have or does in no time: CPU work, DMA, the NIC's and the
    driver's states, interrupt moderation.  Edges between state machines (queues)
    carry no time."""
    out = {}
    for name, ns in state_totals.items():
        if ns <= 0 or "->" in name:
            continue
        sys, _, rest = name.partition(":")
        sm, _, state = rest.rpartition(":")
        if sys in hosts and sm.split("#")[0] not in _PATH_SMS and state not in _KEPT_STATES:
            out[name] = ns
    return out


def ideal_would_differ(cfg, run, *, tolerance: float = AGREEMENT) -> str | None:
    """Why an ideal host would give a different answer for this run of ``cfg``, or None
    when it would agree within ``tolerance`` (1 %).

    ``run``: the run's critical path, as an analysis of its trace
    (:class:`~cpasim.analysis.AnalysisResult` or one of its ``PathResult``), a trace
    file, or a :class:`~cpasim.simulate.Result` recorded with a trace.  The answer is
    the full hosts' share of the critical path: what an ideal host would do in no time.
    Taking it away, the same work takes that much less time, so the run's goodput
    rises (or its latency falls) by up to ``share / (1 - share)``; less where the path
    then meets another limit (the link).  A full run that dropped frames in its NIC or
    rings would also differ: an ideal host drops none there."""
    full = tuple(h for h in ("tx", "rx") if not is_ideal(cfg, h))
    if not full:
        return None  # both hosts ideal already
    drops = getattr(run, "drops", None) or {}
    lost = {k: drops.get(k, 0) for k in _DEVICE_DROPS if drops.get(k)}
    path = _critical_path(run)
    cp = path.critical_path_ns or 0.0
    states = host_time(path.state_totals, full)
    share = sum(states.values()) / cp if cp > 0 else 0.0
    gain = share / (1.0 - share) if share < 1.0 else float("inf")
    why = []
    if gain >= tolerance:
        top = sorted(states.items(), key=lambda kv: -kv[1])[:3]
        named = ", ".join(f"{n} {ns / cp:.1%}" for n, ns in top)
        why.append(
            f"the {'/'.join(full)} host states an ideal host does in no time are "
            f"{share:.1%} of the critical path ({named}); without them the same work "
            f"takes up to {share:.1%} less time, so goodput would be up to {gain:.1%} "
            "higher (a latency as much lower) until another limit, such as the link, is met"
        )
    if lost:
        counts = ", ".join(f"{n} {k}" for k, n in lost.items())
        why.append(f"the full host's NIC dropped frames ({counts}), which an ideal host never does")
    if not why:
        return None
    return 'host.detail = "ideal" would differ: ' + "; ".join(why)


def _critical_path(run):
    """The critical path (a ``PathResult``) of ``run`` (see :func:`ideal_would_differ`);
    of several connections, the longest."""
    if hasattr(run, "state_totals"):
        return run
    if hasattr(run, "connections"):  # an AnalysisResult
        if run.path is not None:
            return run.path
        paths = [p for p in run.connections.values() if p.critical_path_ns is not None]
        if not paths:
            from cpasim.errors import CpasimError

            raise CpasimError("the run's end is not reachable from its start: no critical path")
        return max(paths, key=lambda p: p.critical_path_ns)
    from cpasim.analysis import analyze
    from cpasim.errors import CpasimError
    from cpasim.trace import open_trace

    start, end = ("tx", "App"), ("rx", "App")
    trace = run
    if hasattr(run, "goodput_bps"):  # a Result
        trace, start, end = run.trace, run.analysis_start, run.analysis_end
        if trace is None:
            raise CpasimError(
                "ideal_would_differ: the run was made without a trace; run it with one "
                "(cpasim run --trace, cpasim.run(trace=True))"
            )
    source = open_trace(trace) if not hasattr(trace, "chunks") else trace
    return _critical_path(analyze(source, start=start, end=end, listing_limit=0))
