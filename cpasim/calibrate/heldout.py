"""Held-out check: calibrate on one real capture, predict the goodput of the others.

The captures of ``calibration/capture.sh`` are iperf3 transfers through a tbf
shaper and a propagation delay, each with a known shaper rate, one-way delay
and iperf3 ``-w``.  Each run's known settings become scenario values the way
Linux really applies them:

* tbf rate → ``link.rate``: tbf charges a frame its IP length plus 14 B of
  Ethernet header, cpasim's link its IP length plus 38 B (header, FCS,
  preamble, inter-frame gap), so the same frame time needs a rate higher by
  (MTU + 38) / (MTU + 14).
* ``-w W`` → ``tcp.sndbuf`` = ``tcp.rcvbuf`` = W, iperf3's SO_SNDBUF and
  SO_RCVBUF requests: cpasim applies Linux's rules to them
  (:mod:`cpasim.model.sockbuf`: doubled, locked, the window a scaled share of
  the buffer), so nothing about the window is read from the captures — the
  largest window each capture advertised is a check of those rules
  (``Prediction.model_window``).
* delay → ``link.delay`` = delay + ``extra`` (at least 0): ``extra`` is the
  calibrated one-way time by which the real path's round trip differs from the
  model's at the same delay (delay-line wake-up and forwarding add to it; the
  model's own per-round-trip latencies, when larger than Linux's, take from it).

Calibration fits ``extra`` (through ``link.delay``) on one capture's goodput;
every other capture is then predicted with no further fitting.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpasim.calibrate.fit import Target, fit
from cpasim.calibrate.inspection import SKIP_FRACTION, flow_steady_goodput, inspect_capture
from cpasim.calibrate.pcap import Capture, read_capture
from cpasim.config import Config
from cpasim.errors import CpasimError
from cpasim.inputs import read_text
from cpasim.model.sockbuf import largest_window
from cpasim.protocol import ETHERNET_FRAMING, MAC_HEADER, mss_for

#: Bytes per frame beyond the IP packet: what tbf counts, what cpasim's link carries.
TBF_L2_BYTES = MAC_HEADER
LINK_L2_BYTES = ETHERNET_FRAMING

_MANIFEST_COLUMNS = ("name", "side", "tbf_rate_bps", "window", "delay_ns", "seconds")


@dataclass(frozen=True)
class CaptureRun:
    """One iperf3 transfer of the capture set, with the settings it ran under."""

    name: str  # e.g. "d5ms_tbf50m_w32k"
    capture: Path  # sender-side capture
    tbf_rate_bps: float
    window: int | None  # iperf3 -w in bytes; None = kernel autotuning
    delay_ns: float  # one-way delay added in each direction
    seconds: float


@dataclass(frozen=True)
class Measured:
    """What a sender-side capture says about a run."""

    goodput_bps: float  # acknowledged bytes per second after the start-up
    adv_window: int  # largest advertised receive window, bytes
    rtt_min_ns: float


@dataclass(frozen=True)
class Prediction:
    run: CaptureRun
    measured: Measured
    predicted_bps: float
    overrides: dict[str, str]
    model_window: int  # the largest window cpasim's receiver offers under these settings

    @property
    def error(self) -> float:
        return (self.predicted_bps - self.measured.goodput_bps) / self.measured.goodput_bps

    @property
    def window_limited(self) -> bool:
        """Window/RTT (propagation only) below the shaper rate."""
        rtt_s = 2 * self.run.delay_ns / 1e9
        return rtt_s > 0 and self.measured.adv_window * 8 / rtt_s < self.run.tbf_rate_bps


@dataclass(frozen=True)
class Calibration:
    """What one capture fixed: the extra one-way delay."""

    run: CaptureRun
    extra_delay_ns: float
    simulations: int
    residual: float  # relative goodput error left on the calibration capture


@dataclass(frozen=True)
class HeldOut:
    calibration: Calibration
    predictions: list[Prediction]

    @property
    def max_abs_error(self) -> float:
        return max(abs(p.error) for p in self.predictions)


def read_manifest(directory: Path) -> list[CaptureRun]:
    """The runs of ``directory/manifest.csv`` that have a sender-side capture."""
    path = Path(directory) / "manifest.csv"
    try:
        rows = list(csv.DictReader(read_text(path, "manifest").splitlines()))
    except csv.Error as exc:
        raise CpasimError(f"{path}: cannot read manifest ({exc})") from None
    runs = []
    for i, row in enumerate(rows, start=2):
        missing = [c for c in _MANIFEST_COLUMNS if not row.get(c)]
        if missing:
            raise CpasimError(f"{path}:{i}: missing column(s) {', '.join(missing)}")
        if row["side"] != "tx":
            continue
        try:
            window = None if row["window"] == "-" else _iperf_size(row["window"])
            runs.append(
                CaptureRun(
                    name=row["name"].rsplit("_", 1)[0],
                    capture=path.parent / row["name"],
                    tbf_rate_bps=float(row["tbf_rate_bps"]),
                    window=window,
                    delay_ns=float(row["delay_ns"]),
                    seconds=float(row["seconds"]),
                )
            )
        except (ValueError, CpasimError) as exc:
            raise CpasimError(f"{path}:{i}: {exc}") from None
    return runs


def _iperf_size(text: str) -> int:
    """iperf3's size syntax: a number with an optional K, M or G (powers of 1024)."""
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    number = text[:-1] if scale > 1 else text
    try:
        return round(float(number) * scale)
    except ValueError:
        raise ValueError(f"window {text!r} should be an iperf3 size like 32K or '-'") from None


def measure(run: CaptureRun) -> Measured:
    """Steady goodput (ACK progress after the first quarter), advertised window, RTT."""
    cap = read_capture(run.capture)
    report = inspect_capture(cap)
    if report.adv_window is None or report.rtt_ns is None:
        raise CpasimError(f"{run.capture}: no advertised windows or round trips in the capture")
    return Measured(
        goodput_bps=steady_goodput(cap, report.sender),
        adv_window=int(report.adv_window.max),
        rtt_min_ns=report.rtt_ns.min,
    )


def steady_goodput(cap: Capture, sender: str, skip: float = SKIP_FRACTION) -> float:
    """Bytes acknowledged per second between ``skip`` of the transfer and its last ACK."""
    return flow_steady_goodput(cap.packets, sender, skip, cap.path)[0]


def conditions(run: CaptureRun, extra_delay_ns: float, mtu: int) -> dict[str, str]:
    """Scenario overrides for ``run``'s settings as Linux applies them (see module doc)."""
    if run.window is None:
        raise CpasimError(f"{run.name}: needs an iperf3 -w window (autotuning is not modelled)")
    rate = run.tbf_rate_bps * (mtu + LINK_L2_BYTES) / (mtu + TBF_L2_BYTES)
    return {
        "link.rate": f"{rate:.6g}bps",
        "link.delay": f"{max(0.0, run.delay_ns + extra_delay_ns):.6g}ns",
        "tcp.sndbuf": f"{run.window}B",
        "tcp.rcvbuf": f"{run.window}B",
    }


def held_out(
    base: Config,
    runs: list[CaptureRun],
    calibrate_on: str,
    simulate: Callable[[Config], dict],
    *,
    max_simulations: int = 20,
) -> HeldOut:
    """Calibrate on the run named ``calibrate_on``; predict every other run with a window."""
    by_name = {r.name: r for r in runs}
    if calibrate_on not in by_name:
        raise CpasimError(f"held-out check: no run named {calibrate_on!r} in the manifest")
    cal_run = by_name[calibrate_on]
    cal = measure(cal_run)
    mtu = int(base.value("link.mtu"))
    start = base.with_overrides(conditions(cal_run, 0.0, mtu), where=calibrate_on)
    res = fit(
        start,
        [Target("goodput_bps", cal.goodput_bps, str(cal_run.capture))],
        ["link.delay"],
        simulate,
        max_simulations=max_simulations,
    )
    if "link.delay" not in res.fitted:
        raise CpasimError(
            f"{calibrate_on}: goodput does not depend on link.delay here; "
            "calibrate on a window-limited run"
        )
    extra = res.fitted["link.delay"][1] - cal_run.delay_ns
    calibration = Calibration(cal_run, extra, res.simulations, res.residuals[0].relative)
    predictions = []
    for run in runs:
        if run is cal_run or run.window is None:
            continue
        over = conditions(run, extra, mtu)
        cfg = base.with_overrides(over, where=run.name)
        got = simulate(cfg)["goodput_bps"]
        tp = cfg.rx.tcp
        window = largest_window(
            run.window, tp.core_rmem_max, tp.rx_truesize, mss_for(mtu, tp.timestamps)
        )
        predictions.append(Prediction(run, measure(run), got, over, window))
    return HeldOut(calibration, predictions)
