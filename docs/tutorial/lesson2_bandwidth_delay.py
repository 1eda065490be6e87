"""Lesson 2: bandwidth × delay, where a TCP stream turns from link- to window-limited.

A TCP sender may have at most one receive window of data unacknowledged.  On a
slow link the window is never the limit: the link is busy all the time and the
stream gets the link rate times the share of each frame that is payload,

    link bound   = rate × MSS / (MSS + 40 + 12 + 38)

(MSS = MTU − 40 − 12: IP and TCP headers, the timestamp option; 38 bytes of
Ethernet framing, preamble and gap per frame).  On a fast link the window runs
out before its acknowledgement comes back, and the stream gets one window per
round trip,

    window bound = window / RTT,   RTT = 2 × delay + (data frame + ACK frame) / rate.

The sweep below runs cpasim's whole stack (both hosts, NIC, PCIe, link) over
link rates for two one-way delays with a 64 KiB receive window, and draws the
measured goodput on top of both bounds: it follows the smaller of the two, and
turns at the rate where they cross, sooner the longer the delay.

Where a point sits a few per cent under the window bound, the difference is
the hosts' own time (copies, the stack, DMA over PCIe, interrupts): the RTT
the window waits for is longer than the wire's.  The closed form has no term
for it; lesson 3 shows where that time goes.

Run:  python docs/tutorial/lesson2_bandwidth_delay.py [OUT_DIR]   (default out/tutorial)
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import cpasim  # noqa: E402
from cpasim.plot import link_bound, window_bound  # noqa: E402  (the two closed forms)

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "tcp-stream.toml"
RATES = ["25Mbps", "50Mbps", "100Mbps", "200Mbps", "400Mbps", "800Mbps"]
DELAYS = ["500us", "2ms"]
WINDOW = 64 * 1024  # tcp.rmem: the receive window, in bytes

SETTINGS = {
    "tcp.rmem": "64KiB",  # the window that may limit
    "tcp.wmem": "8MiB",  # a send buffer that never does
    "nic.itr": "off",  # no interrupt throttling: the bounds have no host-latency term
    "sim.duration": "70ms",
    "sim.warmup": "30ms",  # slow start is over by then
}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # Every (rate, delay) pair, on one worker process per core.
    table = cpasim.sweep(
        SCENARIO,
        grid={"link.rate": RATES, "link.delay": DELAYS},
        overrides=SETTINGS,
        progress=False,
    )
    if table.errors:
        raise SystemExit(f"{len(table.errors)} points failed: {table.errors[0]['error']}")

    fig, ax = plt.subplots(figsize=(8, 5))
    fine = np.geomspace(20e6, 1e9, 200)
    for delay, color, marker in zip(DELAYS, ("tab:blue", "tab:red"), "os", strict=True):
        rows = [r for r in table.rows if r["link.delay"] == delay]
        rate = np.array([r["cfg.link.rate"] for r in rows])
        goodput = np.array([r["goodput_bps"] for r in rows])
        mtu, delay_ns = rows[0]["cfg.link.mtu"], rows[0]["cfg.link.delay"]
        window = np.array([window_bound(WINDOW, x, delay_ns, mtu) for x in fine])
        ax.plot(fine / 1e6, window / 1e6, ":", color=color, label=f"window / RTT, delay {delay}")
        label = f"cpasim, delay {delay}"
        ax.plot(rate / 1e6, goodput / 1e6, marker, color=color, ms=7, ls="", label=label)
        crossing = fine[np.argmin(np.abs(window - link_bound(fine, mtu)))]
        ax.axvline(crossing / 1e6, color=color, lw=0.6, alpha=0.5)
        ax.annotate(
            f"turns at {crossing / 1e6:.0f} Mb/s",
            (crossing / 1e6, 22),
            color=color,
            rotation=90,
            ha="right",
            va="bottom",
            fontsize=9,
        )
        for r, g in zip(rate, goodput, strict=True):
            bound = min(link_bound(r, mtu), window_bound(WINDOW, r, delay_ns, mtu))
            print(
                f"delay {delay:>5}  link {r / 1e6:5.0f} Mb/s: goodput {g / 1e6:6.1f} Mb/s, "
                f"min(bounds) {bound / 1e6:6.1f} Mb/s ({g / bound - 1:+.1%})"
            )
        print(f"delay {delay:>5}: window- and link-limited meet at {crossing / 1e6:.0f} Mb/s")
    ax.plot(fine / 1e6, link_bound(fine, mtu) / 1e6, "k-", lw=1, label="link rate × payload share")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [25, 50, 100, 200, 400, 800]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("link rate (Mb/s)")
    ax.set_ylabel("goodput (Mb/s)")
    ax.set_title("TCP goodput against link rate, 64 KiB receive window")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "lesson2_bandwidth_delay.png", dpi=110)
    print(f"wrote {out / 'lesson2_bandwidth_delay.png'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/tutorial"))
