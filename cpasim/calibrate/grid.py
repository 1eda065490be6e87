"""The capture grid: calibrate on one configuration, predict every other one.

``calibration/grid.sh`` runs real Linux transfers over a grid of nominal
settings (congestion control, tbf rate and queue limit, one-way delay, iperf3
``-w``), each several times, and writes one manifest line per run.  A
configuration is measured by the median of its repeats' iperf3 receiver
goodput, with the spread (min-max) beside it.

Calibration takes ONE configuration with a capture and an ``-w`` and sets what
its capture determines (:mod:`cpasim.calibrate.evidence`) that holds for every
run of the grid: MTU, timestamps, SACK and the receiver's ACK policy.  Then
the one-way delay is fitted to its median goodput
(:func:`cpasim.calibrate.fit.fit_one`); the difference to the nominal delay
is the *extra* delay (delay line, forwarding, the model's own per-round-trip
latencies).  Every configuration is then predicted by changing only its nominal settings.

The nominal settings of a run are the tbf shaper (``bottleneck.rate``,
``bottleneck.queue``, ``bottleneck.overhead`` = 14 B, ``bottleneck.burst`` =
4 KiB as testbed.sh configures it), the one-way delay, iperf3's ``-w`` as
``tcp.sndbuf`` = ``tcp.rcvbuf`` (unset: autotuning) and ``tcp.cc``.  Nothing
about the window is read from the calibration capture: the largest window its
receiver advertised is a check of the model's socket-buffer rules
(:attr:`GridCalibration.model_window`).
"""

from __future__ import annotations

import csv
import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpasim.calibrate import evidence
from cpasim.calibrate.evidence import Proposal
from cpasim.calibrate.fit import Target, fit_one
from cpasim.calibrate.inspection import DEFAULT_L2_OVERHEAD, inspect_capture
from cpasim.calibrate.iperf import read_iperf
from cpasim.calibrate.pcap import read_capture
from cpasim.config import Config, load_scenario
from cpasim.errors import CpasimError
from cpasim.inputs import read_text
from cpasim.model.sockbuf import largest_window
from cpasim.protocol import mss_for, tcp_header

COLUMNS = (
    "name",
    "cc",
    "rate_bps",
    "queue_bytes",
    "delay_ns",
    "window",
    "repeat",
    "seconds",
    "goodput_bps",
    "retransmits",
    "min_rtt_us",
    "capture",
)
#: What the calibration capture fixes for the whole grid (the same two hosts every run).
SHARED_KEYS = ("link.mtu", "tcp.timestamps", "tcp.sack", "tcp.delayed_ack")
#: The grid's path: 1500-byte MTU, TCP timestamps on (what the captures show).
MSS = mss_for(1500, True)
FRAME_OVERHEAD = tcp_header(True) + DEFAULT_L2_OVERHEAD
#: The token bucket of testbed.sh's tbf (``burst 4kb``: tc counts k as 1024).
TBF_BURST = 4096
#: A run with retransmissions whose goodput falls this far below what its settings
#: allow lost its goodput to losses.
LOSSY_BELOW = 0.95


@dataclass(frozen=True)
class GridConfig:
    """One configuration of the grid and its repeated runs."""

    name: str
    cc: str
    rate_bps: float
    queue_bytes: int
    delay_ns: float
    window: int | None  # iperf3 -w in bytes; None = autotuning
    seconds: float
    goodputs: tuple[float, ...]  # iperf3 receiver goodput of each repeat
    retransmits: tuple[int, ...]
    min_rtt_ns: float  # median over the repeats of iperf3's min_rtt (smallest interval srtt)
    capture: Path | None  # sender-side capture of the first repeat that kept one
    iperf: Path  # iperf3 report of that repeat

    @property
    def median(self) -> float:
        return statistics.median(self.goodputs)

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats."""
        return (max(self.goodputs) - min(self.goodputs)) / self.median

    @property
    def capacity_bps(self) -> float:
        """Payload rate the settings allow: the tbf rate less headers (IP and TCP with
        timestamps, the 14 B tbf counts), or the largest window Linux's rules give the
        -w over the nominal round trip if smaller.  Only names the regime; predictions
        simulate."""
        rate = self.rate_bps * MSS / (MSS + FRAME_OVERHEAD)
        if self.window is None:
            return rate
        tp = _default_tcp()
        window = largest_window(self.window, tp.core_rmem_max, tp.rx_truesize, MSS)
        return min(rate, window * 8e9 / (2 * self.delay_ns))

    @property
    def window_limited(self) -> bool:
        rate = self.rate_bps * MSS / (MSS + FRAME_OVERHEAD)
        return self.capacity_bps < rate

    @property
    def regime(self) -> str:
        """lossy (retransmissions and goodput more than 5 % below :attr:`capacity_bps`),
        else window-limited or rate-limited."""
        if (
            statistics.median(self.retransmits) > 0
            and self.median < LOSSY_BELOW * self.capacity_bps
        ):
            return "lossy"
        return "window-limited" if self.window_limited else "rate-limited"


@dataclass(frozen=True)
class GridCalibration:
    config: GridConfig
    shared: Config  # the base scenario with what the capture fixed for every run
    evidence: list[str]  # what was set, one line each
    adv_window: int  # the largest window Linux's receiver advertised in the capture
    model_window: int  # the largest window the model's receiver offers for the same -w
    extra_delay_ns: float
    residual: float
    simulations: int


@dataclass(frozen=True)
class GridPrediction:
    config: GridConfig
    predicted_bps: float

    @property
    def error(self) -> float:
        return (self.predicted_bps - self.config.median) / self.config.median


@functools.cache
def _default_tcp():
    """The default host's TCP settings (net.core.rmem_max, the receive truesize)."""
    return load_scenario(None).tx.tcp


def read_grid(directory: str | Path) -> list[GridConfig]:
    """The configurations of ``directory/manifest.csv``, repeats gathered, in file order."""
    path = Path(directory) / "manifest.csv"
    try:
        rows = list(csv.DictReader(read_text(path, "manifest").splitlines()))
    except csv.Error as exc:
        raise CpasimError(f"{path}: cannot read manifest ({exc})") from None
    by_name: dict[str, list[tuple[int, dict]]] = {}
    for i, row in enumerate(rows, start=2):
        missing = [c for c in COLUMNS if row.get(c) in (None, "")]
        if missing:
            raise CpasimError(f"{path}:{i}: missing column(s) {', '.join(missing)}")
        by_name.setdefault(row["name"], []).append((i, row))
    out = []
    for name, runs in by_name.items():
        line, first = runs[0]
        try:
            kept = next((r for _, r in runs if r["capture"] != "-"), None)
            report = f"{name}_r{(kept or first)['repeat']}.iperf3.json"
            out.append(
                GridConfig(
                    name=name,
                    cc=first["cc"],
                    rate_bps=float(first["rate_bps"]),
                    queue_bytes=int(first["queue_bytes"]),
                    delay_ns=float(first["delay_ns"]),
                    window=None if first["window"] == "-" else _iperf_size(first["window"]),
                    seconds=float(first["seconds"]),
                    goodputs=tuple(float(r["goodput_bps"]) for _, r in runs),
                    retransmits=tuple(int(r["retransmits"]) for _, r in runs),
                    min_rtt_ns=statistics.median(float(r["min_rtt_us"]) * 1e3 for _, r in runs),
                    capture=path.parent / kept["capture"] if kept else None,
                    iperf=path.parent / report,
                )
            )
        except ValueError as exc:
            raise CpasimError(f"{path}:{line}: {exc}") from None
    return out


def _iperf_size(text: str) -> int:
    """iperf3's size syntax: a number with an optional K, M or G (powers of 1024)."""
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    try:
        return round(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise ValueError(f"window {text!r} should be an iperf3 size like 32K or '-'") from None


def nominal(run: GridConfig, extra_ns: float) -> list[Proposal]:
    """``run``'s nominal settings as scenario values (the delay plus ``extra_ns``)."""
    why = f"nominal setting of {run.name}"
    w = run.window or 0  # 0: not set, autotuned
    paced = _pacing(run.capture) if run.capture else []
    return [
        *paced,
        Proposal("sim.duration", f"{run.seconds:g}s", "iperf3 -t"),
        Proposal("bottleneck.rate", f"{run.rate_bps:.6g}bps", why),
        Proposal("bottleneck.overhead", f"{DEFAULT_L2_OVERHEAD}B", "what tbf counts"),
        Proposal("bottleneck.burst", f"{TBF_BURST}B", "tbf burst 4kb (testbed.sh)"),
        Proposal("bottleneck.queue", f"{run.queue_bytes}B", why),
        Proposal("link.delay", f"{max(0.0, run.delay_ns + extra_ns):.6g}ns", why),
        Proposal("tcp.cc", run.cc, why),
        Proposal("tcp.sndbuf", f"{w}B", why),
        Proposal("tcp.rcvbuf", f"{w}B", why),
    ]


@functools.cache
def _pacing(capture: Path) -> list[Proposal]:
    """Whether the run's sender paced, as its capture shows.  grid.sh sets the sending
    namespace's default congestion control to the run's where the host allows it (reno,
    bbr) and cannot for cubic, so a cubic socket is created under whatever default the
    previous run left; created under bbr it stays paced after switching to cubic
    (Linux never resets sk_pacing_status).  The capture says which it was."""
    cap = read_capture(capture)
    found = evidence.pacing(cap, inspect_capture(cap))
    return [found] if found else []


def calibrate(
    base: Config,
    run: GridConfig,
    simulate: Callable[[Config], dict],
    *,
    max_simulations: int = 24,
) -> GridCalibration:
    """Fix the shared settings and the extra delay on ``run`` (which needs -w and a capture)."""
    if run.capture is None or run.window is None:
        raise CpasimError(f"{run.name}: calibrating needs a run with a capture and an iperf3 -w")
    cap = read_capture(run.capture)
    report = inspect_capture(cap)
    iperf = evidence.read_iperf_evidence(read_iperf(run.iperf))
    shared_props = [p for p in evidence.propose(cap, report, iperf) if p.key in SHARED_KEYS]
    shared = evidence.apply(base, shared_props, where=str(run.capture))
    lines = [f"{p.key} = {p.value} ({p.evidence})" for p in shared_props]
    if report.adv_window is None:
        raise CpasimError(f"{run.capture}: no advertised windows in the capture")
    cfg = evidence.apply(shared, nominal(run, 0.0), where=run.name)
    tp = cfg.rx.tcp
    mss = mss_for(int(cfg.value("link.mtu")), tp.timestamps)
    model_window = largest_window(run.window, tp.core_rmem_max, tp.rx_truesize, mss)
    target = Target("goodput_bps", run.median, run.name)
    res = fit_one(cfg, target, "link.delay", simulate, max_simulations=max_simulations)
    extra = res.fitted["link.delay"][1] - run.delay_ns
    return GridCalibration(
        run,
        shared,
        lines,
        int(report.adv_window.max),
        model_window,
        extra,
        res.residuals[0].relative,
        res.simulations,
    )


def predict(
    cal: GridCalibration, runs: list[GridConfig], simulate: Callable[[Config], dict]
) -> list[GridPrediction]:
    """Every run but the calibration one, from its nominal settings alone."""
    out = []
    for run in runs:
        if run.name == cal.config.name:
            continue
        cfg = evidence.apply(cal.shared, nominal(run, cal.extra_delay_ns), where=run.name)
        out.append(GridPrediction(run, simulate(cfg)["goodput_bps"]))
    return out
