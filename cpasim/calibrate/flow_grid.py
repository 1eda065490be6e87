"""The multi-flow capture grid: several Linux flows side by side, scored held out.

``calibration/grid.sh`` with ``GRID=flows`` runs real Linux transfers through the
test bed's 50 Mbit/s tbf at 20 ms round trips: 1, 2 and 4 CUBIC flows, 2 BBR
flows, and CUBIC beside BBR, each configuration at tbf queues of 0.25 to 2
bandwidth-delay products and repeated, with ping running during the transfer
(``calibration/flows/manifest.csv``, one line per run).

cpasim simulates each configuration from its nominal settings alone
(:func:`scenario`): the tbf (rate, queue, 14 B counted per packet, a 4 KiB bucket),
10 ms each way, one ``[[flows]]`` table per flow with its congestion control and
a ping flow every 10 ms, for iperf3's duration.  Nothing is fitted to these
captures, and nothing was fitted to the single-flow grid either (no extra delay):
the scores are held out.  What is scored, per configuration, against the median
of its repeats (:class:`Score`): the flows' aggregate goodput (within 10 %, target
5 %), each CUBIC flow's share of it beside BBR (within 0.08) and ping's median
round trip during the transfer (within 15 %).  A quantity whose repeats spread
more than :data:`MAX_SPREAD` ((max - min) / median) is reported, not scored.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpasim.calibrate.grid import manifest_runs
from cpasim.config import Config, load_scenario
from cpasim.errors import CpasimError
from cpasim.model.flow_kinds import flow_kind

COLUMNS = (
    "name",
    "ccs",
    "rate_bps",
    "queue_bytes",
    "delay_ns",
    "repeat",
    "seconds",
    "goodput_bps",
    "flow_goodput_bps",
    "flow_retransmits",
    "ping_p50_us",
    "ping_idle_p50_us",
    "default_cc",
    "load1",
)
#: Repeats spread more than this ((max - min) / median): reported, not scored.
MAX_SPREAD = 0.10
#: The congestion control whose share of the aggregate a mixed run scores (beside BBR).
SHARE_CC = "cubic"
#: The tolerances of the scores: aggregate goodput (relative), a CUBIC flow's share
#: beside BBR (absolute), ping's median round trip (relative).
GOODPUT_TOLERANCE = 0.10
GOODPUT_TARGET = 0.05
SHARE_TOLERANCE = 0.08
PING_TOLERANCE = 0.15
#: What the test bed's tbf counts per packet (the MAC header) and its bucket
#: (testbed.sh: ``burst 4kb``, tc's k is 1024).
TBF_OVERHEAD = 14
TBF_BURST = 4096
#: ping -i 0.01 during the transfer.
PING_INTERVAL = "10ms"


def _spread(values) -> float:
    median = statistics.median(values)
    return (max(values) - min(values)) / median if median else 0.0


@dataclass(frozen=True)
class FlowRun:
    """One configuration of the grid and its repeats."""

    name: str
    ccs: tuple[str, ...]  # each flow's congestion control, in port order
    rate_bps: float
    queue_bytes: int
    delay_ns: float
    seconds: float
    goodputs: tuple[float, ...]  # per repeat: the flows' receiver goodputs summed
    flow_goodputs: tuple[tuple[float, ...], ...]  # per repeat, per flow
    retransmits: tuple[tuple[int, ...], ...]
    ping_p50_ns: tuple[float, ...]  # per repeat, during the transfer
    ping_idle_p50_ns: tuple[float, ...]  # per repeat, unloaded
    default_cc: tuple[str, ...]  # per repeat: the sending namespace's default
    load: tuple[float, ...]  # per repeat: the 1-minute load average as it began

    @property
    def bdp_bytes(self) -> float:
        return self.rate_bps / 8 * 2 * self.delay_ns / 1e9

    @property
    def median(self) -> float:
        return statistics.median(self.goodputs)

    @property
    def spread(self) -> float:
        return _spread(self.goodputs)

    def shares(self, cc: str = SHARE_CC) -> list[float]:
        """Per repeat, the share of the aggregate the flows of ``cc`` got."""
        out = []
        for flows in self.flow_goodputs:
            total = sum(flows)
            mine = sum(g for g, c in zip(flows, self.ccs, strict=True) if c == cc)
            out.append(mine / total if total else 0.0)
        return out

    @property
    def mixed(self) -> bool:
        return len(set(self.ccs)) > 1

    @property
    def ping_p50(self) -> float:
        return statistics.median(self.ping_p50_ns)

    @property
    def ping_spread(self) -> float:
        return _spread(self.ping_p50_ns)


def read_flow_grid(directory: str | Path) -> list[FlowRun]:
    """The configurations of ``directory/manifest.csv``, repeats gathered, in file order."""
    path, by_name = manifest_runs(directory, COLUMNS)
    out = []
    for name, runs in by_name.items():
        line, first = runs[0]
        try:
            out.append(
                FlowRun(
                    name=name,
                    ccs=tuple(first["ccs"].split("+")),
                    rate_bps=float(first["rate_bps"]),
                    queue_bytes=int(first["queue_bytes"]),
                    delay_ns=float(first["delay_ns"]),
                    seconds=float(first["seconds"]),
                    goodputs=tuple(float(r["goodput_bps"]) for _, r in runs),
                    flow_goodputs=tuple(
                        tuple(float(g) for g in r["flow_goodput_bps"].split(";")) for _, r in runs
                    ),
                    retransmits=tuple(
                        tuple(int(x) for x in r["flow_retransmits"].split(";")) for _, r in runs
                    ),
                    ping_p50_ns=tuple(float(r["ping_p50_us"]) * 1e3 for _, r in runs),
                    ping_idle_p50_ns=tuple(float(r["ping_idle_p50_us"]) * 1e3 for _, r in runs),
                    default_cc=tuple(r["default_cc"] for _, r in runs),
                    load=tuple(float(r["load1"]) for _, r in runs),
                )
            )
        except ValueError as exc:
            raise CpasimError(f"{path}:{line}: {exc}") from None
    return out


def scenario(run: FlowRun, base: Config | None = None) -> Config:
    """The configuration's nominal settings as a scenario: nothing fitted."""
    base = base if base is not None else load_scenario(None)
    tables = [{"tcp": {"cc": cc}} for cc in run.ccs]
    tables.append({"kind": "ping", "workload": {"interval": PING_INTERVAL}})
    return base.with_overrides(
        {
            "sim.duration": f"{run.seconds:g}s",
            "sim.warmup": "0s",
            "bottleneck.rate": f"{run.rate_bps:.6g}bps",
            "bottleneck.queue": f"{run.queue_bytes}B",
            "bottleneck.overhead": f"{TBF_OVERHEAD}B",
            "bottleneck.burst": f"{TBF_BURST}B",
            "link.delay": f"{run.delay_ns:.6g}ns",  # one way, as the manifest gives it
            "flows": tables,
        },
        where=run.name,
    )


@dataclass(frozen=True)
class Score:
    """One configuration: Linux's medians and spreads beside cpasim's held-out figures."""

    run: FlowRun
    goodput_bps: float  # cpasim's aggregate
    cubic_share: float | None  # cpasim's, beside BBR
    ping_p50_ns: float | None

    @property
    def goodput_error(self) -> float:
        return (self.goodput_bps - self.run.median) / self.run.median

    @property
    def real_share(self) -> float | None:
        return statistics.median(self.run.shares()) if self.run.mixed else None

    @property
    def share_spread(self) -> float | None:
        """(max - min) of the CUBIC share over the repeats, in share points."""
        if not self.run.mixed:
            return None
        shares = self.run.shares()
        return max(shares) - min(shares)

    @property
    def share_error(self) -> float | None:
        if self.cubic_share is None or self.real_share is None:
            return None
        return self.cubic_share - self.real_share

    @property
    def ping_error(self) -> float | None:
        if self.ping_p50_ns is None:
            return None
        return (self.ping_p50_ns - self.run.ping_p50) / self.run.ping_p50


def score(run: FlowRun, simulate: Callable[[Config], dict], base: Config | None = None) -> Score:
    """Simulate ``run``'s nominal settings (``simulate(cfg)`` → a run's JSON) and score them."""
    out = simulate(scenario(run, base))
    flows = out["flows"]
    bulk = [f for f in flows if flow_kind(f["kind"]).bulk]
    total = sum(f["goodput_bps"] for f in bulk)
    share = None
    if run.mixed and total:
        share = sum(f["goodput_bps"] for f in bulk if f["cc"] == SHARE_CC) / total
    ping = next((f for f in flows if not flow_kind(f["kind"]).tcp), None)
    p50 = ping["latency_ns"]["p50"] if ping and ping.get("latency_ns") else None
    return Score(run, total, share, p50)


def scored(s: Score) -> dict[str, bool]:
    """Which of a configuration's quantities are scored: those whose repeats spread no
    more than :data:`MAX_SPREAD` (the share's in share points)."""
    out = {"goodput": s.run.spread <= MAX_SPREAD, "ping": s.run.ping_spread <= MAX_SPREAD}
    if s.run.mixed:
        out["share"] = s.share_spread <= MAX_SPREAD
    return out


def table_lines(scores: list[Score]) -> list[str]:
    """The scores as a markdown table: per configuration Linux's median [spread] beside
    cpasim's figure and its error; an error beyond its tolerance in bold, a quantity
    whose repeats spread too widely marked *not scored*."""

    def err(value: float, tolerance: float, ok: bool, fmt: str) -> str:
        text = format(value, fmt)
        if not ok:
            return f"{text} *not scored*"
        return f"**{text}**" if abs(value) > tolerance else text

    out = [
        "| configuration | Linux goodput (Mb/s) | cpasim | error | Linux CUBIC share | cpasim "
        "| error | Linux ping p50 (ms) | cpasim | error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in scores:
        r, ok = s.run, scored(s)
        share = "- | - | -"
        if r.mixed:
            share = f"{s.real_share:.3f} [{s.share_spread:.3f}] | {s.cubic_share:.3f} | " + err(
                s.share_error, SHARE_TOLERANCE, ok["share"], "+.3f"
            )
        out.append(
            f"| {r.name} | {r.median / 1e6:.2f} [{r.spread:.1%}] | {s.goodput_bps / 1e6:.2f} | "
            + err(s.goodput_error, GOODPUT_TOLERANCE, ok["goodput"], "+.1%")
            + f" | {share} | {r.ping_p50 / 1e6:.2f} [{r.ping_spread:.1%}] | "
            f"{s.ping_p50_ns / 1e6:.2f} | "
            + err(s.ping_error, PING_TOLERANCE, ok["ping"], "+.1%")
            + " |"
        )
    return out
