"""Simulation speed per congestion control: TCP segments per second with each ``tcp.cc``.

Runs the shipped ``tcp-stream`` scenario (1 Gb/s, tracing off, its fixed
socket buffers) with the classic sender it ships with (``tcp.cc=newreno``,
``tcp.sack=false``: RFC 5681/6582) and with Linux's sender (``tcp.sack=true``)
under ``reno``, ``newreno``, ``cubic`` and ``bbr`` (which paces inside TCP), in
three networks:

- ``direct``: the hosts back to back (no bottleneck: the shaper costs nothing);
- ``bottleneck``: ``bottleneck.rate=500Mbps`` with a drop-tail queue of one
  bandwidth-delay product (500 Mb/s x the link's round trip), default overhead;
- ``lossy``: the same shaper with an eighth of that queue, so loss-based senders
  lose segments every few round trips (classic, cubic and bbr only).

Every case is run once per round, round after round, so that a burst of load on
the machine hits all of them; times are process CPU time (wall time would charge
other people's work to us), best of ``--repeat`` runs.  Per case it prints the
goodput, the segments the sender put on the wire (retransmissions included), the
SimPy events per segment, drops and retransmissions, segments per CPU-second and
that rate's ratio to the classic sender's in the same network: what choosing a
congestion control costs in simulation speed.

    .venv/bin/python bench/bench_tcp.py [--duration 40ms] [--repeat 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_sim import run_once  # the same measurement as the simulation benchmark

from cpasim.config import load_scenario

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "tcp-stream.toml"
BOTTLENECK_RATE = "500Mbps"  # half the link, so the queue builds at the router
LOSSY_QUEUE_SHARE = 1 / 8  # of the bandwidth-delay product: a few full-size packets

CLASSIC = ("classic", ["tcp.cc=newreno", "tcp.sack=false"])
SENDERS = [
    CLASSIC,
    ("reno", ["tcp.cc=reno", "tcp.sack=true"]),
    ("newreno", ["tcp.cc=newreno", "tcp.sack=true"]),
    ("cubic", ["tcp.cc=cubic", "tcp.sack=true"]),
    ("bbr", ["tcp.cc=bbr", "tcp.sack=true"]),
]
LOSSY_SENDERS = ("classic", "cubic", "bbr")


def networks() -> list[tuple[str, list[str]]]:
    """(name, --set overrides) per network; the queues are sized from the scenario's round trip."""
    shaper = [f"bottleneck.rate={BOTTLENECK_RATE}"]
    cfg = load_scenario(SCENARIO, sets=shaper)
    bdp = int(cfg.bottleneck.rate * 2 * cfg.link.delay / 1e9 / 8)
    return [
        ("direct", []),
        ("bottleneck", [*shaper, f"bottleneck.queue={bdp}B"]),
        ("lossy", [*shaper, f"bottleneck.queue={int(bdp * LOSSY_QUEUE_SHARE)}B"]),
    ]


def cases() -> list[tuple[str, str, list[str]]]:
    """(network, sender, --set overrides) per case, the classic sender first in each network."""
    out = []
    for net, net_sets in networks():
        for sender, sender_sets in SENDERS:
            if net == "lossy" and sender not in LOSSY_SENDERS:
                continue
            out.append((net, sender, [*net_sets, *sender_sets]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="40ms", help="simulated time per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    args, _ = parser.parse_known_args()  # bench/run.py passes its own arguments on
    todo = cases()
    cfgs = [
        load_scenario(SCENARIO, sets=[f"sim.duration={args.duration}", "sim.warmup=0s", *sets])
        for _, _, sets in todo
    ]
    best: list[dict | None] = [None] * len(todo)
    for _ in range(args.repeat):
        for i, cfg in enumerate(cfgs):
            f = run_once(cfg)
            if best[i] is None or f["cpu_s"] < best[i]["cpu_s"]:
                best[i] = f
    results = list(zip(todo, best, strict=True))
    classic = {net: f for (net, sender, _), f in results if sender == CLASSIC[0]}
    for (net, sender, sets), f in results:
        ratio = f["segments_per_s"] / classic[net]["segments_per_s"]
        shaper = " ".join(s for s in sets if s.startswith("bottleneck."))
        print(
            f"tcp-stream 1Gbps {net:10s} {sender:7s}: goodput {f['goodput_Mbps']:6.1f} Mb/s | "
            f"{f['segments']:5d} segments, {f['events']:6d} events, "
            f"{f['events_per_segment']:.1f} events/segment | "
            f"{f['drops']:4d} drops, {f['retransmits']:4d} retransmits | "
            f"CPU {f['cpu_s']:.3f} s (wall {f['wall_s']:.3f} s) | "
            f"{f['segments_per_s']:7,.0f} segments/s, / classic {ratio:.2f}"
            + (f" | {shaper}" if shaper else "")
        )


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_tcp", main))
