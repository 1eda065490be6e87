"""The UDP sender's copy cost, fitted to Saidi's table 6.1 (seeds/004, section 6.2.1).

scenarios/udp-stream.toml runs the seed's sender (Linux 2.6.13's UDP send path with
netfilter) on the seed's simulator's I/O bus (M5's, ``bus.kind = "m5"``), where the
driver's tail write per frame crosses the bridge and back, waiting in its queue behind
the NIC's DMA.  One
cost of that sender is fitted, on the PCIe x4 run:

* ``hosts.tx.cpu.cost.copy_send_per_byte`` (``do_csum_partial_copy_from_user``) to
  the copy's 30.69% of the critical path (table 6.1);

by scipy's ``brentq``.  Everything else the runs give is held out against the seed:
the link bandwidth at x1 and x4, the other states' shares of tables 6.1 and 6.2
(``qdisc_restart``'s among them: the tail writes' stall, no cost fitted to it) and
their "% waiting" (the model's core-lent share), the same with ``cpu.irq_preempt`` on.
Usage::

    .venv/bin/python calibration/fit_udp_tables.py [--duration 30ms]

prints each step of the fit and a markdown table for calibration/SEEDS.md (about
two minutes).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from scipy.optimize import brentq

from cpasim.analysis import Transforms, analyze
from cpasim.calibrate.reference import read_reference
from cpasim.config import load_scenario
from cpasim.errors import script_main
from cpasim.predict.runs import traced_run
from cpasim.tracing import open_trace

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "udp-stream.toml"
SAIDI = ROOT / "calibration" / "seeds" / "saidi_ch6.csv"
X1, X4 = "UDP stream PCIe x1", "UDP stream PCIe x4"
COPY = "hosts.tx.cpu.cost.copy_send_per_byte"
CALL = "tx:App:ip_push_pending_frames"
#: The fitted state and the seed's figure for it.
STATE = "tx:App:do_csum_partial_copy_from_user"
TARGET = "critical_state_share do_csum_partial_copy_from_user"


def seed(quantity: str, system: str = X4) -> float:
    """One figure of seeds/saidi_ch6.csv: a fraction, or Gb/s."""
    for fig in read_reference(SAIDI):
        if fig.quantity == quantity and fig.system == system:
            return fig.value / 100.0 if fig.unit == "percent" else fig.value
    raise KeyError(quantity)


def measure(copy: float, duration: str, lanes: int = 4, preempt: bool | None = None) -> dict:
    """Link Gb/s, and ``{path: {state: (share, core-lent share)}}`` with the call kept
    ("full") and scaled away ("without"); ``preempt``: ``cpu.irq_preempt`` if not the
    scenario's."""
    sets = [
        f"sim.duration={duration}",
        "sim.warmup=10ms",
        f"hosts.tx.pcie.lanes={lanes}",
        f"{COPY}={copy}",
    ]
    if preempt is not None:
        sets.append(f"hosts.tx.cpu.irq_preempt={str(preempt).lower()}")
    cfg = load_scenario(SCENARIO, sets=sets)
    with tempfile.TemporaryDirectory() as d:
        run = traced_run(cfg, Path(d) / "run.cpt", window=False)
        out = {"link": run.result["link_utilization"]["tx_to_rx"] * cfg.link.rate / 1e9}
        for path, scale in (("full", []), ("without", [(CALL, 0.0)])):
            res = analyze(
                open_trace(run.trace), run.start, run.end, transforms=Transforms(scale=scale)
            )
            out[path] = {
                m["name"]: (m["share"], m["core_lent_share"]) for m in res.path.most_critical
            }
    return out


def fit(duration: str) -> float:
    def residual(copy: float) -> float:
        share = measure(copy, duration)["full"].get(STATE, (0.0, 0.0))[0]
        print(f"  {COPY}={copy:.3f}: copy {100 * share:.2f}% of the path", flush=True)
        return share - seed(TARGET)

    return brentq(residual, 0.5, 6.0, xtol=0.005)


def table(copy: float, duration: str) -> str:
    off, on = measure(copy, duration), measure(copy, duration, preempt=False)
    x1 = measure(copy, duration, lanes=1)
    rows = [
        "| quantity | seed | model | without cpu.irq_preempt |",
        "|---|---|---|---|",
        f"| link x1 (Gb/s) | {seed('link_bandwidth', X1):.1f} | {x1['link']:.3f} | — |",
        f"| link x4 (Gb/s) | {seed('link_bandwidth'):.1f} | {off['link']:.3f} | {on['link']:.3f} |",
    ]
    for path, label, prefix in (
        ("full", "6.1", ""),
        ("without", "6.2", "without ip_push_pending_frames "),
    ):
        names = {n for run in (off, on) for n in run[path] if ":App:" in n or ":IP Send:" in n}
        for name in sorted(names, key=lambda n: -off[path].get(n, (0, 0))[0]):
            state = name.rsplit(":", 1)[1]
            try:
                share, wait = (
                    seed(f"critical_state_share {prefix}{state}"),
                    seed(f"critical_state_waiting {prefix}{state}"),
                )
                theirs = f"{100 * share:.2f}% ({100 * wait:.2f}%)"
            except KeyError:
                theirs = "—"
            cells = [
                f"{100 * r[path][name][0]:.2f}% ({100 * r[path][name][1]:.1f}%)"
                if name in r[path]
                else "—"
                for r in (off, on)
            ]
            rows.append(f"| {label}: {state} | {theirs} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", default="30ms")
    args = ap.parse_args()
    copy = fit(args.duration)
    print(f"fitted {COPY} = {copy:.2f} cycles/B (target {100 * seed(TARGET):.2f}%)\n")
    print(table(round(copy, 2), args.duration))


if __name__ == "__main__":
    raise SystemExit(script_main("fit_udp_tables", main))
