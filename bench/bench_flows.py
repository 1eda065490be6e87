"""Simulation speed with many flows: TCP segments per second with 1 to 1,000 bulk flows.

The flows share a 1 Gb/s link (1 ms each way) through a 500 Mb/s bottleneck with a
2 MB drop-tail queue, Linux's CUBIC with SACK, tracing off: ``[[flows]]`` of 1, 4,
100 and 1,000 bulk flows, 4 with a ping flow added (an ICMP echo every 1 ms), and
1,000 again with a 16 MB queue.  Per case: segments sent tx -> rx, SimPy events,
events per segment, and segments and events per CPU-second (process time of
``simulate()``, building the system and collecting the results included), each
against the one-flow case.  The cases run one after the other in each round, so
the cases of a round see the same machine load.  The figures are each case's best
run; the ratios held are the median over the rounds of each round's own ratio,
which the load moves less than it moves any one run (the lowest and highest round
are printed beside it).

What is held: events per segment do not grow with the number of flows, and 1,000
flows keep at least 0.9 of one flow's event rate.  The two 1,000-flow cases tell
the cost of the flows' number from that of what 1,000 flows do besides being many.
Through the 2 MB queue (some 1,300 full segments) their initial windows alone (10
segments each, 14.5 MB) are seven times the queue, and even at two segments each
their windows (2.9 MB) exceed the queue and the path (125 kB): 1,000 flows lose,
time out and recover all through the run (12,717 drops and 9,234 retransmissions in
400 ms), the sender's qdisc stays full and its ACKs wait behind it, work and
waiting data one flow does not have (one and four flows lose nothing in 400 ms, 100
flows overrun the queue in slow start: some 3,100 drops).  The 16 MB queue holds
the initial windows (the flows still overrun it later in slow start).  One flow's
run is the same with either queue (it never fills 2 MB in 400 ms), so it is the
reference of both.  ``--queue`` sets the queue of the other cases.

    .venv/bin/python bench/bench_flows.py [--duration 400ms] [--repeat 3] [--queue 2MB]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from statistics import median

from cpasim.config import load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import run_once  # noqa: E402  (the same timed run as bench_sim's)

SCENARIO = """
[sim]
duration = "{duration}"
warmup = "0s"

[link]
rate = "1Gbps"
delay = "1ms"

[bottleneck]
rate = "500Mbps"
queue = "{queue}"

[[flows]]
count = {count}
{ping}
"""
PING = """
[[flows]]
kind = "ping"
workload.interval = "1ms"
"""
#: (label, bulk flows, with a ping flow, the queue: None for ``--queue``)
CASES = [
    ("1 flow", 1, False, None),
    ("4 flows", 4, False, None),
    ("100 flows", 100, False, None),
    ("1000 flows", 1000, False, None),
    ("4 flows + ping", 4, True, None),
    ("1000 flows, 16MB", 1000, False, "16MB"),
]
#: The bottleneck's queue (``--queue``).
QUEUE = "2MB"
#: 1,000 flows keep at least this share of one flow's events per CPU-second.
TARGET_RATE_RATIO = 0.9


def case_config(count: int, ping: bool, duration: str, where: Path, queue: str = QUEUE):
    path = where / f"flows_{count}_{int(ping)}.toml"
    text = SCENARIO.format(duration=duration, queue=queue, count=count, ping=PING if ping else "")
    path.write_text(text)
    return load_scenario(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="400ms", help="simulated time per run")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every case")
    parser.add_argument("--queue", default=QUEUE, help="the bottleneck's queue")
    args, _ = parser.parse_known_args()  # bench/run.py passes its own arguments on
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        cfgs = [
            case_config(n, ping, args.duration, where, queue or args.queue)
            for _, n, ping, queue in CASES
        ]
        rounds = [[run_once(cfg) for cfg in cfgs] for _ in range(args.repeat)]
    best = [min((r[i] for r in rounds), key=lambda f: f["cpu_s"]) for i in range(len(CASES))]
    one = best[0]
    for (label, _, _, _), f in zip(CASES, best, strict=True):
        print(
            f"{label:17}: goodput {f['goodput_Mbps']:6.1f} Mb/s, retransmits "
            f"{f['retransmits']:5d} | {f['segments']:6d} segments, {f['events']:7d} events, "
            f"{f['events_per_segment']:5.1f} events/segment "
            f"(x{f['events_per_segment'] / one['events_per_segment']:.2f}) | "
            f"CPU {f['cpu_s']:.2f} s | {f['segments_per_s']:7,.0f} segments/s "
            f"(x{f['segments_per_s'] / one['segments_per_s']:.2f}) | "
            f"{f['events_per_s']:8,.0f} events/s (x{f['events_per_s'] / one['events_per_s']:.2f})"
        )
    for i, (label, n, _, _) in enumerate(CASES):
        if n != 1000:
            continue
        # Each round's own ratio: both runs of a round met the same machine.
        ratios = sorted(r[i]["events_per_s"] / r[0]["events_per_s"] for r in rounds)
        held = "met" if median(ratios) >= TARGET_RATE_RATIO else "MISSED"
        print(
            f"{label}: event rate x{median(ratios):.3f} of one flow's, median of "
            f"{len(ratios)} rounds (lowest x{ratios[0]:.2f}, highest x{ratios[-1]:.2f}; "
            f"best runs x{best[i]['events_per_s'] / one['events_per_s']:.2f}): target "
            f"{TARGET_RATE_RATIO} {held}; events per segment "
            f"x{best[i]['events_per_segment'] / one['events_per_segment']:.2f}"
        )


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_flows", main))
