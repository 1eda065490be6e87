"""Simulation speed with many flows: TCP segments per second with 1 to 1,000 bulk flows.

The flows share a 1 Gb/s link (1 ms each way) through a 500 Mb/s bottleneck with a
2 MB drop-tail queue, Linux's CUBIC with SACK, tracing off: ``[[flows]]`` of 1, 4,
100 and 1,000 bulk flows, and 4 with a ping flow added (an ICMP echo every 1 ms).
Per case: segments sent tx -> rx, SimPy events, events per segment, and segments
and events per CPU-second (process time of ``simulate()``, building the system and
collecting the results included; best of ``--repeat``: the machine is shared), each
against the one-flow case.  What is held: events per segment do not grow with the
number of flows, and 1,000 flows keep at least 0.9 of one flow's event rate.  The
cases run one after the other in each round, so every figure sees the same machine
load.

What the cases do besides being many: the queue holds some 1,300 full segments.  One
and four flows lose nothing in 400 ms; 100 flows overrun it in slow start (some
3,100 drops).  1,000 flows' initial windows alone (10 segments each, 14.5 MB) are
seven times the queue, and even at two segments each their windows (2.9 MB) exceed
the queue and the path (125 kB): 1,000 flows lose, time out and recover all through
the run (12,717 drops and 9,234 retransmissions in 400 ms), work one flow does not
do.  ``--queue 16MB`` gives a queue that holds the initial windows, to tell the cost
of the flows' number from that of their loss recovery (they still overrun it
later in slow start).

    .venv/bin/python bench/bench_flows.py [--duration 400ms] [--repeat 3] [--queue 2MB]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

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
#: (label, bulk flows, with a ping flow)
CASES = [
    ("1 flow", 1, False),
    ("4 flows", 4, False),
    ("100 flows", 100, False),
    ("1000 flows", 1000, False),
    ("4 flows + ping", 4, True),
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
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument("--queue", default=QUEUE, help="the bottleneck's queue")
    args, _ = parser.parse_known_args()  # bench/run.py passes its own arguments on
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        cfgs = [case_config(n, ping, args.duration, where, args.queue) for _, n, ping in CASES]
        best: list[dict | None] = [None] * len(CASES)
        for _ in range(args.repeat):
            for i, cfg in enumerate(cfgs):
                f = run_once(cfg)
                if best[i] is None or f["cpu_s"] < best[i]["cpu_s"]:
                    best[i] = f
    one = best[0]
    for (label, _, _), f in zip(CASES, best, strict=True):
        print(
            f"{label:15}: goodput {f['goodput_Mbps']:6.1f} Mb/s, retransmits "
            f"{f['retransmits']:5d} | {f['segments']:6d} segments, {f['events']:7d} events, "
            f"{f['events_per_segment']:5.1f} events/segment "
            f"(x{f['events_per_segment'] / one['events_per_segment']:.2f}) | "
            f"CPU {f['cpu_s']:.2f} s | {f['segments_per_s']:7,.0f} segments/s "
            f"(x{f['segments_per_s'] / one['segments_per_s']:.2f}) | "
            f"{f['events_per_s']:8,.0f} events/s (x{f['events_per_s'] / one['events_per_s']:.2f})"
        )
    many = best[[n for _, n, _ in CASES].index(1000)]
    ratio = many["events_per_s"] / one["events_per_s"]
    print(
        f"1,000 flows keep {ratio:.2f} of one flow's event rate (target {TARGET_RATE_RATIO}); "
        f"events per segment x{many['events_per_segment'] / one['events_per_segment']:.2f}"
    )


if __name__ == "__main__":
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_flows", main))
