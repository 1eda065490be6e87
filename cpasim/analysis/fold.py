"""Numbered instances folded into one row, for listings a person reads.

A trace numbers the instances of one state machine or queue (``rx:Link#114``,
one per frame in flight on the wire; hundreds in a run).  Their behaviour is
the same, so a listing shows them as one row with a count, as ``cpasim trace
names`` and the Graphviz views (:mod:`cpasim.analysis.dot`) do.  Where names are
listed one by one, :func:`natural_key` sorts their numbers as numbers
(``#2`` before ``#10``).

The analysis results themselves (``--json``, the API) keep every instance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: ``#inst`` up to the next ``:``, ``[``, ``]`` or ``->`` of an edge name.
_INSTANCE = re.compile(r"#(?:[^:>\[\]-]|-(?!>))*")
_DIGITS = re.compile(r"(\d+)")


def base(name: str) -> str:
    """``rx:Link#114`` → ``rx:Link``; every instance in an edge name too
    (``tx:A#1->rx:B#2[rx:q#3]`` → ``tx:A->rx:B[rx:q]``)."""
    return _INSTANCE.sub("", name)


def natural_key(name: str) -> tuple:
    """Sort key that orders the numbers inside ``name`` by value: ``rx:Link#2``
    before ``rx:Link#10``."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def natural_sorted(names: Iterable[str]) -> list[str]:
    return sorted(names, key=natural_key)


def fold_profile(profile: list[dict]) -> list[dict]:
    """Per-SM profile rows (:func:`cpasim.analysis.report.profile`) folded over the
    instances of each SM: ``sm`` (without instance), ``instances``, and one
    instance's mean ``active_ns``, ``waiting_ns``, ``entered`` and ``states`` (the
    instances run side by side: 800 frames propagating at once are not 800 times
    the run's length of work).  Busiest first."""
    out: dict[str, dict] = {}
    for row in profile:
        name = base(row["sm"])
        agg = out.setdefault(
            name,
            {"sm": name, "instances": 0, "active_ns": 0.0, "waiting_ns": 0.0, "states": {}},
        )
        agg["instances"] += 1
        agg["active_ns"] += row["active_ns"]
        agg["waiting_ns"] += row["waiting_ns"]
        for st in row["states"]:
            s = agg["states"].setdefault(
                st["state"],
                {"state": st["state"], "active_ns": 0.0, "waiting_ns": 0.0, "entered": 0},
            )
            s["active_ns"] += st["active_ns"]
            s["waiting_ns"] += st["waiting_ns"]
            s["entered"] += st["entered"]
    rows = []
    for agg in out.values():
        n = agg["instances"]
        states = [
            {
                **s,
                "active_ns": s["active_ns"] / n,
                "waiting_ns": s["waiting_ns"] / n,
                "entered": s["entered"] / n,
            }
            for s in sorted(agg["states"].values(), key=lambda d: (-d["active_ns"], d["state"]))
        ]
        rows.append(
            {
                **agg,
                "active_ns": agg["active_ns"] / n,
                "waiting_ns": agg["waiting_ns"] / n,
                "entered": sum(s["entered"] for s in states),
                "states": states,
            }
        )
    rows.sort(key=lambda d: (-d["active_ns"], natural_key(d["sm"])))
    return rows


#: Queue figures that add up over time: a folded row shows one instance's mean.
_QUEUE_SUMS = (
    "held_at_end",
    "mean_occupancy",
    "waits_empty",
    "waited_empty_ns",
    "waits_full",
    "waited_full_ns",
    "arrivals",
)


def fold_queues(queues: list[dict]) -> list[dict]:
    """Per-queue rows (:func:`cpasim.analysis.report.queue_stats`) folded over the
    instances of each queue: one instance's mean of every count, wait and
    occupancy, the largest maximum, the communication latency averaged over
    arrivals, ``capacity`` when every instance has the same (else None).  The
    queues producers waited on the longest (full) come first, then those consumers
    waited on the longest (empty): where someone blocked."""
    out: dict[str, dict] = {}
    for q in queues:
        name = base(q["queue"])
        agg = out.get(name)
        if agg is None:
            out[name] = {**q, "queue": name, "instances": 1, "_comm": [0.0, 0]}
            agg = out[name]
            for k in _QUEUE_SUMS:
                agg[k] = 0
            agg["arrival_rate_per_s"] = None
        else:
            agg["instances"] += 1
            if agg["capacity"] != q["capacity"]:
                agg["capacity"] = None
            for k in ("max_occupancy", "comm_latency_max_ns"):
                agg[k] = max(agg[k], q[k])
        for k in _QUEUE_SUMS:
            agg[k] += q[k]
        agg["_comm"][0] += q["comm_latency_mean_ns"] * q["arrivals"]
        agg["_comm"][1] += q["arrivals"]
        if q["arrival_rate_per_s"] is not None:
            agg["arrival_rate_per_s"] = (agg["arrival_rate_per_s"] or 0.0) + q["arrival_rate_per_s"]
    rows = []
    for agg in out.values():
        n = agg["instances"]
        comm, arrivals = agg.pop("_comm")
        agg["comm_latency_mean_ns"] = comm / arrivals if arrivals else 0.0
        for k in _QUEUE_SUMS:
            agg[k] /= n
        if agg["arrival_rate_per_s"] is not None:
            agg["arrival_rate_per_s"] /= n
        rows.append(agg)
    rows.sort(key=lambda d: (-d["waited_full_ns"], -d["waited_empty_ns"], natural_key(d["queue"])))
    return rows


def fold_slack(slack: list[dict]) -> list[dict]:
    """Near-critical names over their instances: the least slack of any, and how
    many instances were listed; least slack first."""
    out: dict[str, dict] = {}
    for s in slack:
        name = base(s["name"])
        agg = out.setdefault(name, {"name": name, "slack_ns": s["slack_ns"], "instances": 0})
        agg["instances"] += 1
        agg["slack_ns"] = min(agg["slack_ns"], s["slack_ns"])
    return sorted(out.values(), key=lambda d: (d["slack_ns"], natural_key(d["name"])))
