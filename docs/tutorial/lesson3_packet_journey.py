"""Lesson 3: where a packet's time goes, one message's journey through both hosts.

A ping-pong: host tx writes a 1 KiB message, host rx reads it and writes it
back.  With one message in flight at a time, the critical path of the run is
the journey of the messages themselves: every nanosecond of a round trip is
spent in some state of some component, and the analyzer's listing of the path
(``analysis.edges``) says which, in order.  Each entry is a state of a state
machine (``tx:NIC TX:DMA packet``) or a hand-over between two
(``tx:NIC TX->tx:MAC[tx:TX FIFO]``), with the path's length up to there;
since the path of this run is as long as the run, that length is the time.

The lesson picks the first round trip after the warm-up and draws it as a
timeline, one row per component in the order the message meets them:
app → socket → TCP → driver → NIC → PCIe → link, then the other host's
receive side up to its application, and the same way back.  A second chart
adds the time up per layer.  Try it with ``nic.itr=off`` (no interrupt
moderation) or a 64-byte message (``workload.message_size=64B``) to see the
shares move.

Run:  python docs/tutorial/lesson3_packet_journey.py [OUT_DIR]   (default out/tutorial)
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import cpasim  # noqa: E402

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "pingpong.toml"

#: Which layer of the stack a state belongs to: first match of (component, state) wins.
LAYERS = [
    ("socket: copy", lambda sm, state: sm == "App" and "copy" in state),
    ("application", lambda sm, state: sm == "App"),
    ("TCP/IP", lambda sm, state: sm in ("TcpSend", "IP Recv")),
    ("interrupt moderation", lambda sm, state: "Coalesce" in sm),
    ("driver: IRQ, NAPI, xmit", lambda sm, state: sm in ("Driver TX", "ISR", "NAPI")),
    ("PCIe: DMA", lambda sm, state: sm.startswith("NIC") and "DMA" in state),
    ("NIC", lambda sm, state: sm.startswith("NIC")),
    ("link: serialise", lambda sm, state: sm == "MAC"),
    ("link: propagate", lambda sm, state: sm == "Link"),
    ("other", lambda sm, state: True),
]
COLORS = dict(zip([name for name, _ in LAYERS], plt.get_cmap("tab10").colors, strict=True))


def layer(sm: str, state: str) -> str:
    return next(name for name, match in LAYERS if match(sm, state))


def journey(analysis, after_ns: float) -> list[tuple[str, str, str, float, float]]:
    """(host, component, state, start, end) of every step of the first round trip
    that starts after ``after_ns``: from one write by tx's application to the next."""
    edges = analysis.edges
    writes = [
        i
        for i, e in enumerate(edges)
        if e["name"] == "tx:App:TcpSendMsg: copy" and e["cumulative_ns"] > after_ns
    ]
    steps = []
    for e in edges[writes[0] : writes[1]]:
        if e["increment_ns"] <= 0 or "->" in e["name"]:
            continue  # hand-overs take no time in this model's path
        host, sm, state = e["name"].split(":", 2)
        steps.append((host, sm, state, e["cumulative_ns"] - e["increment_ns"], e["cumulative_ns"]))
    return steps


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    run = cpasim.run(SCENARIO, trace=True, **{"sim.duration": "1ms", "sim.warmup": "200us"})
    analysis = cpasim.analyze(run)
    print(
        f"critical path {analysis.critical_path_ns / 1e3:.1f} us of "
        f"{analysis.elapsed_ns / 1e3:.1f} us elapsed: every moment of the run is on it"
    )
    steps = journey(analysis, run.config.sim.warmup)
    t0 = steps[0][3]
    total = steps[-1][4] - t0
    mean = run.latency_ns["mean"]
    print(f"one round trip: {total / 1e3:.1f} us (mean latency {mean / 1e3:.1f} us)")

    rows: list[str] = []  # components in the order the message meets them
    for host, sm, _, _, _ in steps:
        if f"{host}:{sm}" not in rows:
            rows.append(f"{host}:{sm}")
    per_layer: dict[str, float] = {}
    fig, (timeline, totals) = plt.subplots(
        2, 1, figsize=(11, 9), gridspec_kw={"height_ratios": [3, 1.3]}
    )
    for host, sm, state, start, end in steps:
        name = layer(sm, state)
        per_layer[name] = per_layer.get(name, 0.0) + end - start
        y = rows.index(f"{host}:{sm}")
        timeline.barh(y, (end - start) / 1e3, left=(start - t0) / 1e3, color=COLORS[name])
        print(f"  {(start - t0) / 1e3:7.2f} us  +{(end - start) / 1e3:6.2f}  {host}:{sm}:{state}")
    timeline.set_yticks(range(len(rows)), rows)
    timeline.invert_yaxis()
    timeline.set_xlabel("time since tx's application wrote the message (µs)")
    timeline.set_title("One 1 KiB ping-pong round trip along the critical path")
    timeline.grid(True, axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[n]) for n in per_layer]
    timeline.legend(handles, list(per_layer), fontsize=9, loc="lower left")

    ranked = sorted(per_layer.items(), key=lambda kv: kv[1])
    totals.barh(
        [n for n, _ in ranked], [v / 1e3 for _, v in ranked], color=[COLORS[n] for n, _ in ranked]
    )
    for i, (_, v) in enumerate(ranked):
        totals.text(v / 1e3, i, f" {v / 1e3:.1f} µs ({v / total:.0%})", va="center", fontsize=8)
    totals.set_xlim(0, max(per_layer.values()) / 1e3 * 1.3)
    totals.set_xlabel(f"time per layer in the round trip of {total / 1e3:.1f} µs (µs)")
    fig.tight_layout()
    fig.savefig(out / "lesson3_packet_journey.png", dpi=110)
    for name, v in sorted(per_layer.items(), key=lambda kv: -kv[1]):
        print(f"{name:24} {v / 1e3:6.1f} us  {v / total:5.1%}")
    print(f"wrote {out / 'lesson3_packet_journey.png'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/tutorial"))
