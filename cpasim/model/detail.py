"""Levels of detail of a host (``host.detail``): which parts each has, and when the
ideal one would be wrong.

``full`` simulates every state machine of a host; ``ideal`` (:mod:`cpasim.model.ideal`)
keeps what ns-3 keeps.  Each is a :class:`DetailLevel` of :data:`LEVELS`; nothing else
compares ``host.detail`` to a name.  This module is light (no model import), for the
configuration's rules, ``predict`` and the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _no_rules(v) -> None:
    pass


def _ideal_rules(v) -> None:
    """An ideal host cannot run what needs the hardware it does not have."""
    p = v.prefix
    if v["ip.send_path"] == "2.6.13":
        v.refuse(
            f'{p}ip.send_path = "2.6.13" runs the driver\'s transmit in the sender, and '
            f'{p}host.detail = "ideal" has no driver; expected ip.send_path = "modern" or '
            'host.detail = "full"'
        )
    if v["copy_engine.enabled"]:
        v.refuse(
            f'{p}copy_engine.enabled is hardware, and {p}host.detail = "ideal" has none; '
            'expected copy_engine.enabled = false or host.detail = "full"'
        )


@dataclass(frozen=True)
class DetailLevel:
    """One value of ``host.detail``."""

    name: str
    #: It simulates the host's hardware: CPU cores, memory, bus, NIC, driver, copy engine.
    hardware: bool
    #: The rules a host at this level must keep (:mod:`cpasim.config.rules`).
    check: Callable[[Any], None] = _no_rules


#: The levels, the parameter's choices in this order.
LEVELS: dict[str, DetailLevel] = {
    level.name: level
    for level in (
        DetailLevel("full", hardware=True),
        DetailLevel("ideal", hardware=False, check=_ideal_rules),
    )
}

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
    return not LEVELS[cfg.host(host).host.detail].hardware


def absent(key: str) -> str | None:
    """Why an ideal host has nothing that per-host key ``key`` (``cpu.freq``, no host
    prefix) acts on, or None when it has."""
    return ABSENT.get(key.split(".", 1)[0])


#: How far apart the levels may be and still agree (docs/detail-levels.md): 1 %.
AGREEMENT = 0.01
#: A link or bottleneck at least this busy in the data's direction is what limits a
#: stream, and an ideal host keeps it as it is.
SATURATED = 0.99

#: State machines of the path between the hosts (the link's MAC and carriers, a
#: bottleneck), which an ideal host keeps as they are.
_PATH_SMS = ("MAC", "Link", "Bottleneck")
#: States of real, fixed time that an ideal host keeps too: TCP's timers and pacing,
#: the application's pause.
_KEPT_STATES = ("armed", "pace", "think")
#: Drop reasons of a full host's device, which an ideal host does not have.
_DEVICE_DROPS = ("rx_fifo", "rx_ring_full")
#: The queue a stream's window is the sender's send buffer through.
_SEND_BUFFER = "Send buffer"


def host_time(state_totals, hosts=("tx", "rx")) -> dict[str, float]:
    """Of ``sys:sm:state`` -> ns (a critical path's ``state_totals``), the states of
    ``hosts`` that an ideal host does not have or does in no time: CPU work, DMA, the
    NIC's and the driver's states, interrupt moderation.  Edges between state machines
    (queues) carry no time of their own and are left out."""
    out = {}
    for name, ns in state_totals.items():
        if ns <= 0 or "->" in name:
            continue
        sys, _, rest = name.partition(":")
        sm, _, state = rest.rpartition(":")
        if sys in hosts and sm.split("#")[0] not in _PATH_SMS and state not in _KEPT_STATES:
            out[name] = ns
    return out


def ideal_would_differ(cfg, result, trace=None, *, tolerance: float = AGREEMENT) -> str | None:
    """Why simulating the full hosts of this run ideal (``host.detail = "ideal"``) would
    give a figure more than ``tolerance`` (1 %) away, or None when it would agree.

    ``result``: the run's :class:`~cpasim.simulate.Result` or its JSON (``cpasim run
    --json``); ``trace``: its trace file (default ``result.trace``, set by
    ``cpasim.run(trace=...)``).  In order:

    * frames dropped in a full host's NIC or rings: an ideal host drops none there;
    * a stream whose link or bottleneck is saturated in the data's direction: the
      path limits it, and an ideal host keeps the path, so they agree;
    * otherwise the run is predicted from its trace with every state of the full
      hosts that an ideal host does in no time (:func:`host_time`) scaled to 0, as
      ``cpasim predict`` does a what-if (Saidi 2009, 6.1): goodput scales by the
      critical path's length before over after, a latency the other way;
    * and where the critical path loops through the sender's send buffer, the
      writer's copy time decides how full it is kept, which the graph does not
      model: an ideal writer keeps it fuller (``docs/detail-levels.md``).
    Without a trace only the first two can be told; otherwise a
    :class:`~cpasim.errors.CpasimError` says the trace is needed."""
    from cpasim.errors import CpasimError

    full = tuple(h for h in ("tx", "rx") if not is_ideal(cfg, h))
    if not full:
        return None  # both hosts ideal already
    data = result if isinstance(result, dict) else result.to_json()
    if trace is None:
        trace = getattr(result, "trace", None) or data.get("trace")
    why = []
    drops = data.get("drops") or {}
    lost = ", ".join(f"{drops[k]} {k}" for k in _DEVICE_DROPS if drops.get(k))
    if lost:
        why.append(f"the full host's NIC dropped frames ({lost}), which an ideal host never does")
    if _saturated(data) is None:
        if trace is None:
            raise CpasimError(
                "ideal_would_differ: neither the link nor a bottleneck limits this run, so "
                "the answer needs its trace (cpasim run --trace, cpasim.run(trace=...))"
            )
        why += _predicted(cfg, data, trace, full, tolerance)
    if not why:
        return None
    return 'host.detail = "ideal" would differ: ' + "; ".join(why)


def _saturated(data) -> str | None:
    """The link direction or bottleneck that limits a stream (busy >= SATURATED)."""
    # Imported here: the workloads' rules read this module's levels.
    from cpasim.model.workloads import workload_kind

    if not workload_kind(data["workload"]).stream:
        return None
    busy = {**(data.get("bottleneck_utilization") or {}), **(data.get("link_utilization") or {})}
    for name in ("tx_to_rx", "tx_to_fw", "fw_to_rx"):
        if busy.get(name, 0.0) >= SATURATED:
            return name
    return None


def _predicted(cfg, data, trace, full, tolerance) -> list[str]:
    """The what-if of the full hosts' states at no time, from ``trace`` (see
    :func:`ideal_would_differ`); a sentence for each reason to differ."""
    from cpasim.analysis import Transforms
    from cpasim.analysis.names import trace_names
    from cpasim.predict.runs import metric_of, scaled_metric, summarize
    from cpasim.predict.transforms_table import REORDERED_POOLS
    from cpasim.predict.window import analyses
    from cpasim.tracing import open_trace

    names = trace_names(open_trace(trace)).folded("states")
    gone = host_time(dict.fromkeys(names, 1.0), full)
    base = Transforms(breaks=list(REORDERED_POOLS))
    ideal = Transforms(scale=[(n, 0.0) for n in gone], breaks=list(REORDERED_POOLS))
    start, end = tuple(data["analysis_start"]), tuple(data["analysis_end"])
    (b, b_cut, _), (i, i_cut, _) = analyses(
        lambda: open_trace(trace), start, end, [base, ideal], cfg.sim.warmup
    )
    before = summarize(b, "the run")
    path_b, path_i = summarize(b, "the run", b_cut), summarize(i, "its ideal what-if", i_cut)
    metric, higher = metric_of(data["workload"])
    change = scaled_metric(1.0, higher, path_b, path_i) - 1.0
    out = []
    if abs(change) >= tolerance:
        what = "goodput" if higher else "mean latency"
        top = [m for m in before.most_critical if host_time({m["name"]: 1.0}, full)][:3]
        named = ", ".join(f"{m['name']} {m['share']:.1%}" for m in top)
        out.append(
            f"the {what} would be {change:+.1%} (predicted from the trace with the "
            f"{'/'.join(full)} host states an ideal host does in no time at 0"
            + (f"; on the critical path: {named}" if named else "")
            + ")"
        )
    if any(_SEND_BUFFER in loop["edge"] for loop in before.loops[:1]):
        out.append(
            "the send buffer bounds the window, and how full the writer keeps it depends "
            "on its copy time, which an ideal host does not have: an ideal writer keeps it "
            "fuller than this prediction shows"
        )
    return out
