"""Simulation speed: TCP segments and SimPy events per second.

Runs the shipped ``tcp-stream`` scenario at 1 and 10 Gb/s (tracing off; the
scenario interrupts once per completion, ``nic.itr=off``, as the seed's set-up
did), once more at 1 Gb/s with the e1000's adaptive interrupt throttling
(``nic.itr=adaptive``, the model's default elsewhere: fewer events per segment),
and a bare SimPy Store + timeout pipeline in the same process, interleaved so
that every figure sees the same machine load.  Times are process CPU time (the
machine is shared: wall time would charge other people's work to us; wall
figures are printed too), best of ``--repeat`` runs.  Targets: >= 30,000
simulated TCP segments per second at 1 Gb/s, and an event rate >= 0.5 of the
bare pipeline's.  Per case it also prints the CPU time per SimPy event against
the bare pipeline's, and the segments per second the model would reach if each
of its events cost no more than a bare SimPy event: the ceiling at its number
of events per segment.

    .venv/bin/python bench/bench_sim.py [--duration 40ms] [--repeat 3] [--series] [--pcap]

``--series`` (off by default) adds the 1 Gb/s case once more recording a time
series at the default interval (``cpasim run --series``), and prints what the
series costs per segment against the same case without it; ``--pcap`` likewise
for writing the capture of the link (``cpasim run --pcap``).
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
from pathlib import Path

import simpy

from cpasim.config import load_scenario
from cpasim.simulate import simulate

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "tcp-stream.toml"
TARGET_SEGMENTS = 30_000
TARGET_RATIO = 0.5
#: (link.rate, extra --set overrides) per case; bench/compare_sim.py runs these too.
CASES = [
    ("1Gbps", []),
    ("10Gbps", []),
    ("1Gbps", ["nic.itr=adaptive"]),
]


def bare_simpy_rate(items: int = 200_000) -> float:
    """Events per CPU-second of a producer -> Store -> consumer-with-timeout pipeline."""
    env = simpy.Environment()
    store = simpy.Store(env, capacity=64)

    def producer():
        for i in range(items):
            yield store.put(i)

    def consumer():
        for _ in range(items):
            yield store.get()
            yield env.timeout(1.0)

    env.process(producer())
    env.process(consumer())
    t0 = time.process_time()
    env.run()
    cpu = time.process_time() - t0
    return next(env._eid) / cpu


def run_once(cfg, **outputs) -> dict:
    """One timed run; ``outputs`` are simulate()'s optional recorders (series, pcap),
    passed only when asked so that older trees without them run the same harness
    (bench/compare_sim.py).  What earlier runs left is collected first: freeing a
    system is not the next run's work (a full collection after 1,000 flows takes a
    quarter of a second, and would otherwise fall in whichever run it met)."""
    gc.collect()
    t0 = time.process_time()
    r = simulate(cfg, **outputs)
    cpu = time.process_time() - t0
    segments = r.frames["tx_to_rx"]
    return {
        "goodput_Mbps": r.goodput_bps / 1e6,
        "segments": segments,
        "events": r.events,
        "drops": sum(r.drops.values()),
        "retransmits": r.retransmits,
        "cpu_s": cpu,
        "wall_s": r.wall_s,
        "segments_per_s": segments / cpu,
        "events_per_s": r.events / cpu,
        "events_per_segment": r.events / max(segments, 1),
    }


def case_config(rate: str, extra: list[str], duration: str, scenario: Path = SCENARIO):
    """The scenario at ``rate`` for ``duration``, measured from time 0 (no warm-up)."""
    return load_scenario(
        scenario, sets=[f"link.rate={rate}", f"sim.duration={duration}", "sim.warmup=0s", *extra]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="40ms", help="simulated time per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument(
        "--series", action="store_true", help="also time the 1 Gb/s case with a time series"
    )
    parser.add_argument(
        "--pcap", action="store_true", help="also time the 1 Gb/s case writing a capture"
    )
    args, _ = parser.parse_known_args()  # bench/run.py passes its own arguments on
    cases = CASES
    cfgs = [case_config(rate, extra, args.duration) for rate, extra in cases]
    bare = 0.0
    best: list[dict | None] = [None] * len(cases)
    with_series: dict | None = None
    with_pcap: dict | None = None
    capture = Path(tempfile.mkdtemp()) / "bench.pcap"
    for _ in range(args.repeat):
        bare = max(bare, bare_simpy_rate())
        for i, cfg in enumerate(cfgs):
            f = run_once(cfg)
            if best[i] is None or f["cpu_s"] < best[i]["cpu_s"]:
                best[i] = f
        if args.series:
            from cpasim.series import default_interval

            f = run_once(cfgs[0], series=default_interval(cfgs[0]))
            if with_series is None or f["cpu_s"] < with_series["cpu_s"]:
                with_series = f
        if args.pcap:
            from cpasim.pcap_spec import DEFAULT_SNAPLEN, PcapSpec

            f = run_once(cfgs[0], pcap=PcapSpec(capture, "tx", DEFAULT_SNAPLEN))
            if with_pcap is None or f["cpu_s"] < with_pcap["cpu_s"]:
                with_pcap = f
    shutil.rmtree(capture.parent)
    print(f"bare SimPy Store+timeout: {bare:,.0f} events/CPU-s ({1e6 / bare:.2f} us/event)")
    for (rate, extra), f in zip(cases, best, strict=True):
        ratio = f["events_per_s"] / bare
        label = f"{rate} {' '.join(extra)}".strip()
        print(
            f"tcp-stream {label}: goodput {f['goodput_Mbps']:6.1f} Mb/s | "
            f"{f['segments']:5d} segments, {f['events']:6d} events, "
            f"{f['events_per_segment']:.1f} events/segment | "
            f"CPU {f['cpu_s']:.3f} s (wall {f['wall_s']:.3f} s) | "
            f"{f['segments_per_s']:7,.0f} segments/s "
            f"(target {TARGET_SEGMENTS:,}: {f['segments_per_s'] / TARGET_SEGMENTS:.2f}x) | "
            f"{f['events_per_s']:8,.0f} events/s, / bare {ratio:.2f} (target {TARGET_RATIO}) | "
            f"{1e6 / f['events_per_s']:.2f} us/event; at the bare cost per event "
            f"{bare / f['events_per_segment']:,.0f} segments/s"
        )
    for flag, f in (("--series", with_series), ("--pcap", with_pcap)):
        if f is None:
            continue
        plain = best[0]
        extra_us = (f["cpu_s"] - plain["cpu_s"]) / plain["segments"] * 1e6
        print(
            f"tcp-stream {cases[0][0]} {flag}: CPU {f['cpu_s']:.3f} s against "
            f"{plain['cpu_s']:.3f} s, {extra_us:+.3f} us/segment; events "
            f"{f['events']} (without: {plain['events']})"
        )


if __name__ == "__main__":
    # Imported here, not above: compare_sim.py imports this module under older
    # revisions of cpasim, which may not have it.
    from cpasim.errors import script_main

    raise SystemExit(script_main("bench_sim", main))
